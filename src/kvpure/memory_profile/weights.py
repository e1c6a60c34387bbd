"""Per-worker weight bytes, exact from safetensors headers or estimated from config.json.

With the checkpoint's tensors (:func:`~kvpure.memory_profile.safetensors_header.read_model_folder`)
the bytes are exact: the sum of the shard shapes vLLM loads on each worker, plus the
rotary cos/sin caches vLLM registers as buffers (:mod:`~kvpure.memory_profile.buffers`).
MXFP4 experts (gpt-oss) are the exception: vLLM re-lays them out for its kernel
(:mod:`~kvpure.memory_profile.quantized_experts`), so they are counted in that layout
with a band.
Without them the tensors are laid out from config.json
(:mod:`~kvpure.memory_profile.checkpoint_tensors`) in the checkpoint's
quantization format, plus the vision tower and projector config.json's
``vision_config`` describes (:mod:`~kvpure.memory_profile.encoders`) and the
rotary caches and other buffers, and the result is an estimate (on the 39 configs
checked it equals vLLM 0.26's own allocation at TP 1 to the byte,
tests/test_memory_weights_exact.py, and on 7 more vLLM 0.34's,
tests/test_memory_weights_034.py) with a band of 0.25% plus 0.05 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.buffers import (
    MROPE_POSITIONS_FACTOR,
    model_buffers,
    rotary_cache_bytes,
)
from kvpure.memory_profile.checkpoint_tensors import (
    checkpoint_tensors,
    float32_params,
    language_config,
    tied_embeddings,
)
from kvpure.memory_profile.encoders import (
    encoder_buffer_bytes,
    encoder_bytes_per_rank,
    encoder_shape,
)
from kvpure.memory_profile.profile_logs import GIB
from kvpure.memory_profile.quantized_experts import mxfp4_experts_per_worker
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.sharding import Parallelism, ShardingLayout, worker_weight_bytes
from kvpure.models.config import HFConfig

__all__ = [
    "WorkerWeights",
    "checkpoint_quantization",
    "served_dtype_bytes",
    "weights_layout",
    "worker_weights",
]

_DTYPE_BYTES: Final = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
_RUNTIME_QUANT: Final = {
    None: "none",
    "fp8": "fp8",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "modelopt_fp4": "nvfp4",
    "nvfp4": "nvfp4",
    "mxfp4": "mxfp4",
}
ESTIMATE_RELATIVE_BAND: Final = 0.0025
ESTIMATE_ABSOLUTE_BAND: Final = int(0.05 * GIB)
MXFP4_LAYOUT_BAND: Final = int(0.05 * GIB)
"""MXFP4 experts: the Marlin-rounded count is 0.06 (TP 1) and 0.085 GiB (TP 2) over
gpt-oss-20b's logged weights (vLLM 0.19, H100); the kernel's own layout is not modelled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerWeights:
    """Weight bytes per worker (rank order) and whether they are exact."""

    bytes_per_worker: tuple[int, ...]
    exact: bool
    layout_band_bytes: int = 0
    """Added to the band where vLLM's stored layout depends on the kernel it picks (MXFP4)."""

    def error_bytes(self, worker: int) -> int:
        """Half-width of the band around one worker's bytes (0 when exact)."""
        if self.exact:
            return 0
        relative = int(self.bytes_per_worker[worker] * ESTIMATE_RELATIVE_BAND)
        return relative + ESTIMATE_ABSOLUTE_BAND + self.layout_band_bytes


def served_dtype_bytes(config: HFConfig, dtype: str) -> int:
    """Bytes per element of the dtype vLLM serves weights in (float32 checkpoints: bfloat16)."""
    cfg = language_config(config)
    name = dtype
    if dtype == "auto":
        name = cfg.str_("torch_dtype", cfg.str_("dtype", "bfloat16")).removeprefix("torch.")
        if name in ("float32", "float"):
            name = "bfloat16"
    size = _DTYPE_BYTES.get(name)
    if size is None:
        raise InvalidFieldError(
            field="dtype", value=dtype, reason="must be auto, bfloat16, float16 or float32"
        )
    return size


def checkpoint_quantization(config: HFConfig, runtime: str | None) -> str:
    """The weight layout: ``--quantization`` when given, else config.json's quantization_config."""
    if runtime is not None:
        if runtime not in _RUNTIME_QUANT:
            raise InvalidFieldError(
                field="quantization",
                value=runtime,
                reason="supported: " + ", ".join(str(k) for k in _RUNTIME_QUANT if k),
            )
        return _RUNTIME_QUANT[runtime]
    cfg = config if config.has("quantization_config") else language_config(config)
    if not cfg.has("quantization_config"):
        return "none"
    quant = cfg.sub("quantization_config")
    method = quant.str_("quant_method", "")
    if method in ("awq", "gptq"):
        return method
    if method == "mxfp4":
        return "mxfp4"
    if method == "modelopt":
        return "nvfp4" if "FP4" in quant.str_("quant_algo", "").upper() else "fp8"
    if method == "compressed-tensors":
        return _compressed_tensors_layout(quant)
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
    raise InvalidFieldError(
        field="config.json quantization_config.quant_method",
        value=method,
        reason="has no weight layout in kvpure; read the weights' headers instead",
    )


def _quant_method(config: HFConfig) -> str:
    """config.json's ``quantization_config.quant_method`` ("" when unquantized)."""
    cfg = config if config.has("quantization_config") else language_config(config)
    if not cfg.has("quantization_config"):
        return ""
    return cfg.sub("quantization_config").str_("quant_method", "")


def _compressed_tensors_layout(quant: HFConfig) -> str:
    """The layout of a compressed-tensors checkpoint: from its format, else its weights' bits."""
    fmt = quant.str_("format", "")
    if "nvfp4" in fmt:
        return "nvfp4"
    bits = 8
    if quant.has("config_groups"):
        groups = quant.sub("config_groups")
        for name in sorted(groups.data):
            group = groups.sub(name)
            if group.has("weights"):
                bits = min(bits, group.sub("weights").int_("num_bits", 8, minimum=1))
    return "gptq" if bits <= 4 else "fp8"  # 4-bit packed with group scales; else one byte


def weights_layout(config: HFConfig) -> ShardingLayout:
    """The sharding facts of the language model of ``config``."""
    cfg = language_config(config)
    whisper = cfg.str_("model_type", "") == "whisper"
    if whisper:  # fused qkv_proj everywhere: the KV-head rule never applies
        heads = cfg.int_("decoder_attention_heads", minimum=1)
    else:
        heads = cfg.int_("num_attention_heads", minimum=1)
    return ShardingLayout(
        # whisper: the decoder's layers (num_hidden_layers is transformers' encoder_layers)
        num_layers=cfg.int_("decoder_layers" if whisper else "num_hidden_layers", minimum=1),
        num_kv_heads=cfg.int_("num_key_value_heads", heads, minimum=1),
        tie_word_embeddings=tied_embeddings(cfg),
        float32_params=float32_params(cfg),
        # whisper.py's decoder embedding is a plain nn.Embedding: whole, not padded
        plain_modules=frozenset({"embed_tokens"}) if whisper else frozenset(),
    )


def worker_weights(
    config: HFConfig,
    parallel: Parallelism,
    *,
    dtype: str = "auto",
    quantization: str | None = None,
    tensors: tuple[TensorInfo, ...] | None = None,
    mrope_positions_factor: int = MROPE_POSITIONS_FACTOR,
) -> WorkerWeights:
    """Weight bytes on each worker: exact from ``tensors``, else estimated from config.json.

    ``mrope_positions_factor``: the rows of an MRoPE cache per position (vLLM 0.26: 4;
    0.33-0.34: 1 for Qwen3-VL and Qwen3.5, :data:`~kvpure.memory_profile.buffers.
    MROPE_POSITIONS_FACTOR`).
    """
    size = served_dtype_bytes(config, dtype)
    text = language_config(config)
    # Rotary cos/sin caches: buffers vLLM allocates on every worker next to the weights.
    rotary = rotary_cache_bytes(
        text, dtype_bytes=size, mrope_positions_factor=mrope_positions_factor
    )
    from_headers = tensors is not None and quantization is None
    if from_headers:
        mxfp4 = _quant_method(config) == "mxfp4"
        layout = "mxfp4" if mxfp4 else "none"
    else:
        layout = checkpoint_quantization(config, quantization)
        mxfp4 = layout == "mxfp4"
    if tensors is not None and from_headers:
        if mxfp4:  # the packed experts are re-laid out by the kernel: counted below
            tensors = tuple(t for t in tensors if ".experts." not in t.name)
        tensors += model_buffers(text)
        totals = worker_weight_bytes(
            tensors, weights_layout(config), parallel, served_dtype_bytes=size
        )
    else:
        implied = checkpoint_tensors(config, quantization=layout, routed_experts=not mxfp4)
        implied += model_buffers(text)
        totals = worker_weight_bytes(
            implied, weights_layout(config), parallel, served_dtype_bytes=size
        )
        encoder = encoder_shape(config, text.int_("hidden_size", 0))
        if encoder is not None:
            extra = encoder_bytes_per_rank(encoder, tp=parallel.tp, dtype_bytes=size)
            extra += encoder_buffer_bytes(config, dtype_bytes=size)
            totals = tuple(b + (extra if w < parallel.tp else 0) for w, b in enumerate(totals))
    if mxfp4:  # the routed experts in vLLM's stored (kernel-rounded) layout
        experts = mxfp4_experts_per_worker(text, parallel)
        totals = tuple(a + b for a, b in zip(totals, experts, strict=True))
    return WorkerWeights(
        bytes_per_worker=tuple(b + rotary for b in totals),
        exact=from_headers and not mxfp4,
        layout_band_bytes=MXFP4_LAYOUT_BAND if mxfp4 else 0,
    )
