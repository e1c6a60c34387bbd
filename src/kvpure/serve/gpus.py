"""The GPUs ``--gpu NAME`` knows, and custom ones (``--gpu-memory``).

A :class:`GPU` holds what vLLM 0.26 reads from the device when it picks its
defaults:

- ``device_name``: what ``torch.cuda.get_device_name()`` returns; vLLM's
  ``EngineArgs.get_batch_defaults`` looks for ``"a100"`` in it;
- ``total_memory_bytes``: the device's total memory; the same function compares
  it with 70 GiB;
- ``compute_capability``: ``(major, minor)``; the CUDA platform's backend
  priority lists (``vllm/platforms/cuda.py``) branch on the major version and
  each backend states the capabilities it runs on. AMD GPUs carry their
  ``gfx`` target and the capability ROCm reports for it (gfx942 -> 9.4);
- ``vendor``: ``nvidia`` (CUDA platform) or ``amd`` (ROCm platform).

Memory figures are the driver's total memory (``nvidia-smi --query-gpu=memory.total``,
``rocm-smi``) in MiB, as public nvidia-smi/rocm-smi output commonly shows it
for each board; drivers and board variants differ by up to a few hundred MiB,
and torch reports a few hundred MiB less (PyTorch out-of-memory messages on
H100 80GB boards say "total capacity of 79.15-79.25 GiB"; the torch totals
quoted for some boards are in :mod:`kvpure.serve.gpu_totals`). No listed GPU lies
within 5 GiB of vLLM's 70 GiB line (a test checks it), so none of these
differences can change a default. The plan itself never
reads total memory: the KV cache memory is given (``--kv-cache-memory``), as
vLLM's "Available KV cache memory" line prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int

__all__ = ["GPU", "GPUS", "VENDORS", "custom_gpu", "find_gpu", "known_gpu_names"]

VENDORS: Final = ("nvidia", "amd")
_MIB: Final = 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class GPU:
    """One GPU model, with the facts vLLM 0.26's defaults read from it."""

    name: str
    device_name: str
    total_memory_bytes: int
    compute_capability: tuple[int, int]
    vendor: str = "nvidia"
    arch: str = ""
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_int("total_memory_bytes", self.total_memory_bytes, minimum=1)
        if self.vendor not in VENDORS:
            raise InvalidFieldError(
                field="vendor", value=self.vendor, reason="must be one of " + ", ".join(VENDORS)
            )
        major, minor = self.compute_capability
        check_int("compute_capability major", major, minimum=1)
        check_int("compute_capability minor", minor, minimum=0)

    @property
    def is_rocm(self) -> bool:
        """Whether vLLM runs it on its ROCm platform (AMD Instinct)."""
        return self.vendor == "amd"

    @property
    def capability_text(self) -> str:
        """``9.0`` (NVIDIA) or ``gfx942 (9.4)`` (AMD)."""
        text = f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        return f"{self.arch} ({text})" if self.arch else text


def _nvidia(
    name: str, device: str, mib: int, cc: tuple[int, int], *aliases: str
) -> tuple[str, GPU]:
    gpu = GPU(
        name=name,
        device_name=device,
        total_memory_bytes=mib * _MIB,
        compute_capability=cc,
        arch=f"sm_{cc[0]}{cc[1]}",
        aliases=aliases,
    )
    return name, gpu


def _amd(name: str, device: str, mib: int, gfx: str, *aliases: str) -> tuple[str, GPU]:
    # ROCm reports gfx9xy as capability (9, x): gfx942 -> 9.4, gfx950 -> 9.5.
    gpu = GPU(
        name=name,
        device_name=device,
        total_memory_bytes=mib * _MIB,
        compute_capability=(int(gfx[3]), int(gfx[4])),
        vendor="amd",
        arch=gfx,
        aliases=aliases,
    )
    return name, gpu


#: Name -> GPU. Memory in MiB as the driver reports it; compute capability from
#: NVIDIA's CUDA GPU table (developer.nvidia.com/cuda-gpus) and AMD's ROCm
#: hardware table (rocm.docs.amd.com, "GPU hardware specifications").
GPUS: Final[dict[str, GPU]] = dict(
    (
        _nvidia("H100-80GB", "NVIDIA H100 80GB HBM3", 81559, (9, 0), "H100", "H100-SXM"),
        _nvidia("H100-PCIE", "NVIDIA H100 PCIe", 81559, (9, 0)),
        _nvidia("H100-NVL", "NVIDIA H100 NVL", 95830, (9, 0)),
        _nvidia("H200", "NVIDIA H200", 143771, (9, 0), "H200-SXM", "H200-141GB"),
        _nvidia("H20", "NVIDIA H20", 97871, (9, 0)),
        _nvidia("GH200", "NVIDIA GH200 480GB", 97871, (9, 0)),
        _nvidia("A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, (8, 0), "A100-SXM4-40GB"),
        _nvidia("A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, (8, 0), "A100", "A100-SXM4-80GB"),
        _nvidia("A10G", "NVIDIA A10G", 23028, (8, 6)),
        _nvidia("A10", "NVIDIA A10", 23028, (8, 6)),
        _nvidia("L4", "NVIDIA L4", 23034, (8, 9)),
        _nvidia("L40S", "NVIDIA L40S", 46068, (8, 9)),
        _nvidia("RTX-4090", "NVIDIA GeForce RTX 4090", 24564, (8, 9), "4090"),
        _nvidia("RTX-5090", "NVIDIA GeForce RTX 5090", 32607, (12, 0), "5090"),
        _nvidia(
            "RTX-PRO-6000",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            97887,
            (12, 0),
        ),
        _nvidia("T4", "Tesla T4", 15360, (7, 5)),
        _nvidia("B200", "NVIDIA B200", 183359, (10, 0)),
        _nvidia("GB200", "NVIDIA GB200", 189471, (10, 0)),
        _nvidia("B300", "NVIDIA B300 SXM6 AC", 275040, (10, 3)),
        _amd("MI300X", "AMD Instinct MI300X", 196592, "gfx942"),
        _amd("MI325X", "AMD Instinct MI325X", 262128, "gfx942"),
        _amd("MI355X", "AMD Instinct MI355X", 294896, "gfx950"),
    )
)


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


_BY_KEY: Final = {_key(alias): gpu for gpu in GPUS.values() for alias in (gpu.name, *gpu.aliases)}


def known_gpu_names() -> tuple[str, ...]:
    """The catalogue's names, in catalogue order."""
    return tuple(GPUS)


def find_gpu(name: str) -> GPU:
    """The GPU called ``name`` (case, dashes and spaces ignored: ``h100 80gb``, ``H100``)."""
    gpu = _BY_KEY.get(_key(name)) if isinstance(name, str) else None
    if gpu is None:
        raise InvalidFieldError(
            field="--gpu",
            value=name,
            reason="unknown GPU; known: " + ", ".join(GPUS) + " (or describe it with "
            "--gpu-memory SIZE [--gpu-capability X.Y] [--gpu-vendor nvidia|amd])",
        )
    return gpu


def custom_gpu(
    *,
    total_memory_bytes: int,
    compute_capability: tuple[int, int] = (9, 0),
    vendor: str = "nvidia",
    name: str = "custom",
) -> GPU:
    """A GPU not in the catalogue, described by its memory, capability and vendor."""
    return GPU(
        name=name,
        device_name=name,
        total_memory_bytes=total_memory_bytes,
        compute_capability=compute_capability,
        vendor=vendor,
    )
