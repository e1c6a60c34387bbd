"""The deployment options: what ``vllm serve`` flags decide about the KV cache.

:class:`Deployment` holds them as one frozen value, named as vLLM's flags
(``--kv-cache-memory``, ``--block-size``, ``--max-model-len``,
``--kv-cache-dtype``, ``--tensor-parallel-size``, ...). The ``parse_*``
functions turn command-line text into those values and raise
:class:`~kvpure.errors.InvalidFieldError` naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from pyrsistent import PMap

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import MAX_MEMORY_BYTES, check_int, check_optional_int
from kvpure.runtime_types import typed_init
from kvpure.settings import MAMBA_CACHE_MODES, MAX_SETTING_INT
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version

__all__ = [
    "KV_CACHE_DTYPES",
    "MAMBA_CACHE_MODES",
    "MODEL_DTYPES",
    "AttentionBackend",
    "Deployment",
]

KV_CACHE_DTYPES: Final = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
MODEL_DTYPES: Final = ("auto", "bfloat16", "float16", "float32")


class AttentionBackend(Enum):
    """An attention backend, with the facts about it the KV cache depends on."""

    FLASH_ATTN = "FLASH_ATTN"
    FLASHINFER = "FLASHINFER"
    TRITON_ATTN = "TRITON_ATTN"
    ROCM_ATTN = "ROCM_ATTN"
    FLASHMLA = "FLASHMLA"
    TRITON_MLA = "TRITON_MLA"
    CUTLASS_MLA = "CUTLASS_MLA"
    FLASH_ATTN_MLA = "FLASH_ATTN_MLA"
    FLASHINFER_MLA = "FLASHINFER_MLA"
    TRITON_FLASH_ATTN = "TRITON_FLASH_ATTN"
    """vLLM 0.33+: Triton for the image-prefix mask, FlashAttention 3/4 for causal attention."""
    TRITON_FLASHINFER = "TRITON_FLASHINFER"
    """vLLM 0.33+: Triton for the image-prefix mask, FlashInfer for causal attention (SM100)."""

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
            AttentionBackend.ROCM_ATTN: 16,
            AttentionBackend.FLASHMLA: 64,
            AttentionBackend.TRITON_MLA: 1,
            AttentionBackend.CUTLASS_MLA: 128,
            AttentionBackend.FLASH_ATTN_MLA: 16,
            AttentionBackend.FLASHINFER_MLA: 32,
            AttentionBackend.TRITON_FLASH_ATTN: 16,
            AttentionBackend.TRITON_FLASHINFER: 64,
        }[self]

    @property
    def default_block_size(self) -> int:
        """The block size vLLM picks with this backend when none is given.

        vLLM's ``AttentionBackend.get_preferred_block_size``
        (vllm/v1/attention/backend.py): 16 when the kernels take it, else the
        smallest kernel size (FlashMLA 64, CUTLASS MLA 128, FlashInfer MLA 32,
        0.34's Triton + FlashInfer composite 64: ``kernel_block_sizes=(64,)`` in
        vllm/v1/attention/backends/triton_flashinfer.py).
        """
        return {
            AttentionBackend.FLASHMLA: 64,
            AttentionBackend.CUTLASS_MLA: 128,
            AttentionBackend.FLASHINFER_MLA: 32,
            AttentionBackend.TRITON_FLASHINFER: 64,
        }.get(self, 16)


_MLA_BACKENDS: Final = frozenset(
    {
        AttentionBackend.FLASHMLA,
        AttentionBackend.TRITON_MLA,
        AttentionBackend.CUTLASS_MLA,
        AttentionBackend.FLASH_ATTN_MLA,
        AttentionBackend.FLASHINFER_MLA,
    }
)


def _check(field: str, value: int | None, minimum: int) -> None:
    check_optional_int(field, value, minimum=minimum, maximum=MAX_SETTING_INT)


def _check_memory(field: str, value: int) -> None:
    check_int(field, value, minimum=0, maximum=MAX_MEMORY_BYTES)


def _check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidFieldError(
            field=field, value=value, reason="must be one of " + ", ".join(choices)
        )


@typed_init
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
      default for the release: on, except for attention-free and
      encoder-decoder models, and in 0.26 for Mamba hybrids; a Mamba cache mode
      given implies it, ``none`` turns it off), ``mamba_cache_mode`` (None =
      vLLM's: ``none`` without prefix caching, else ``align``, or in 0.26
      ``all`` for models with Mamba prefix caching),
      ``enable_hybrid_kv_cache_manager``, ``attention_backend`` (None =
      FlashAttention, or FlashMLA for MLA models), ``max_num_batched_tokens``.
    - ``kv_cache_memory_per_gpu``: one figure per worker in rank order (vLLM's
      "Available KV cache memory" lines); empty = ``kv_cache_memory_bytes`` on
      every worker.
    - ``async_scheduling``: None = vLLM's default for the release (on, except
      for pooling models and, on 0.26's V1 model runner, speculative methods
      other than EAGLE/MTP/n-gram-GPU/DSpark), as ``vllm serve`` and
      ``kvpure plan`` resolve it; with it, sliding-window and chunked layers keep
      ``max_concurrent_batches`` steps of tokens in flight.
      ``kv_connector_extra_config`` (None = no KV connector),
      ``speculative_method`` and ``num_speculative_tokens``: passed to the
      planner's settings as vLLM's config holds them.
    - ``max_num_batched_tokens``: 8192 is ``vllm serve``'s default on an
      H100-class GPU (``kvpure.serve`` resolves it per GPU).
    - ``vllm_version``: the release whose rules plan it (``0.26``, ``0.33``,
      ``0.34``; ``X.Y.0`` is read as ``X.Y``), passed to the planner's
      ``PlannerSettings.vllm_version``.
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
    mamba_cache_mode: str | None = None
    kv_cache_memory_per_gpu: tuple[int, ...] = ()
    async_scheduling: bool | None = None
    kv_connector_extra_config: PMap[str, object] | None = None
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    vllm_version: str = DEFAULT_VLLM_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "vllm_version", normalize_vllm_version(self.vllm_version, field="vllm_version")
        )
        _check_memory("kv_cache_memory_bytes", self.kv_cache_memory_bytes)
        _check("block_size", self.block_size, 1)
        _check("max_model_len", self.max_model_len, 1)
        _check("tensor_parallel_size", self.tensor_parallel_size, 1)
        _check("pipeline_parallel_size", self.pipeline_parallel_size, 1)
        _check("num_gpu_blocks_override", self.num_gpu_blocks_override, 1)
        _check("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _check_choice("kv_cache_dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        _check_choice("dtype", self.dtype, MODEL_DTYPES)
        _check_choice("mamba_ssm_cache_dtype", self.mamba_ssm_cache_dtype, MODEL_DTYPES)
        if self.mamba_cache_mode is not None:
            _check_choice("mamba_cache_mode", self.mamba_cache_mode, MAMBA_CACHE_MODES)
        for memory in self.kv_cache_memory_per_gpu:
            _check_memory("kv_cache_memory_per_gpu", memory)
        _check("num_speculative_tokens", self.num_speculative_tokens, 1)

    def worker_memory(self, num_workers: int) -> tuple[int, ...]:
        """The KV cache memory of each of ``num_workers`` workers (rank order)."""
        per_gpu = self.kv_cache_memory_per_gpu
        if not per_gpu:
            return (self.kv_cache_memory_bytes,) * num_workers
        if len(per_gpu) != num_workers:
            raise InvalidFieldError(
                field="--kv-cache-memory",
                value=len(per_gpu),
                reason=f"lists one figure per GPU: give {num_workers} (tensor x pipeline "
                "parallel size) or one for all",
            )
        return per_gpu
