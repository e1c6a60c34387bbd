"""Attention + Mamba hybrids: Granite-4.0-H, Nemotron-H, Falcon-H1, Jamba.

- Granite-4.0-H (GraniteMoeHybrid): ``layer_types`` of ``mamba`` /
  ``attention``; Mamba2 mixers ``model.layers.{i}.mixer``.
- Nemotron-H: ``hybrid_override_pattern``, one character per layer: ``M``
  Mamba2 (``model.layers.{i}.mixer``), ``*`` attention
  (``model.layers.{i}.mixer.attn``), ``-`` / ``E`` MLP / MoE (no state); the SSM
  state is float32 unless the config names ``mamba_ssm_cache_dtype``
  (vLLM's ``NemotronHForCausalLMConfig``).
- Falcon-H1: every layer runs attention (``model.layers.{i}.attn``) and a
  Mamba2 mixer side by side; vLLM names the mixer ``model.{N + i}.mixer``
  (N = the number of layers) so the two have different layer indices.
- Jamba: layer ``i`` is attention (``model.layers.{i}.attn``) when
  ``i % attn_layer_period == attn_layer_offset``, else a Mamba (v1) mixer
  with ``mamba_expand * hidden_size`` channels.

The Mamba chunk (block alignment in mamba cache mode ``all``) is
``mamba_chunk_size``, else ``chunk_size``, else 2048
(``ModelConfig.get_mamba_chunk_size``).
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.families.common import (
    TEXT_PREFIX,
    Layer,
    attention_layer,
    attn_name,
    global_window,
    heads,
    layer_types,
    model_layout_of,
)
from kvpure.models.layout import Mamba1Layer, Mamba2Layer, ModelLayout

__all__ = [
    "NEMOTRON_H_N_GROUPS",
    "falcon_h1",
    "granite_hybrid",
    "jamba",
    "mamba_chunk_size",
    "nemotron_h",
    "nemotron_h_groups",
]


def mamba_chunk_size(cfg: HFConfig) -> int:
    """vLLM's ``get_mamba_chunk_size``."""
    if cfg.has("mamba_chunk_size"):
        return cfg.int_("mamba_chunk_size", minimum=1)
    return cfg.int_("chunk_size", 2048, minimum=1)


def _window(cfg: HFConfig) -> int | None:
    return cfg.int_("sliding_window", minimum=1) if global_window(cfg) else None


def granite_hybrid(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = layer_types(top, num_layers)
    if types is None:
        raise InvalidFieldError(
            field="config.json layer_types",
            value=None,
            reason=f"{top.architecture} needs 'mamba' or 'attention' for each layer",
        )
    hidden = top.int_("hidden_size", minimum=1)
    num_heads, num_kv, head_dim = heads(top, use_head_dim=False)
    layers: list[Layer] = []
    for i in range(num_layers):
        if types[i] == "mamba":
            layers.append(
                Mamba2Layer(
                    index=i,
                    name=f"{TEXT_PREFIX}{i}.mixer",
                    num_heads=top.int_("mamba_n_heads", minimum=1),
                    head_dim=top.int_("mamba_d_head", minimum=1),
                    state_size=top.int_("mamba_d_state", minimum=1),
                    n_groups=top.int_("mamba_n_groups", minimum=1),
                    intermediate_size=top.int_("mamba_expand", minimum=1) * hidden,
                    conv_kernel=top.int_("mamba_d_conv", minimum=2),
                )
            )
        elif types[i] == "attention":
            layers.append(attention_layer(i, attn_name(TEXT_PREFIX, i), num_kv, head_dim, None))
        else:
            raise InvalidFieldError(
                field=f"config.json layer_types[{i}]",
                value=types[i],
                reason="must be 'mamba' or 'attention'",
            )
    return model_layout_of(
        top, top, num_layers, num_heads, layers, mamba_chunk_size=top.int_("mamba_chunk_size", 256)
    )


NEMOTRON_H_N_GROUPS = 8
"""transformers' ``NemotronHConfig`` default ``n_groups`` (vLLM 0.26 registers no config
class of its own for ``nemotron_h``, so it reads transformers' where config.json omits the
key)."""


def nemotron_h_groups(top: HFConfig) -> int:
    """Nemotron-H's Mamba2 groups as transformers' ``NemotronHConfig`` sets them:
    ``mamba_n_groups`` (its older name, which wins), else ``n_groups``, else 8."""
    key = "mamba_n_groups" if top.has("mamba_n_groups") else "n_groups"
    return top.int_(key, NEMOTRON_H_N_GROUPS, minimum=1)


def nemotron_h(top: HFConfig) -> ModelLayout:
    pattern = top.str_("hybrid_override_pattern")
    num_layers = top.int_("num_hidden_layers", len(pattern), minimum=1)
    if len(pattern) != num_layers or set(pattern) - set("M*-E"):
        raise InvalidFieldError(
            field="config.json hybrid_override_pattern",
            value=pattern,
            reason=f"must give one of M, *, -, E for each of the {num_layers} layers",
        )
    num_heads, num_kv, head_dim = heads(top)
    window = top.int_("sliding_window", minimum=1) if top.has("sliding_window") else None
    layers: list[Layer] = []
    for i, kind in enumerate(pattern):
        if kind == "M":
            mamba_heads = top.int_("mamba_num_heads", minimum=1)
            mamba_dim = top.int_("mamba_head_dim", minimum=1)
            layers.append(
                Mamba2Layer(
                    index=i,
                    name=f"{TEXT_PREFIX}{i}.mixer",
                    num_heads=mamba_heads,
                    head_dim=mamba_dim,
                    state_size=top.int_("ssm_state_size", minimum=1),
                    n_groups=nemotron_h_groups(top),
                    intermediate_size=mamba_heads * mamba_dim,
                    conv_kernel=top.int_("conv_kernel", minimum=2),
                )
            )
        elif kind == "*":
            layers.append(
                attention_layer(i, attn_name(TEXT_PREFIX, i, "mixer"), num_kv, head_dim, window)
            )
    return model_layout_of(
        top,
        top,
        num_layers,
        num_heads,
        layers,
        mamba_chunk_size=mamba_chunk_size(top),
        ssm_cache_dtype=top.str_("mamba_ssm_cache_dtype", "float32"),
    )


FALCON_H1_D_SSM = 1024
"""transformers' ``FalconH1Config`` default ``mamba_d_ssm``, which vLLM reads where
config.json omits the key."""


def falcon_h1_mamba_width(top: HFConfig) -> int:
    """Falcon-H1's Mamba2 width as vLLM's falcon_h1.py takes it from transformers' config:
    ``mamba_d_ssm`` (1024 when config.json omits it), else (null) ``mamba_expand x
    hidden_size``."""
    if "mamba_d_ssm" not in top.data:
        return FALCON_H1_D_SSM
    if top.has("mamba_d_ssm"):
        return top.int_("mamba_d_ssm", minimum=1)
    return int(top.float_("mamba_expand", 2.0) * top.int_("hidden_size", minimum=1))


def falcon_h1(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    num_heads, num_kv, head_dim = heads(top)
    channels = falcon_h1_mamba_width(top)
    window = _window(top)
    layers: list[Layer] = []
    for i in range(num_layers):
        layers.append(attention_layer(i, f"{TEXT_PREFIX}{i}.attn", num_kv, head_dim, window))
        layers.append(
            Mamba2Layer(
                index=i,
                name=f"model.{num_layers + i}.mixer",
                num_heads=top.int_("mamba_n_heads", minimum=1),
                head_dim=top.int_("mamba_d_head", minimum=1),
                state_size=top.int_("mamba_d_state", minimum=1),
                n_groups=top.int_("mamba_n_groups", minimum=1),
                intermediate_size=channels,
                conv_kernel=top.int_("mamba_d_conv", minimum=2),
            )
        )
    return model_layout_of(
        top, top, num_layers, num_heads, layers, mamba_chunk_size=mamba_chunk_size(top)
    )


def jamba(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    num_heads, num_kv, head_dim = heads(top, use_head_dim=False)
    period = top.int_("attn_layer_period", 8, minimum=1)
    offset = top.int_("attn_layer_offset", 4)
    window = _window(top)
    channels = top.int_("mamba_expand", 2, minimum=1) * top.int_("hidden_size", minimum=1)
    layers: list[Layer] = []
    for i in range(num_layers):
        if i % period == offset:
            layers.append(attention_layer(i, f"{TEXT_PREFIX}{i}.attn", num_kv, head_dim, window))
        else:
            layers.append(
                Mamba1Layer(
                    index=i,
                    name=f"{TEXT_PREFIX}{i}.mixer",
                    intermediate_size=channels,
                    state_size=top.int_("mamba_d_state", 16, minimum=1),
                    conv_kernel=top.int_("mamba_d_conv", 4, minimum=2),
                )
            )
    return model_layout_of(
        top, top, num_layers, num_heads, layers, mamba_chunk_size=mamba_chunk_size(top)
    )
