"""Decoder layers of the hybrid families whose layout is not the dense/MoE one.

Nemotron-H (vLLM 0.26 nemotron_h.py): ``hybrid_override_pattern`` gives each layer one
mixer and one norm: ``M`` a Mamba2 mixer (``MambaMixer2``), ``*`` attention (q/k/v/o,
no rotary), ``-`` an MLP of ``up_proj`` and ``down_proj`` (squared ReLU, no gate).

Jamba (jamba.py): ``attn_layer_period`` / ``attn_layer_offset`` place the attention
layers (q/k/v/o, no rotary), every other layer a Mamba (``MambaMixer``, mamba_mixer.py);
``expert_layer_period`` / ``expert_layer_offset`` place the MoE feed-forwards (a router
and ``num_experts`` gated MLPs), the rest a gated MLP; two norms a layer.

Falcon-H1 (falcon_h1.py): every layer runs attention and a Mamba2 mixer in parallel
(``mamba_d_ssm`` wide; its gated RMSNorm only with ``mamba_rms_norm``), then a gated MLP;
two norms a layer.

Names follow kvpure's own listing (``model.layers.<i>``) so that sharding treats them as
it treats every decoder layer.
"""

from __future__ import annotations

from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.checkpoint_layers import attention, linear, mlp, moe, vec
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig
from kvpure.models.families.hybrid import falcon_h1_mamba_width, nemotron_h_groups

__all__ = ["HYBRID_FAMILIES", "falcon_h1_projected", "hybrid_layer", "mamba2"]

HYBRID_FAMILIES: Final = frozenset({"nemotron_h", "jamba", "falcon_h1"})


def mamba2(
    p: str,
    h: int,
    *,
    heads: int,
    inner: int,
    groups_state: int,
    kernel: int,
    conv_bias: bool,
    gated_norm: bool,
    proj_bias: bool = False,
    quant: str,
    dt: str,
) -> list[TensorInfo]:
    """A ``MambaMixer2`` (vllm/model_executor/layers/mamba/mamba_mixer2.py).

    ``in_proj`` gives the gate, x, B, C and dt (``2 inner + 2 groups state + heads``);
    the depthwise ``conv1d`` runs over x, B and C; ``A`` (float32 in vLLM), ``D`` and
    ``dt_bias`` are one per head; the gated RMSNorm weight spans ``inner``.
    """
    conv = inner + groups_state
    projected = 2 * inner + groups_state + heads
    out = linear(f"{p}.in_proj", projected, h, quant, dt)
    if proj_bias:
        out.append(vec(f"{p}.in_proj.bias", projected, dt))
    out.append(TensorInfo(name=f"{p}.conv1d.weight", dtype=dt, shape=(conv, 1, kernel)))
    if conv_bias:
        out.append(vec(f"{p}.conv1d.bias", conv, dt))
    out += [vec(f"{p}.{n}", heads, dt) for n in ("dt_bias", "A_log", "D")]
    if gated_norm:
        out.append(vec(f"{p}.norm.weight", inner, dt))
    out += linear(f"{p}.out_proj", h, inner, quant, dt)
    if proj_bias:
        out.append(vec(f"{p}.out_proj.bias", h, dt))
    return out


def _nemotron_h(cfg: HFConfig, p: str, kind: str, quant: str, dt: str) -> list[TensorInfo]:
    h = cfg.int_("hidden_size", minimum=1)
    if kind == "mamba":
        heads = cfg.int_("mamba_num_heads", minimum=1)
        groups_state = 2 * nemotron_h_groups(cfg) * cfg.int_("ssm_state_size")
        out = mamba2(
            f"{p}.mixer",
            h,
            heads=heads,
            inner=heads * cfg.int_("mamba_head_dim", minimum=1),
            groups_state=groups_state,
            kernel=cfg.int_("conv_kernel", 4, minimum=1),
            conv_bias=cfg.bool_("use_conv_bias", True),
            gated_norm=True,
            quant=quant,
            dt=dt,
        )
    elif kind == "attention":
        out = attention(cfg, f"{p}.mixer", quant, dt)
    elif kind == "mlp":
        inter = cfg.int_("intermediate_size", minimum=1)
        out = linear(f"{p}.mixer.up_proj", inter, h, quant, dt)
        out += linear(f"{p}.mixer.down_proj", h, inter, quant, dt)
    else:
        raise InvalidFieldError(
            field="config.json hybrid_override_pattern",
            value="E",
            reason="Nemotron-H MoE layers have no weight layout in kvpure yet",
        )
    return [*out, vec(f"{p}.norm.weight", h, dt)]


def _mamba1(cfg: HFConfig, p: str, quant: str, dt: str) -> list[TensorInfo]:
    """Jamba's ``MambaMixer``: ``in_proj`` (x and gate), a depthwise ``conv1d``,
    ``x_proj`` (dt, B, C), ``dt_proj`` with its bias, ``A`` (channels x state, float32 in
    vLLM), ``D``, ``out_proj`` and the dt/B/C RMSNorms."""
    h = cfg.int_("hidden_size", minimum=1)
    inner = cfg.int_("mamba_expand", 2, minimum=1) * h
    state = cfg.int_("mamba_d_state", minimum=1)
    rank = cfg.int_("mamba_dt_rank", -(-h // 16), minimum=1)
    kernel = cfg.int_("mamba_d_conv", 4, minimum=1)
    proj_bias = cfg.bool_("mamba_proj_bias", False)
    out = linear(f"{p}.in_proj", 2 * inner, h, quant, dt)
    if proj_bias:
        out.append(vec(f"{p}.in_proj.bias", 2 * inner, dt))
    out.append(TensorInfo(name=f"{p}.conv1d.weight", dtype=dt, shape=(inner, 1, kernel)))
    if cfg.bool_("mamba_conv_bias", True):
        out.append(vec(f"{p}.conv1d.bias", inner, dt))
    out += linear(f"{p}.x_proj", rank + 2 * state, inner, quant, dt)
    out += linear(f"{p}.dt_proj", inner, rank, quant, dt)
    out.append(vec(f"{p}.dt_proj.bias", inner, dt))
    out.append(TensorInfo(name=f"{p}.A_log", dtype=dt, shape=(inner, state)))
    out.append(vec(f"{p}.D", inner, dt))
    out += linear(f"{p}.out_proj", h, inner, quant, dt)
    if proj_bias:
        out.append(vec(f"{p}.out_proj.bias", h, dt))
    norms = (("dt_layernorm", rank), ("b_layernorm", state), ("c_layernorm", state))
    return out + [vec(f"{p}.{n}.weight", size, dt) for n, size in norms]


def _jamba(
    cfg: HFConfig, index: int, kind: str, quant: str, dt: str, *, routed: bool
) -> list[TensorInfo]:
    p = f"model.layers.{index}"
    h = cfg.int_("hidden_size", minimum=1)
    if kind == "mamba":
        out = _mamba1(cfg, f"{p}.mamba", quant, dt)
    else:
        out = attention(cfg, f"{p}.self_attn", quant, dt)
    period = cfg.int_("expert_layer_period", 2, minimum=1)
    if cfg.int_("num_experts", 1) > 1 and index % period == cfg.int_("expert_layer_offset", 1):
        out += moe(cfg, f"{p}.feed_forward", quant, dt, routed=routed)
    else:
        out += mlp(f"{p}.feed_forward", h, cfg.int_("intermediate_size", minimum=1), quant, dt)
    return out + [vec(f"{p}.{n}.weight", h, dt) for n in ("input_layernorm", "pre_ff_layernorm")]


def falcon_h1_inner(cfg: HFConfig) -> int:
    """Falcon-H1's Mamba2 width (the planner's rule: 1024 where ``mamba_d_ssm`` is absent)."""
    return falcon_h1_mamba_width(cfg)


def falcon_h1_projected(cfg: HFConfig) -> int:
    """The width of Falcon-H1's Mamba2 ``in_proj`` output (and of its ``mup_vector``)."""
    groups_state = 2 * cfg.int_("mamba_n_groups", 1, minimum=1) * cfg.int_("mamba_d_state")
    return 2 * falcon_h1_inner(cfg) + groups_state + cfg.int_("mamba_n_heads", minimum=1)


def _falcon_h1(cfg: HFConfig, index: int, quant: str, dt: str) -> list[TensorInfo]:
    p = f"model.layers.{index}"
    h = cfg.int_("hidden_size", minimum=1)
    out = attention(cfg, f"{p}.self_attn", quant, dt)
    out += mamba2(
        f"{p}.mamba",
        h,
        heads=cfg.int_("mamba_n_heads", minimum=1),
        inner=falcon_h1_inner(cfg),
        groups_state=2 * cfg.int_("mamba_n_groups", 1, minimum=1) * cfg.int_("mamba_d_state"),
        kernel=cfg.int_("mamba_d_conv", 4, minimum=1),
        conv_bias=cfg.bool_("mamba_conv_bias", True),
        gated_norm=cfg.bool_("mamba_rms_norm", False),
        proj_bias=cfg.bool_("mamba_proj_bias", False),
        quant=quant,
        dt=dt,
    )
    out += mlp(f"{p}.feed_forward", h, cfg.int_("intermediate_size", minimum=1), quant, dt)
    return out + [vec(f"{p}.{n}.weight", h, dt) for n in ("input_layernorm", "pre_ff_layernorm")]


def hybrid_layer(
    cfg: HFConfig, index: int, kind: str, quant: str, dt: str, *, routed: bool = True
) -> list[TensorInfo]:
    """The tensors of decoder layer ``index`` of a :data:`HYBRID_FAMILIES` model."""
    family = cfg.str_("model_type", "")
    if family == "jamba":
        return _jamba(cfg, index, kind, quant, dt, routed=routed)
    if family == "falcon_h1":
        return _falcon_h1(cfg, index, quant, dt)
    return _nemotron_h(cfg, f"model.layers.{index}", kind, quant, dt)
