"""The checkpoint tensors of one decoder layer's parts (attention, MLP, MoE, Mamba).

Builders for :func:`kvpure.memory_profile.checkpoint_tensors.checkpoint_tensors`: each
returns the Hugging Face names and shapes of the part in the quantization's layout.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from kvpure.memory_profile.model_traits import num_experts, routing_bias
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig

__all__ = ["attention", "linear", "mamba", "mlp", "moe", "vec"]

_GROUP: Final = 128
_GATED_OUTPUT: Final = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})
"""Families whose attention gates its output when ``attn_output_gate`` (default true):
``q_proj`` doubles (qwen3_next.py ``Qwen3NextAttention``, reused by qwen3_5.py)."""
_PER_HEAD_QK_NORM: Final = frozenset(
    {"qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text", "gemma3", "gemma3_text"}
    | _GATED_OUTPUT
)
"""Families whose attention normalizes each query and key head (one ``head_dim`` weight
each: qwen3.py, qwen3_moe.py, gemma3.py, qwen3_next.py; Qwen3-VL's language model is
Qwen3's)."""
_FULL_WIDTH_QK_NORM: Final = frozenset({"olmo2", "olmo3", "minimax_m2"})
_OPTIONAL_FULL_WIDTH_QK_NORM: Final = frozenset({"cohere", "cohere2"})
"""Families whose q_norm / k_norm span all the query / key heads (olmo3.py, OLMo-2's
Hugging Face model, minimax_m2.py whatever ``use_qk_norm`` says; commandr.py when
``use_qk_norm``)."""
_Q_LORA_DEFAULT: Final = {"deepseek_v2": 1536, "deepseek_v3": 1536}
"""transformers' ``DeepseekV2Config`` / ``DeepseekV3Config`` default ``q_lora_rank`` when
config.json omits the key (an explicit null means no query compression)."""


def _tensor(name: str, suffix: str, dt: str, shape: tuple[int, ...]) -> TensorInfo:
    return TensorInfo(name=f"{name}.{suffix}", dtype=dt, shape=shape)


def linear(name: str, out: int, inp: int, quant: str, dtype: str) -> list[TensorInfo]:
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


def vec(name: str, size: int, dtype: str) -> TensorInfo:
    return TensorInfo(name=name, dtype=dtype, shape=(size,))


def attention(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    nh = cfg.int_("num_attention_heads", minimum=1)
    if cfg.has("kv_lora_rank"):  # multi-head latent attention (DeepSeek V2/V3)
        rank = cfg.int_("kv_lora_rank", minimum=1)
        rope = cfg.int_("qk_rope_head_dim", minimum=0)
        nope = cfg.int_("qk_nope_head_dim", minimum=0)
        v = cfg.int_("v_head_dim", minimum=1)
        out: list[TensorInfo] = []
        q_rank = (
            cfg.optional_int("q_lora_rank", minimum=1)
            if "q_lora_rank" in cfg.data
            else _Q_LORA_DEFAULT.get(cfg.str_("model_type", ""))
        )
        if q_rank is None:
            out += linear(f"{p}.q_proj", nh * (nope + rope), h, quant, dt)
        else:
            out += linear(f"{p}.q_a_proj", q_rank, h, quant, dt)
            out.append(vec(f"{p}.q_a_layernorm.weight", q_rank, dt))
            out += linear(f"{p}.q_b_proj", nh * (nope + rope), q_rank, quant, dt)
        out += linear(f"{p}.kv_a_proj_with_mqa", rank + rope, h, quant, dt)
        out.append(vec(f"{p}.kv_a_layernorm.weight", rank, dt))
        out += linear(f"{p}.kv_b_proj", nh * (nope + v), rank, quant, dt)
        if cfg.has("index_topk") and q_rank is not None:
            out += _indexer(cfg, f"{p}.indexer", h, q_rank, quant, dt)
        return out + linear(f"{p}.o_proj", h, nh * v, quant, dt)
    nkv = cfg.int_("num_key_value_heads", nh, minimum=1)
    hd = cfg.int_("head_dim", h // nh, minimum=1)
    bias = cfg.bool_("attention_bias", cfg.str_("model_type", "").startswith("qwen2"))
    gated = cfg.str_("model_type", "") in _GATED_OUTPUT and cfg.bool_("attn_output_gate", True)
    out = linear(f"{p}.q_proj", nh * hd * (2 if gated else 1), h, quant, dt)
    out += linear(f"{p}.k_proj", nkv * hd, h, quant, dt)
    out += linear(f"{p}.v_proj", nkv * hd, h, quant, dt)
    if bias:
        out += [
            vec(f"{p}.{n}_proj.bias", size, dt)
            for n, size in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd))
        ]
    family = cfg.str_("model_type", "")
    if family == "gpt_oss":  # gpt_oss.py: o_proj with a bias, one attention sink a head
        out += [vec(f"{p}.o_proj.bias", h, dt), vec(f"{p}.sinks", nh, dt)]
    if family in _PER_HEAD_QK_NORM:
        out += [vec(f"{p}.q_norm.weight", hd, dt), vec(f"{p}.k_norm.weight", hd, dt)]
    elif family in _FULL_WIDTH_QK_NORM or (
        family in _OPTIONAL_FULL_WIDTH_QK_NORM and cfg.bool_("use_qk_norm", False)
    ):
        out += [vec(f"{p}.q_norm.weight", nh * hd, dt), vec(f"{p}.k_norm.weight", nkv * hd, dt)]
    return out + linear(f"{p}.o_proj", h, nh * hd, quant, dt)


def _indexer(cfg: HFConfig, p: str, h: int, q_rank: int, quant: str, dt: str) -> list[TensorInfo]:
    """DeepSeek-V3.2's sparse-attention indexer (deepseek_v2.py ``Indexer``): ``wq_b``
    (``index_n_heads x index_head_dim`` from the query latent), ``wk`` and
    ``weights_proj`` (vLLM fuses them as ``wk_weights_proj``), and ``k_norm``, a
    LayerNorm with a bias that vLLM keeps in float32 (``model_traits.float32_params``)."""
    heads = cfg.int_("index_n_heads", minimum=1)
    dim = cfg.int_("index_head_dim", minimum=1)
    out = linear(f"{p}.wq_b", heads * dim, q_rank, quant, dt)
    out += linear(f"{p}.wk", dim, h, quant, dt)
    out += [vec(f"{p}.k_norm.{n}", dim, dt) for n in ("weight", "bias")]
    return out + linear(f"{p}.weights_proj", heads, h, "none", dt)


def mlp(p: str, h: int, inter: int, quant: str, dt: str) -> list[TensorInfo]:
    return (
        linear(f"{p}.gate_proj", inter, h, quant, dt)
        + linear(f"{p}.up_proj", inter, h, quant, dt)
        + linear(f"{p}.down_proj", h, inter, quant, dt)
    )


def moe(cfg: HFConfig, p: str, quant: str, dt: str, *, routed: bool) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    experts = num_experts(cfg)
    # Qwen3.5-MoE's text_config has no intermediate_size: read it only as the fallback.
    key = "moe_intermediate_size" if cfg.has("moe_intermediate_size") else "intermediate_size"
    inter = cfg.int_(key, minimum=1)
    out = [TensorInfo(name=f"{p}.gate.weight", dtype=dt, shape=(experts, h))]
    if routing_bias(cfg):  # float32 in vLLM (model_traits.float32_params)
        out.append(vec(f"{p}.gate.e_score_correction_bias", experts, "F32"))
    biased = cfg.str_("model_type", "") == "gpt_oss"  # gpt_oss.py: router and experts
    if biased:
        out.append(vec(f"{p}.gate.bias", experts, dt))
    for e in range(experts if routed else 0):
        out += mlp(f"{p}.experts.{e}", h, inter, quant, dt)
        if biased:
            out += [
                vec(f"{p}.experts.{e}.{n}.bias", size, dt)
                for n, size in (("gate_proj", inter), ("up_proj", inter), ("down_proj", h))
            ]
    shared = cfg.int_("n_shared_experts", cfg.int_("num_shared_experts", 0)) * inter
    if cfg.str_("model_type", "") == "llama4_text":
        shared = inter  # Llama 4 adds one shared expert of the routed experts' size
    if cfg.has("shared_intermediate_size"):
        shared = cfg.int_("shared_intermediate_size")
    if cfg.has("shared_expert_intermediate_size"):
        shared = cfg.int_("shared_expert_intermediate_size")
        out.append(TensorInfo(name=f"{p}.shared_expert_gate.weight", dtype=dt, shape=(1, h)))
    if shared:  # shared experts are linear layers: unquantized under MXFP4
        out += mlp(f"{p}.shared_experts", h, shared, "none" if quant == "mxfp4" else quant, dt)
    return out


def mamba(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    heads = cfg.int_("mamba_n_heads", minimum=1)
    inner = cfg.int_("mamba_d_head", minimum=1) * heads
    groups_state = (
        2 * cfg.int_("mamba_n_groups", 1, minimum=1) * cfg.int_("mamba_d_state", minimum=1)
    )
    conv = inner + groups_state
    kernel = cfg.int_("mamba_d_conv", 4, minimum=1)
    out = linear(f"{p}.in_proj", 2 * inner + groups_state + heads, h, quant, dt)
    out.append(TensorInfo(name=f"{p}.conv1d.weight", dtype=dt, shape=(conv, 1, kernel)))
    out.append(vec(f"{p}.conv1d.bias", conv, dt))
    out += [vec(f"{p}.{n}", heads, dt) for n in ("dt_bias", "A_log", "D")]
    out.append(vec(f"{p}.norm.weight", inner, dt))
    return out + linear(f"{p}.out_proj", h, inner, quant, dt)
