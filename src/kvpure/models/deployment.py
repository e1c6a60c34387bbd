"""The deployment options: what ``vllm serve`` flags decide about the KV cache.

:class:`Deployment` holds them as one frozen value, named as vLLM's flags
(``--kv-cache-memory``, ``--block-size``, ``--max-model-len``,
``--kv-cache-dtype``, ``--tensor-parallel-size``, ...). The ``parse_*``
functions turn command-line text into those values and raise
:class:`~kvpure.errors.InvalidFieldError` naming the option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kvpure.errors import InvalidFieldError

__all__ = [
    "KV_CACHE_DTYPES",
    "MAMBA_CACHE_MODES",
    "MODEL_DTYPES",
    "AttentionBackend",
    "Deployment",
    "parse_bool",
    "parse_max_model_len",
    "parse_memory_bytes",
    "parse_positive_int",
]

KV_CACHE_DTYPES: Final = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
MODEL_DTYPES: Final = ("auto", "bfloat16", "float16", "float32")
MAMBA_CACHE_MODES: Final = ("none", "align", "all")


class AttentionBackend(Enum):
    """An attention backend, with the facts about it the KV cache depends on."""

    FLASH_ATTN = "FLASH_ATTN"
    FLASHINFER = "FLASHINFER"
    TRITON_ATTN = "TRITON_ATTN"
    FLASHMLA = "FLASHMLA"
    TRITON_MLA = "TRITON_MLA"
    CUTLASS_MLA = "CUTLASS_MLA"

    @property
    def is_mla(self) -> bool:
        """Whether this backend runs MLA (latent) attention."""
        return self in _MLA_BACKENDS

    @property
    def indexes_kv_by_block_stride(self) -> bool:
        """True when num_blocks is the outermost dim of the backend's layout.

        FlashAttention, FlashInfer and Triton keep blocks outermost (stride
        order ``(1, 0, ...)`` with the layer dim); the MLA layout is the
        identity order, so False.
        """
        return not self.is_mla

    @property
    def kernel_block_alignment(self) -> int:
        """The smallest kernel block size the backend supports (for hybrid alignment)."""
        return {
            AttentionBackend.FLASH_ATTN: 16,
            AttentionBackend.FLASHINFER: 16,
            AttentionBackend.TRITON_ATTN: 16,
            AttentionBackend.FLASHMLA: 64,
            AttentionBackend.TRITON_MLA: 1,
            AttentionBackend.CUTLASS_MLA: 128,
        }[self]

    @property
    def default_block_size(self) -> int:
        """The block size vLLM picks with this backend when none is given."""
        return {AttentionBackend.FLASHMLA: 64, AttentionBackend.CUTLASS_MLA: 128}.get(self, 16)


_MLA_BACKENDS: Final = frozenset(
    {AttentionBackend.FLASHMLA, AttentionBackend.TRITON_MLA, AttentionBackend.CUTLASS_MLA}
)


def _check(field: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at least {minimum}")


def _check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidFieldError(
            field=field, value=value, reason="must be one of " + ", ".join(choices)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """How the model is served; every field is one vLLM option.

    - ``kv_cache_memory_bytes``: KV cache memory per GPU (``--kv-cache-memory``).
    - ``block_size``: tokens per block; None = the backend's default (16, or
      64 for FlashMLA, 128 for CUTLASS MLA). Attention + Mamba hybrids raise it
      to fit a Mamba state in one page.
    - ``max_model_len``: None = the model's own limit; ``auto_fit_max_model_len``
      asks the planner to shrink it to what fits (vLLM's ``--max-model-len -1``).
    - ``kv_cache_dtype``: ``auto`` = the model dtype; ``fp8`` / ``fp8_e4m3``
      = float8_e4m3fn with per-tensor scales; ``fp8_e5m2``.
    - ``dtype``: the model dtype (``auto`` = config.json's ``torch_dtype``,
      float32 served as bfloat16, as vLLM does).
    - ``mamba_ssm_cache_dtype``: ``auto`` = the model dtype.
    - ``tensor_parallel_size``, ``pipeline_parallel_size``.
    - ``num_gpu_blocks_override``, ``enable_prefix_caching`` (None = vLLM's
      default: on, except for Mamba hybrids in cache mode ``none``),
      ``enable_hybrid_kv_cache_manager``, ``attention_backend`` (None =
      FlashAttention, or FlashMLA for MLA models), ``max_num_batched_tokens``,
      ``mamba_cache_mode``.
    """

    kv_cache_memory_bytes: int
    block_size: int | None = None
    max_model_len: int | None = None
    auto_fit_max_model_len: bool = False
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    num_gpu_blocks_override: int | None = None
    enable_prefix_caching: bool | None = None
    enable_hybrid_kv_cache_manager: bool = True
    attention_backend: AttentionBackend | None = None
    max_num_batched_tokens: int = 8192
    mamba_cache_mode: str = "none"

    def __post_init__(self) -> None:
        _check("kv_cache_memory_bytes", self.kv_cache_memory_bytes, 0)
        _check("block_size", self.block_size, 1)
        _check("max_model_len", self.max_model_len, 1)
        _check("tensor_parallel_size", self.tensor_parallel_size, 1)
        _check("pipeline_parallel_size", self.pipeline_parallel_size, 1)
        _check("num_gpu_blocks_override", self.num_gpu_blocks_override, 1)
        _check("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _check_choice("kv_cache_dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        _check_choice("dtype", self.dtype, MODEL_DTYPES)
        _check_choice("mamba_ssm_cache_dtype", self.mamba_ssm_cache_dtype, MODEL_DTYPES)
        _check_choice("mamba_cache_mode", self.mamba_cache_mode, MAMBA_CACHE_MODES)


_UNITS: Final = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
    "t": 2**40,
}
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_bytes(text: str, *, field: str = "--kv-cache-memory") -> int:
    """``"24GiB"``, ``"24 GiB"``, ``"16GB"``, ``"512MiB"`` or plain bytes -> bytes.

    GiB/MiB/KiB/TiB (and bare G/M/K/T) are powers of 1024, GB/MB/KB/TB powers
    of 1000; a fractional result is rounded down to whole bytes.
    """
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise InvalidFieldError(
            field=field,
            value=text,
            reason="must be a size such as 24GiB, 16GB, 512MiB or a number of bytes",
        )
    number = match.group(1)
    if "." in number:
        whole, _, frac = number.partition(".")
        denominator: int = 10 ** len(frac)
        return (int(whole or "0") * denominator + int(frac)) * _UNITS[unit] // denominator
    return int(number) * _UNITS[unit]


def parse_positive_int(text: str, *, field: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidFieldError(field=field, value=text, reason="must be a whole number") from None
    if value < 1:
        raise InvalidFieldError(field=field, value=value, reason="must be at least 1")
    return value


def parse_max_model_len(text: str, *, field: str = "--max-model-len") -> int | None:
    """Tokens, or ``auto`` / ``-1`` (auto-fit: returns None).

    As vLLM reads it: ``k``/``m`` are powers of 1000 and ``K``/``M`` powers
    of 1024 (``32k`` = 32000, ``32K`` = 32768, ``25.6k`` = 25600).
    """
    cleaned = text.strip()
    if cleaned.lower() in ("auto", "-1"):
        return None
    scales = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}
    scale = scales.get(cleaned[-1:], 1)
    digits = cleaned[:-1] if cleaned[-1:] in scales else cleaned
    match = re.fullmatch(r"(\d+)(?:\.(\d+))?", digits)
    if match is None:
        raise InvalidFieldError(
            field=field, value=text, reason="must be a number of tokens (e.g. 32768, 32K) or auto"
        )
    frac = match.group(2) or ""
    denominator: int = 10 ** len(frac)
    numerator = (int(match.group(1)) * denominator + int(frac or "0")) * scale
    if numerator % denominator:
        raise InvalidFieldError(field=field, value=text, reason="must be a whole number of tokens")
    value = numerator // denominator
    if value < 1:
        raise InvalidFieldError(field=field, value=value, reason="must be at least 1, or auto")
    return value


def parse_bool(text: str, *, field: str) -> bool:
    """``on/off``, ``true/false``, ``yes/no``, ``1/0``."""
    cleaned = text.strip().lower()
    if cleaned in ("on", "true", "yes", "1"):
        return True
    if cleaned in ("off", "false", "no", "0"):
        return False
    raise InvalidFieldError(field=field, value=text, reason="must be on or off")
