"""Gated-delta-net and KDA layers (Qwen3-Next, Qwen3.5 / 3.6; Kimi-Linear) as vLLM holds them.

vLLM 0.34's ``Qwen3NextGatedDeltaNet`` (vllm/model_executor/layers/mamba/gdn/
qwen_gdn_linear_attn.py; Qwen3.5's ``linear_attn`` is the same class) holds, for
``nk`` key heads of ``dk`` and ``nv`` value heads of ``dv`` (``linear_num_key_heads``,
``linear_key_head_dim``, ``linear_num_value_heads``, ``linear_value_head_dim``):

- ``in_proj_qkvz``: query, key, value and the output gate z, ``2 nk dk + 2 nv dv`` rows
  (column parallel; Qwen3.5's checkpoint stores it as ``in_proj_qkv`` and ``in_proj_z``);
- ``in_proj_ba``: the beta and alpha gates, ``2 nv`` rows (column parallel; Qwen3.5:
  ``in_proj_b`` and ``in_proj_a``);
- ``conv1d``: a depthwise convolution over q, k and v, ``(2 nk dk + nv dv, 1, kernel)``
  with ``linear_conv_kernel_dim`` taps and no bias;
- ``A_log`` (float32 whatever the model dtype) and ``dt_bias``, one per value head;
- ``norm``: the gated RMSNorm, one ``dv`` weight shared by the heads;
- ``out_proj``: ``hidden x nv dv`` (row parallel).

The full-attention layers between them gate their output (``attn_output_gate``, true
unless config.json says otherwise): ``q_proj`` is twice ``heads x head_dim``
(:func:`kvpure.memory_profile.checkpoint_layers.attention`).
"""

from __future__ import annotations

from typing import Final

from kvpure.memory_profile.checkpoint_layers import linear, vec
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig

__all__ = ["KDA_FLOAT32", "SPLIT_PROJECTIONS", "gated_delta_net", "kimi_delta_attention"]

SPLIT_PROJECTIONS: Final = frozenset({"qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"})
"""Families whose checkpoints store the projections split (``in_proj_qkv``, ``in_proj_z``,
``in_proj_b``, ``in_proj_a``); vLLM stacks them into the same two parameters."""


def gated_delta_net(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    """The tensors of one gated-delta-net mixer at ``p`` (``model.layers.<i>.linear_attn``)."""
    h = cfg.int_("hidden_size", minimum=1)
    key = cfg.int_("linear_num_key_heads", minimum=1) * cfg.int_("linear_key_head_dim", minimum=1)
    value_heads = cfg.int_("linear_num_value_heads", minimum=1)
    head_v = cfg.int_("linear_value_head_dim", minimum=1)
    value = value_heads * head_v
    kernel = cfg.int_("linear_conv_kernel_dim", 4, minimum=1)
    if cfg.str_("model_type", "") in SPLIT_PROJECTIONS:
        out = linear(f"{p}.in_proj_qkv", 2 * key + value, h, quant, dt)
        out += linear(f"{p}.in_proj_z", value, h, quant, dt)
        out += linear(f"{p}.in_proj_b", value_heads, h, quant, dt)
        out += linear(f"{p}.in_proj_a", value_heads, h, quant, dt)
    else:
        out = linear(f"{p}.in_proj_qkvz", 2 * key + 2 * value, h, quant, dt)
        out += linear(f"{p}.in_proj_ba", 2 * value_heads, h, quant, dt)
    out.append(TensorInfo(name=f"{p}.conv1d.weight", dtype=dt, shape=(2 * key + value, 1, kernel)))
    out += [vec(f"{p}.{n}", value_heads, dt) for n in ("dt_bias", "A_log")]
    out.append(vec(f"{p}.norm.weight", head_v, dt))
    return out + linear(f"{p}.out_proj", h, value, quant, dt)


KDA_FLOAT32: Final = frozenset(
    {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight", "dt_bias", "A_log"}
)
"""Kimi-Linear's KDA parameters vLLM allocates in float32 (kimi_gdn_linear_attn.py in
0.26: ``params_dtype=torch.float32`` for the convolutions, ``dt_bias`` and ``A_log``)."""


def kimi_delta_attention(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    """One KDA mixer (vLLM 0.26's ``KimiDeltaAttention``; 0.34 fuses the projections into
    ``in_proj_qkvgfab``, same sizes): ``num_heads`` heads of ``head_dim`` from
    ``linear_attn_config``; q/k/v projections and a depthwise convolution each
    (``short_conv_kernel_size`` taps, float32), the forget gate's low-rank ``f_a_proj``
    / ``f_b_proj`` and float32 ``dt_bias`` (one per channel), ``b_proj`` (one a head),
    float32 ``A_log`` (one a head), the output gate's ``g_a_proj`` / ``g_b_proj``, the
    gated ``o_norm`` of ``head_dim`` and ``o_proj``."""
    h = cfg.int_("hidden_size", minimum=1)
    kda = cfg.sub("linear_attn_config")
    heads = kda.int_("num_heads", minimum=1)
    dim = kda.int_("head_dim", minimum=1)
    kernel = kda.int_("short_conv_kernel_size", 4, minimum=1)
    width = heads * dim
    out: list[TensorInfo] = []
    for n in ("q", "k", "v"):
        out += linear(f"{p}.{n}_proj", width, h, quant, dt)
    for n in ("q", "k", "v"):
        out.append(TensorInfo(name=f"{p}.{n}_conv1d.weight", dtype=dt, shape=(width, 1, kernel)))
    out += linear(f"{p}.f_a_proj", dim, h, quant, dt)
    out += linear(f"{p}.f_b_proj", width, dim, quant, dt)
    out.append(vec(f"{p}.dt_bias", width, dt))
    out += linear(f"{p}.b_proj", heads, h, quant, dt)
    out.append(vec(f"{p}.A_log", heads, dt))
    out += linear(f"{p}.g_a_proj", dim, h, quant, dt)
    out += linear(f"{p}.g_b_proj", width, dim, quant, dt)
    out.append(vec(f"{p}.o_norm.weight", dim, dt))
    return out + linear(f"{p}.o_proj", h, width, quant, dt)
