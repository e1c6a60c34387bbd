"""The tensors a config.json implies, for models whose weight files are not at hand.

:func:`checkpoint_tensors` lists, with Hugging Face names and shapes, the
tensors of the language model described by ``config.json`` (dense, MoE, MLA
and Mamba2-hybrid families), in the layout of the quantization's checkpoints:

- none / bf16 / fp16 / fp32: one floating weight per linear layer;
- ``fp8``: an fp8 weight and a float32 per-tensor scale;
- ``awq`` / ``gptq`` (4-bit, group 128): int32 ``qweight`` packing 8 values,
  float16 ``scales`` and int32 ``qzeros`` per group;
- ``nvfp4``: packed 4-bit weights (two per byte), an fp8 scale per 16 values
  and two float32 global scales;
- ``mxfp4``: packed 4-bit weights and a one-byte scale per 32 values, for the
  routed experts only (vLLM loads every other linear layer of an MXFP4
  checkpoint unquantized).

Embeddings, the LM head, norms and routers stay unquantized, as in those
checkpoints. The parameter count is the sum of the shapes; the bytes then go
through the same sharding rules as real headers
(:mod:`kvpure.memory_profile.sharding`). Vision towers of multimodal models
are not listed (the count covers the language model).
"""

from __future__ import annotations

from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.checkpoint_layers import attention, mamba, mlp, moe, vec
from kvpure.memory_profile.gdn_layers import gated_delta_net, kimi_delta_attention
from kvpure.memory_profile.hybrid_layers import HYBRID_FAMILIES, hybrid_layer
from kvpure.memory_profile.model_traits import (
    final_norm,
    float32_params,
    is_moe_layer,
    layer_kinds,
    layer_norms,
    num_experts,
    tied_embeddings,
    uses_vllm_rotary,
)
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.whisper_tensors import whisper_tensors
from kvpure.models.config import HFConfig
from kvpure.models.families.common import with_defaults
from kvpure.models.families.gemma import GEMMA3_TEXT_DEFAULTS

__all__ = [
    "MAX_EXPERT_LAYERS",
    "QUANTIZATIONS",
    "checkpoint_tensors",
    "float32_params",
    "is_moe_layer",
    "language_config",
    "layer_kinds",
    "num_experts",
    "parameter_count",
    "tied_embeddings",
    "uses_vllm_rotary",
]

QUANTIZATIONS: Final = ("none", "fp8", "awq", "gptq", "nvfp4", "mxfp4")
"""Weight formats :func:`checkpoint_tensors` can lay out (vLLM's names)."""
MAX_EXPERT_LAYERS: Final = 2**16
"""The most routed experts over all layers listed (real models: under 25,000), so that a
config.json naming 10**12 experts is refused at once instead of listing them."""


_GEMMA3_TEXT_DEFAULTS: Final = {
    **GEMMA3_TEXT_DEFAULTS,
    "vocab_size": 262208,
    "intermediate_size": 9216,
    "model_type": "gemma3_text",
}
"""transformers' ``Gemma3TextConfig`` defaults (``configuration_gemma3.py``: vocab_size
262208, intermediate_size 9216) for a multimodal Gemma-3 whose ``text_config`` omits them
(google/gemma-3-4b-it gives only its shape and relies on them)."""


def language_config(config: HFConfig) -> HFConfig:
    """The language model's part of config.json (``text_config`` when present)."""
    if not config.has("text_config"):
        return config
    text = config.sub("text_config")
    if config.str_("model_type", "") == "gemma3":
        return with_defaults(text, _GEMMA3_TEXT_DEFAULTS)
    return text


def checkpoint_tensors(
    config: HFConfig, *, quantization: str = "none", routed_experts: bool = True
) -> tuple[TensorInfo, ...]:
    """The language model's tensors as a checkpoint of ``quantization`` would store them.

    ``routed_experts=False`` leaves the routed experts out (the caller counts them in
    the layout vLLM stores them in: :mod:`kvpure.memory_profile.quantized_experts`).
    """
    if quantization not in QUANTIZATIONS:
        raise InvalidFieldError(
            field="quantization", value=quantization, reason=f"must be one of {QUANTIZATIONS}"
        )
    cfg = language_config(config)
    dt = "F32" if cfg.str_("torch_dtype", cfg.str_("dtype", "bfloat16")) == "float32" else "BF16"
    if cfg.str_("model_type", "") == "whisper":  # encoder-decoder: its own layout
        return tuple(whisper_tensors(cfg, "none" if quantization == "mxfp4" else quantization, dt))
    h = cfg.int_("hidden_size", minimum=1)
    layers = cfg.int_("num_hidden_layers", minimum=1)
    vocab = cfg.int_("vocab_size", minimum=1)
    if num_experts(cfg) * layers > MAX_EXPERT_LAYERS:
        raise InvalidFieldError(
            field="config.json num_experts",
            value=num_experts(cfg),
            reason=f"times {layers} layers lists over {MAX_EXPERT_LAYERS} expert MLPs",
        )
    # MXFP4 quantizes the routed experts only: vLLM's Mxfp4Config gives every linear
    # layer UnquantizedLinearMethod (vllm/model_executor/layers/quantization/mxfp4.py).
    dense = "none" if quantization == "mxfp4" else quantization
    out = [TensorInfo(name="model.embed_tokens.weight", dtype=dt, shape=(vocab, h))]
    hybrid = cfg.str_("model_type", "") in HYBRID_FAMILIES
    for index, kind in enumerate(layer_kinds(cfg, layers)):
        p = f"model.layers.{index}"
        if hybrid:
            out += hybrid_layer(cfg, index, kind, dense, dt, routed=routed_experts)
            continue
        if kind == "mamba":
            out += mamba(cfg, f"{p}.mamba", dense, dt)
        elif kind == "gdn":
            out += gated_delta_net(cfg, f"{p}.linear_attn", dense, dt)
        elif kind == "kda":
            out += kimi_delta_attention(cfg, f"{p}.self_attn", dense, dt)
        else:
            out += attention(cfg, f"{p}.self_attn", dense, dt)
        if is_moe_layer(cfg, index):
            out += moe(cfg, f"{p}.mlp", quantization, dt, routed=routed_experts)
        elif cfg.has("intermediate_size"):
            out += mlp(f"{p}.mlp", h, cfg.int_("intermediate_size", minimum=1), dense, dt)
        out += [vec(f"{p}.{n}.weight", h, dt) for n in layer_norms(cfg)]
    if final_norm(cfg):
        out.append(vec("model.norm.weight", h, dt))
    if not tied_embeddings(cfg):
        out.append(TensorInfo(name="lm_head.weight", dtype=dt, shape=(vocab, h)))
    return tuple(out)


def parameter_count(config: HFConfig) -> int:
    """Parameters of the language model (elements of the unquantized :func:`checkpoint_tensors`)."""
    return sum(t.nbytes // t.itemsize for t in checkpoint_tensors(config))
