"""GPU totals as torch reports them, each quoted from a public source.

vLLM's memory profile starts from the device's total memory as torch reads it
(``torch.accelerator.get_memory_info``, vllm/utils/mem_utils.py
``MemorySnapshot.measure``, vLLM 0.26), which is a few hundred MiB less than the
driver's figure in :mod:`kvpure.serve.gpus`. This module records, for the
catalogue GPUs where a public issue shows it, that figure with the text it was
read from:

- ``bytes``: the CUDA runtime's ``totalGlobalMem`` printed in bytes (CUDA's
  ``deviceQuery``: "Total amount of global memory: N MBytes (B bytes)"), the
  same field torch's ``total_memory`` holds: exact;
- ``gib``: a figure printed in GiB to two decimals, by vLLM ("Free memory on
  device (F/T GiB) on startup") or by torch's out-of-memory message ("GPU 0 has
  a total capacity of T GiB", older torch "(GPU 0; T GiB total capacity"):
  rounded, hence a band of 0.005 GiB.

Boards of one model differ a little (driver, ECC, board revision): where
sources disagree the recorded total spans them all (:func:`torch_total`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from kvpure.errors import InvalidFieldError

__all__ = ["TOTAL_QUOTES", "TorchTotal", "TotalQuote", "figure_bytes", "torch_total"]

_GIB: Final = 2**30
#: Half the last printed digit of a two-decimal GiB figure.
GIB_ROUNDING: Final = math.ceil(0.005 * _GIB)
_BYTES_FIGURE: Final = re.compile(r"\((\d+) bytes\)")
_GIB_FIGURE: Final = re.compile(r"(\d+\.\d\d) ?GiB")


@dataclass(frozen=True, slots=True, kw_only=True)
class TotalQuote:
    """One source's figure: the quoted text, the figure in it, and its bytes."""

    gpu: str
    url: str
    quote: str
    """The source's words, verbatim (whitespace runs may be collapsed)."""
    figure: str
    """The part of ``quote`` that gives the total: ``(B bytes)`` or ``T GiB``."""
    bytes: int
    """The total the figure states: exact bytes, or the GiB figure times 2**30."""
    context: str
    """What in the source names the GPU (title, device line or the author's words)."""

    @property
    def kind(self) -> str:
        """``bytes`` (exact) or ``gib`` (two decimals)."""
        return "bytes" if self.figure.endswith("bytes)") else "gib"

    @property
    def error_bytes(self) -> int:
        """The half-width of the figure's rounding band."""
        return 0 if self.kind == "bytes" else GIB_ROUNDING


def figure_bytes(figure: str) -> int:
    """The bytes a printed figure states: ``(42298834944 bytes)`` or ``79.32 GiB``."""
    exact = _BYTES_FIGURE.fullmatch(figure)
    if exact is not None:
        return int(exact.group(1))
    gib = _GIB_FIGURE.fullmatch(figure)
    if gib is not None:
        return round(float(gib.group(1)) * _GIB)
    raise InvalidFieldError(
        field="figure",
        value=figure,
        reason="expected '(N bytes)' or a two-decimal 'X.YZ GiB' figure",
    )


def _q(gpu: str, url: str, quote: str, figure: str, value: int, context: str) -> TotalQuote:
    return TotalQuote(gpu=gpu, url=url, quote=quote, figure=figure, bytes=value, context=context)


_GH: Final = "https://github.com/"

#: Every recorded figure, by catalogue name. The bytes are written out, not
#: computed, so that a test reading them back from ``figure`` can fail.
TOTAL_QUOTES: Final[dict[str, tuple[TotalQuote, ...]]] = {
    "H100-NVL": (
        _q(
            "H100-NVL",
            _GH + "ali-vilab/VACE/issues/56",
            "GPU 0 has a total capacity of 93.00 GiB of which 1.08 GiB is free.",
            "93.00 GiB",
            99_857_989_632,
            "'I've had the same issue even with an H100 NVL 94GB VRAM (RunPod)'",
        ),
    ),
    "H200": (
        _q(
            "H200",
            _GH + "sungwon-chae/arxiv_confi/blob/main/etu_logging.md",
            "CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacity of "
            "139.81 GiB of which 24.12 MiB is free.",
            "139.81 GiB",
            150_119_844_413,
            "'GPU 0: NVIDIA H200 (139.8 GB)' (the script's device list above the error)",
        ),
    ),
    "RTX-PRO-6000": (
        _q(
            "RTX-PRO-6000",
            _GH + "antirez/ds4/issues/431",
            "ds4: CUDA q8 fp16 cache budget exhausted; using q8 kernels (request=16.00 MiB "
            "cached=10.29 GiB free=3.12 GiB reserve=4.75 GiB total=94.97 GiB)",
            "94.97 GiB",
            101_973_261_025,
            "title: 'no longer works on 96GB RTX Pro 6000 Blackwell with default options' "
            "(the CUDA runtime's total, cudaMemGetInfo, as torch reads it)",
        ),
    ),
    "A100-80GB": (
        _q(
            "A100-80GB",
            _GH + "vllm-project/vllm-omni/issues/276",
            "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than "
            "desired GPU memory utilization (0.6, 47.59 GiB).",
            "79.32 GiB",
            85_169_201_480,
            "title: '... when serving Qwen3-Omni-30B-A3B-Instruct with 2\u00d7A100 (80GB)'",
        ),
        _q(
            "A100-80GB",
            _GH + "lianqi1008/Control-GIC/issues/6",
            "GPU 0 has a total capacity of 79.14 GiB of which 58.59 GiB is free.",
            "79.14 GiB",
            84_975_927_951,
            "'My test graphics card is a single NVIDIA A100 card which has 80GB of video memory.'",
        ),
        _q(
            "A100-80GB",
            _GH + "levihsu/OOTDiffusion/issues/235",
            "CUDA out of memory. Tried to allocate 30.00 GiB (GPU 0; 79.25 GiB total capacity;",
            "79.25 GiB",
            85_094_039_552,
            "title: 'my day a100 error is low on memory' (79.25 GiB: the 80GB board)",
        ),
    ),
    "A100-40GB": (
        _q(
            "A100-40GB",
            _GH + "bottlerocket-os/bottlerocket/pull/3873",
            "Total amount of global memory: 40339 MBytes (42298834944 bytes)",
            "(42298834944 bytes)",
            42_298_834_944,
            'deviceQuery: Device 2: "NVIDIA A100-SXM4-40GB"',
        ),
    ),
    "L40S": (
        _q(
            "L40S",
            _GH + "Wan-Video/Wan2.1/issues/205",
            "GPU 0 has a total capacity of 44.53 GiB of which 91.25 MiB is free.",
            "44.53 GiB",
            47_813_723_423,
            "'GPU:L40S  48GB'",
        ),
        _q(
            "L40S",
            _GH + "stepfun-ai/Step-Video-T2V/issues/8",
            "GPU  has a total capacity of 44.42 GiB of which 118.12 MiB is free.",
            "44.42 GiB",
            47_695_611_822,
            "title: 'Run 8*L40S OOM'",
        ),
    ),
    "T4": (
        _q(
            "T4",
            _GH + "hpcaitech/Open-Sora/issues/697",
            "GPU 0 has a total capacity of 14.75 GiB of which 73.06 MiB is free.",
            "14.75 GiB",
            15_837_691_904,
            "'I am running to following code on Google Colab with T4 GPU'",
        ),
        _q(
            "T4",
            _GH + "zai-org/CogVideo/issues/741",
            "GPU 0 has a total capacity of 14.74 GiB of which 196.12 MiB is free.",
            "14.74 GiB",
            15_826_954_486,
            "'Your Colab notebooks do not work on T4 GPU.'",
        ),
        _q(
            "T4",
            _GH + "Zheng-Chong/CatVTON/issues/133",
            "GPU 0 has a total capacity of 14.56 GiB of which 10.22 GiB is free.",
            "14.56 GiB",
            15_633_680_957,
            "title: 'CUDA out of memory (trying to use 36Gb on Tesla T4 + GCP)'",
        ),
        _q(
            "T4",
            "https://chiemon.github.io/2024/12/25/%E6%98%BE%E5%8D%A1%E4%BF%A1%E6%81%AF.html",
            "Total amount of global memory: 15110 MBytes (15843721216 bytes)",
            "(15843721216 bytes)",
            15_843_721_216,
            'deviceQuery: Device 0: "Tesla T4"',
        ),
    ),
    "L4": (
        _q(
            "L4",
            _GH + "pytorch/pytorch/issues/175666",
            "free memory on device cuda:0 (19.77/22.05 GiB) on startup is less than desired "
            "GPU memory utilization (0.9, 19.84 GiB)",
            "22.05 GiB",
            23_676_007_219,
            "'NVIDIA L4 (22.05 GiB)' (the issue's environment list; vLLM prints torch's total)",
        ),
    ),
    "A10": (
        _q(
            "A10",
            _GH + "zai-org/CogVLM/issues/236",
            "GPU 0 has a total capacty of 21.99 GiB of which 67.00 MiB is free.",
            "21.99 GiB",
            23_611_582_710,
            "'I am trying to run the model using on lambdalabs GPUs instances a10 and h100' "
            "(21.99 GiB: the A10)",
        ),
    ),
    "A10G": (
        _q(
            "A10G",
            _GH + "XavierXiao/Dreambooth-Stable-Diffusion/issues/18",
            "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 22.20 GiB total capacity;",
            "22.20 GiB",
            23_837_068_493,
            "'I am running it on a g5.12xlarge with 4 GPUs' (AWS g5: NVIDIA A10G)",
        ),
    ),
    "MI355X": (
        _q(
            "MI355X",
            _GH + "ROCm/TheRock/issues/2118",
            "GPU 0 has a total capacity of 287.98 GiB of which 275.86 GiB is free.",
            "287.98 GiB",
            309_216_170_476,
            "'Pulling logs from gfx950' (gfx950: MI350X/MI355X, 288 GB each)",
        ),
    ),
    "RTX-4090": (
        _q(
            "RTX-4090",
            _GH + "zai-org/CogVideo/issues/36",
            "CUDA out of memory. Tried to allocate 4.56 GiB (GPU 0; 23.68 GiB total capacity;",
            "23.68 GiB",
            25_426_206_392,
            "title: '4090显卡CUDA out of memory'",
        ),
        _q(
            "RTX-4090",
            _GH + "3DTopia/Phidias-Diffusion/issues/8",
            "GPU 0 has a total capacty of 23.64 GiB of which 8.26 GiB is free.",
            "23.64 GiB",
            25_383_256_719,
            "title: 'The 4090 GPU out of CUDA memory'",
        ),
    ),
    "RTX-5090": (
        _q(
            "RTX-5090",
            _GH + "aikitoria/open-gpu-kernel-modules/issues/1",
            "Total amount of global memory: 32117 MBytes (33677180928 bytes)",
            "(33677180928 bytes)",
            33_677_180_928,
            'deviceQuery: Device 2: "NVIDIA GeForce RTX 5090"',
        ),
        _q(
            "RTX-5090",
            _GH + "Wan-Video/Wan2.1/issues/465",
            "GPU 0 has a total capacity of 31.37 GiB of which 15.88 MiB is free.",
            "31.37 GiB",
            33_683_281_019,
            "'My graphics card is a 5090 with 32GB of video memory.'",
        ),
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchTotal:
    """A GPU's recorded torch total: the middle of its sources' span and the half-width."""

    bytes: int
    error_bytes: int
    quotes: tuple[TotalQuote, ...]

    @property
    def exact(self) -> bool:
        """Whether every source gives the same exact byte count."""
        return self.error_bytes == 0


def torch_total(name: str) -> TorchTotal | None:
    """The recorded total of the catalogue GPU ``name``, or None when none is recorded.

    The band spans every source: from the lowest figure's low end to the highest
    figure's high end (a two-decimal GiB figure reaches 0.005 GiB either side).
    """
    quotes = TOTAL_QUOTES.get(name)
    if not quotes:
        return None
    low = min(q.bytes - q.error_bytes for q in quotes)
    high = max(q.bytes + q.error_bytes for q in quotes)
    middle = (low + high) // 2
    return TorchTotal(bytes=middle, error_bytes=high - middle, quotes=quotes)
