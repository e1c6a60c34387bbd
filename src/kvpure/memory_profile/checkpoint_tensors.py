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

from functools import partial
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig
from kvpure.models.families.common import with_defaults
from kvpure.models.families.gemma import GEMMA3_TEXT_DEFAULTS

__all__ = [
    "MAX_EXPERT_LAYERS",
    "QUANTIZATIONS",
    "checkpoint_tensors",
    "language_config",
    "parameter_count",
]

QUANTIZATIONS: Final = ("none", "fp8", "awq", "gptq", "nvfp4", "mxfp4")
"""Weight formats :func:`checkpoint_tensors` can lay out (vLLM's names)."""
_GROUP: Final = 128
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


def _tensor(name: str, suffix: str, dt: str, shape: tuple[int, ...]) -> TensorInfo:
    return TensorInfo(name=f"{name}.{suffix}", dtype=dt, shape=shape)


def _linear(name: str, out: int, inp: int, quant: str, dtype: str) -> list[TensorInfo]:
    t = partial(_tensor, name)  # a partial, not a nested def: nothing to re-check per call

    if quant == "none":
        return [t("weight", dtype, (out, inp))]
    if quant == "fp8":
        return [t("weight", "F8_E4M3", (out, inp)), t("weight_scale", "F32", ())]
    if quant in ("awq", "gptq"):
        groups = max(1, inp // _GROUP)
        return [
            t("qweight", "I32", (inp // 8, out)),
            t("scales", "F16", (groups, out)),
            t("qzeros", "I32", (groups, max(1, out // 8))),
        ]
    if quant == "nvfp4":
        return [
            t("weight", "U8", (out, inp // 2)),
            t("weight_scale", "F8_E4M3", (out, max(1, inp // 16))),
            t("weight_scale_2", "F32", ()),
            t("input_scale", "F32", ()),
        ]
    return [t("weight", "U8", (out, inp // 2)), t("weight_scale", "U8", (out, max(1, inp // 32)))]


def _vec(name: str, size: int, dtype: str) -> TensorInfo:
    return TensorInfo(name=name, dtype=dtype, shape=(size,))


def num_experts(cfg: HFConfig) -> int:
    """Routed experts per MoE layer (0 for a dense model)."""
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        if cfg.has(key):
            return cfg.int_(key, minimum=0)
    return 0


def is_moe_layer(cfg: HFConfig, index: int) -> bool:
    """Whether decoder layer ``index`` has routed experts."""
    if num_experts(cfg) == 0:
        return False
    if index < cfg.int_("first_k_dense_replace", 0):
        return False
    if cfg.has("mlp_only_layers") and index in cfg.int_list("mlp_only_layers"):
        return False
    step = cfg.int_("decoder_sparse_step", 1, minimum=1)
    return (index + 1) % step == 0


def _attention(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    nh = cfg.int_("num_attention_heads", minimum=1)
    if cfg.has("kv_lora_rank"):  # multi-head latent attention (DeepSeek V2/V3)
        rank = cfg.int_("kv_lora_rank", minimum=1)
        rope = cfg.int_("qk_rope_head_dim", minimum=0)
        nope = cfg.int_("qk_nope_head_dim", minimum=0)
        v = cfg.int_("v_head_dim", minimum=1)
        out: list[TensorInfo] = []
        q_rank = cfg.optional_int("q_lora_rank", minimum=1)
        if q_rank is None:
            out += _linear(f"{p}.q_proj", nh * (nope + rope), h, quant, dt)
        else:
            out += _linear(f"{p}.q_a_proj", q_rank, h, quant, dt)
            out.append(_vec(f"{p}.q_a_layernorm.weight", q_rank, dt))
            out += _linear(f"{p}.q_b_proj", nh * (nope + rope), q_rank, quant, dt)
        out += _linear(f"{p}.kv_a_proj_with_mqa", rank + rope, h, quant, dt)
        out.append(_vec(f"{p}.kv_a_layernorm.weight", rank, dt))
        out += _linear(f"{p}.kv_b_proj", nh * (nope + v), rank, quant, dt)
        return out + _linear(f"{p}.o_proj", h, nh * v, quant, dt)
    nkv = cfg.int_("num_key_value_heads", nh, minimum=1)
    hd = cfg.int_("head_dim", h // nh, minimum=1)
    bias = cfg.bool_("attention_bias", cfg.str_("model_type", "").startswith("qwen2"))
    out = _linear(f"{p}.q_proj", nh * hd, h, quant, dt)
    out += _linear(f"{p}.k_proj", nkv * hd, h, quant, dt)
    out += _linear(f"{p}.v_proj", nkv * hd, h, quant, dt)
    if bias:
        out += [
            _vec(f"{p}.{n}_proj.bias", size, dt)
            for n, size in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd))
        ]
    if cfg.str_("model_type", "") in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        out += [_vec(f"{p}.q_norm.weight", hd, dt), _vec(f"{p}.k_norm.weight", hd, dt)]
    return out + _linear(f"{p}.o_proj", h, nh * hd, quant, dt)


def _mlp(p: str, h: int, inter: int, quant: str, dt: str) -> list[TensorInfo]:
    return (
        _linear(f"{p}.gate_proj", inter, h, quant, dt)
        + _linear(f"{p}.up_proj", inter, h, quant, dt)
        + _linear(f"{p}.down_proj", h, inter, quant, dt)
    )


def _moe(cfg: HFConfig, p: str, quant: str, dt: str, *, routed: bool) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    experts = num_experts(cfg)
    inter = cfg.int_("moe_intermediate_size", cfg.int_("intermediate_size", minimum=1), minimum=1)
    out = [TensorInfo(name=f"{p}.gate.weight", dtype=dt, shape=(experts, h))]
    for e in range(experts if routed else 0):
        out += _mlp(f"{p}.experts.{e}", h, inter, quant, dt)
    shared = cfg.int_("n_shared_experts", 0) * inter
    if cfg.str_("model_type", "") == "llama4_text":
        shared = inter  # Llama 4 adds one shared expert of the routed experts' size
    if cfg.has("shared_intermediate_size"):
        shared = cfg.int_("shared_intermediate_size")
    if cfg.has("shared_expert_intermediate_size"):
        shared = cfg.int_("shared_expert_intermediate_size")
        out.append(TensorInfo(name=f"{p}.shared_expert_gate.weight", dtype=dt, shape=(1, h)))
    if shared:  # shared experts are linear layers: unquantized under MXFP4
        out += _mlp(f"{p}.shared_experts", h, shared, "none" if quant == "mxfp4" else quant, dt)
    return out


def _mamba(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    heads = cfg.int_("mamba_n_heads", minimum=1)
    inner = cfg.int_("mamba_d_head", minimum=1) * heads
    groups_state = (
        2 * cfg.int_("mamba_n_groups", 1, minimum=1) * cfg.int_("mamba_d_state", minimum=1)
    )
    conv = inner + groups_state
    kernel = cfg.int_("mamba_d_conv", 4, minimum=1)
    out = _linear(f"{p}.in_proj", 2 * inner + groups_state + heads, h, quant, dt)
    out.append(TensorInfo(name=f"{p}.conv1d.weight", dtype=dt, shape=(conv, 1, kernel)))
    out.append(_vec(f"{p}.conv1d.bias", conv, dt))
    out += [_vec(f"{p}.{n}", heads, dt) for n in ("dt_bias", "A_log", "D")]
    out.append(_vec(f"{p}.norm.weight", inner, dt))
    return out + _linear(f"{p}.out_proj", h, inner, quant, dt)


def _layer_kinds(cfg: HFConfig, layers: int) -> tuple[str, ...]:
    if cfg.has("layer_types"):
        kinds = cfg.str_list("layer_types")
        if len(kinds) != layers:
            raise InvalidFieldError(
                field="config.json layer_types",
                value=len(kinds),
                reason=f"must list one type per layer ({layers})",
            )
        return tuple("mamba" if "mamba" in k else "attention" for k in kinds)
    return ("attention",) * layers


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
    h = cfg.int_("hidden_size", minimum=1)
    layers = cfg.int_("num_hidden_layers", minimum=1)
    vocab = cfg.int_("vocab_size", minimum=1)
    gemma = cfg.str_("model_type", "").startswith("gemma")
    if num_experts(cfg) * layers > MAX_EXPERT_LAYERS:
        raise InvalidFieldError(
            field="config.json num_experts",
            value=num_experts(cfg),
            reason=f"times {layers} layers lists over {MAX_EXPERT_LAYERS} expert MLPs",
        )
    linear = quantization
    # MXFP4 quantizes the routed experts only: vLLM's Mxfp4Config gives every linear
    # layer UnquantizedLinearMethod (vllm/model_executor/layers/quantization/mxfp4.py).
    dense = "none" if quantization == "mxfp4" else quantization
    out = [TensorInfo(name="model.embed_tokens.weight", dtype=dt, shape=(vocab, h))]
    for index, kind in enumerate(_layer_kinds(cfg, layers)):
        p = f"model.layers.{index}"
        if kind == "mamba":
            out += _mamba(cfg, f"{p}.mamba", dense, dt)
        else:
            out += _attention(cfg, f"{p}.self_attn", dense, dt)
        if is_moe_layer(cfg, index):
            out += _moe(cfg, f"{p}.mlp", linear, dt, routed=routed_experts)
        elif cfg.has("intermediate_size"):
            out += _mlp(f"{p}.mlp", h, cfg.int_("intermediate_size", minimum=1), dense, dt)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma and cfg.str_("model_type", "") != "gemma":
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        out += [_vec(f"{p}.{n}.weight", h, dt) for n in norms]
    out.append(_vec("model.norm.weight", h, dt))
    if not cfg.bool_("tie_word_embeddings", gemma):
        out.append(TensorInfo(name="lm_head.weight", dtype=dt, shape=(vocab, h)))
    return tuple(out)


def parameter_count(config: HFConfig) -> int:
    """Parameters of the language model (elements of the unquantized :func:`checkpoint_tensors`)."""
    return sum(t.nbytes // t.itemsize for t in checkpoint_tensors(config, quantization="none"))
