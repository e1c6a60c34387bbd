"""The attention backend vLLM picks for a GPU and a model (0.26; 0.33/0.34 where they differ).

vLLM walks a priority list per platform and takes the first backend whose
``validate_configuration`` finds nothing wrong (``CudaPlatform.get_valid_backends``
and ``_get_backend_priorities`` in ``vllm/platforms/cuda.py``; the ROCm
platform's ``_get_backend_priorities`` in ``vllm/platforms/rocm.py``). This
module keeps the lists and the checks that the KV cache depends on:

- CUDA, MLA: capability 10.x: FlashInfer MLA, CUTLASS MLA, FlashMLA, Triton MLA;
  12.x: Triton MLA; otherwise FlashAttention MLA (Hopper only, no fp8 KV cache),
  FlashMLA (9.x/10.x), FlashInfer MLA (10.x), Triton MLA.
- CUDA, other attention: 10.x: FlashInfer, FlashAttention, Triton; otherwise
  FlashAttention, FlashInfer, Triton.
- ROCm (AITER off, vLLM's default): MLA -> Triton MLA; otherwise ROCm attention
  (not with a KV connector, not with attention sinks), then Triton.
- vLLM 0.33/0.34 (``ServeRules.mm_prefix_backends``): a multimodal prefix-LM
  model (Gemma-3, PaliGemma: bidirectional attention over image tokens) first
  tries a composite backend, Triton + FlashAttention on 9.x, Triton +
  FlashInfer on 10.x (head sizes 256 and 512; the FlashInfer one has 64-token
  kernel blocks); the rest of the lists is 0.26's for the backends kvpure
  models (0.34 appends FlexAttention and TurboQuant, never reached here).

Checks (each backend's class in ``vllm/v1/attention/backends``): compute
capability, KV cache dtype, head size, attention sinks (gpt-oss), and a given
``--block-size`` (a multiple of one of the kernel's block sizes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import AttentionBackend
from kvpure.models.layout import ModelLayout
from kvpure.serve.gpus import GPU
from kvpure.serve.rules import SERVE_RULES_0_34, ServeRules

__all__ = ["BackendChoice", "has_attention_sinks", "select_attention_backend"]

B = AttentionBackend
_FP8: Final = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
_HALF: Final = frozenset({"auto", "bfloat16", "float16"})
#: Model types whose attention has learned sinks (vLLM's ``has_sink``).
_SINK_MODEL_TYPES: Final = frozenset({"gpt_oss"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendQuery:
    """What the checks read: the GPU, the model's attention and the cache dtype."""

    gpu: GPU
    head_sizes: tuple[int, ...]
    kv_cache_dtype: str
    has_sinks: bool
    block_size: int | None
    has_kv_connector: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendChoice:
    """The chosen backend, and each higher-priority backend passed over with why."""

    backend: AttentionBackend
    rejected: tuple[tuple[AttentionBackend, str], ...]


def has_attention_sinks(layout: ModelLayout) -> bool:
    """Whether the model's attention layers carry learned sinks (gpt-oss)."""
    return layout.model_type in _SINK_MODEL_TYPES


def _cc(q: BackendQuery) -> tuple[int, int]:
    return q.gpu.compute_capability


def _block_multiple_of(*sizes: int) -> Callable[[BackendQuery], str | None]:
    def check(q: BackendQuery) -> str | None:
        if q.block_size is None or any(q.block_size % size == 0 for size in sizes):
            return None
        return f"block size {q.block_size} is not a multiple of " + " or ".join(map(str, sizes))

    return check


def _flash_attn(q: BackendQuery) -> str | None:
    if _cc(q) < (8, 0):
        return "needs compute capability 8.0"
    # FlashAttention 3 on 9.x, 4 on 10.x, 2 elsewhere (``get_flash_attn_version``).
    version = {9: 3, 10: 4}.get(_cc(q)[0], 2)
    largest = 512 if version == 4 else 256
    if any(size % 8 or size > largest for size in q.head_sizes):
        return f"head size must be a multiple of 8, at most {largest}"
    if q.kv_cache_dtype in _FP8 and (q.kv_cache_dtype == "fp8_e5m2" or version != 3):
        return "fp8 KV cache only with FlashAttention 3 (Hopper), e4m3"
    if q.has_sinks and version == 2:
        return "attention sinks need FlashAttention 3 or 4"
    return _block_multiple_of(16)(q)


def _flashinfer(q: BackendQuery) -> str | None:
    if not (8, 0) <= _cc(q) <= (12, 1):
        return "needs compute capability 8.0 to 12.1"
    if any(size not in (64, 128, 256, 512) for size in q.head_sizes):
        return "head size must be 64, 128, 256 or 512"
    if q.has_sinks and _cc(q)[0] != 10:
        return "attention sinks only on the SM100 TRT-LLM path"
    return _block_multiple_of(16, 32, 64)(q)


def _triton(q: BackendQuery) -> str | None:
    if any(size < 32 for size in q.head_sizes):
        return "head size must be at least 32"
    return _block_multiple_of(16)(q)


def _rocm(q: BackendQuery) -> str | None:
    if q.has_kv_connector:
        return "not used with a KV connector"
    if q.has_sinks:
        return "no attention sinks"
    if any(size not in (32, 64, 80, 96, 128, 160, 192, 224, 256) for size in q.head_sizes):
        return "unsupported head size"
    return _block_multiple_of(16)(q)


def _triton_flash_attn(q: BackendQuery) -> str | None:
    if _cc(q)[0] != 9:
        return "needs compute capability 9.x (FlashAttention 3)"
    if any(size not in (256, 512) for size in q.head_sizes):
        return "head size must be 256 or 512"
    return _flash_attn(q) or _triton(q)


def _triton_flashinfer(q: BackendQuery) -> str | None:
    if _cc(q)[0] != 10:
        return "needs compute capability 10.x"
    if any(size not in (256, 512) for size in q.head_sizes):
        return "head size must be 256 or 512"
    return _flashinfer(q) or _triton(q) or _block_multiple_of(64)(q)


def _flash_attn_mla(q: BackendQuery) -> str | None:
    if _cc(q)[0] != 9:
        return "needs compute capability 9.x (FlashAttention 3)"
    if q.kv_cache_dtype not in _HALF:
        return "no fp8 KV cache"
    return _block_multiple_of(16)(q)


def _flashmla(q: BackendQuery) -> str | None:
    if _cc(q)[0] not in (9, 10):
        return "needs compute capability 9.x or 10.x"
    if q.kv_cache_dtype == "fp8_e5m2":
        return "no fp8_e5m2 KV cache"
    return _block_multiple_of(64)(q)


def _flashinfer_mla(q: BackendQuery) -> str | None:
    if _cc(q)[0] != 10:
        return "needs compute capability 10.x"
    if q.kv_cache_dtype == "fp8_e5m2":
        return "no fp8_e5m2 KV cache"
    return _block_multiple_of(32, 64)(q)


def _cutlass_mla(q: BackendQuery) -> str | None:
    if _cc(q)[0] != 10:
        return "needs compute capability 10.x"
    if q.kv_cache_dtype == "fp8_e5m2":
        return "no fp8_e5m2 KV cache"
    return _block_multiple_of(128)(q)


def _triton_mla(q: BackendQuery) -> str | None:
    if q.kv_cache_dtype == "fp8_e5m2":
        return "no fp8_e5m2 KV cache"
    return _block_multiple_of(16)(q)


_CHECKS: Final[dict[AttentionBackend, Callable[[BackendQuery], str | None]]] = {
    B.FLASH_ATTN: _flash_attn,
    B.FLASHINFER: _flashinfer,
    B.TRITON_ATTN: _triton,
    B.ROCM_ATTN: _rocm,
    B.FLASH_ATTN_MLA: _flash_attn_mla,
    B.FLASHMLA: _flashmla,
    B.FLASHINFER_MLA: _flashinfer_mla,
    B.CUTLASS_MLA: _cutlass_mla,
    B.TRITON_MLA: _triton_mla,
    B.TRITON_FLASH_ATTN: _triton_flash_attn,
    B.TRITON_FLASHINFER: _triton_flashinfer,
}
#: Multimodal prefix-LM architectures (vLLM's ``is_mm_prefix_lm``: model types
#: gemma3, paligemma, molmo2, moondream3, bagel; vllm/transformers_utils/
#: model_arch_config_convertor.py).
MM_PREFIX_ARCHITECTURES: Final = frozenset(
    {"Gemma3ForConditionalGeneration", "PaliGemmaForConditionalGeneration"}
)


def priorities(gpu: GPU, *, use_mla: bool, mm_prefix: bool = False) -> tuple[AttentionBackend, ...]:
    """The platform's priority list for this GPU (the backends kvpure models).

    ``mm_prefix``: the model is a multimodal prefix LM and the release has the
    composite backends (vLLM 0.33+).
    """
    major = gpu.compute_capability[0]
    if mm_prefix and not gpu.is_rocm and not use_mla:
        composite = {9: (B.TRITON_FLASH_ATTN,), 10: (B.TRITON_FLASHINFER,)}.get(major, ())
        return composite + priorities(gpu, use_mla=False)
    if gpu.is_rocm:
        return (B.TRITON_MLA,) if use_mla else (B.ROCM_ATTN, B.TRITON_ATTN)
    if use_mla:
        if major == 10:
            return (B.FLASHINFER_MLA, B.CUTLASS_MLA, B.FLASHMLA, B.TRITON_MLA)
        if major == 12:
            return (B.TRITON_MLA,)
        return (B.FLASH_ATTN_MLA, B.FLASHMLA, B.FLASHINFER_MLA, B.TRITON_MLA)
    if major == 10:
        return (B.FLASHINFER, B.FLASH_ATTN, B.TRITON_ATTN)
    return (B.FLASH_ATTN, B.FLASHINFER, B.TRITON_ATTN)


def _query(
    layout: ModelLayout,
    gpu: GPU,
    *,
    kv_cache_dtype: str,
    block_size: int | None,
    has_kv_connector: bool,
) -> BackendQuery:
    heads: Sequence[int] = sorted({layer.head_size for layer in layout.attention_layers})
    return BackendQuery(
        gpu=gpu,
        head_sizes=() if layout.uses_mla else tuple(heads),
        kv_cache_dtype=kv_cache_dtype,
        has_sinks=has_attention_sinks(layout),
        block_size=block_size,
        has_kv_connector=has_kv_connector,
    )


def select_attention_backend(
    layout: ModelLayout,
    gpu: GPU,
    *,
    kv_cache_dtype: str,
    block_size: int | None,
    has_kv_connector: bool,
    requested: AttentionBackend | None = None,
    rules: ServeRules = SERVE_RULES_0_34,
) -> BackendChoice:
    """The backend vLLM (``rules``' release) runs this model with on this GPU.

    ``requested`` (``--attention-backend``) is checked and kept, or refused
    with vLLM's reason; otherwise the first valid backend of the priority list.
    """
    query = _query(
        layout,
        gpu,
        kv_cache_dtype=kv_cache_dtype,
        block_size=block_size,
        has_kv_connector=has_kv_connector,
    )
    if requested is not None:
        if requested.is_mla != layout.uses_mla and layout.attention_layers:
            wanted = "an MLA backend" if layout.uses_mla else "a non-MLA backend"
            raise InvalidFieldError(
                field="--attention-backend",
                value=requested.value,
                reason=f"{layout.architecture} needs {wanted}",
            )
        reason = _CHECKS[requested](query)
        if reason is not None:
            raise InvalidFieldError(
                field="--attention-backend",
                value=requested.value,
                reason=f"is not valid on {gpu.name} for {layout.architecture}: {reason}",
            )
        return BackendChoice(backend=requested, rejected=())
    rejected: list[tuple[AttentionBackend, str]] = []
    mm_prefix = rules.mm_prefix_backends and layout.architecture in MM_PREFIX_ARCHITECTURES
    for backend in priorities(gpu, use_mla=layout.uses_mla, mm_prefix=mm_prefix):
        reason = _CHECKS[backend](query)
        if reason is None:
            return BackendChoice(backend=backend, rejected=tuple(rejected))
        rejected.append((backend, reason))
    raise InvalidFieldError(
        field="--gpu",
        value=gpu.name,
        reason=f"no attention backend runs {layout.architecture} here: "
        + "; ".join(f"{b.value}: {why}" for b, why in rejected),
    )
