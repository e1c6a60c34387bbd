"""Gated-delta-net hybrids: Qwen3-Next and Qwen3.5 / Qwen3.6 (dense and MoE).

``layer_types`` (default: every ``full_attention_interval``-th layer, 4, is
full attention, the rest ``linear_attention``, as transformers fills it)
decides each layer: ``linear_attention`` is a gated delta net whose state
vLLM keeps at ``...layers.{i}.linear_attn``; ``full_attention`` is attention
with ``head_dim`` at ``...layers.{i}.self_attn.attn``. Qwen3.5's wrappers put
the text model under ``language_model.`` and read ``text_config``; they keep
the recurrent state in ``text_config.mamba_ssm_dtype`` when
``--mamba-ssm-cache-dtype`` is ``auto`` (vLLM's
``Qwen3_5ForConditionalGenerationConfig``).
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.families.common import (
    TEXT_PREFIX,
    WRAPPED_PREFIX,
    Layer,
    attention_layer,
    attn_name,
    global_window,
    heads,
    layer_types,
    model_layout_of,
)
from kvpure.models.families.hybrid import mamba_chunk_size
from kvpure.models.layout import GatedDeltaNetLayer, ModelLayout

__all__ = ["qwen3_5", "qwen3_next"]


def _gdn_text(top: HFConfig, cfg: HFConfig, prefix: str, ssm_dtype: str | None) -> ModelLayout:
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    types = layer_types(cfg, num_layers)
    if types is None:
        interval = cfg.int_("full_attention_interval", 4, minimum=1)
        types = tuple(
            "linear_attention" if (i + 1) % interval else "full_attention"
            for i in range(num_layers)
        )
    num_heads, num_kv, head_dim = heads(cfg)
    window = cfg.int_("sliding_window", minimum=1) if global_window(cfg) else None
    layers: list[Layer] = []
    for i in range(num_layers):
        if types[i] == "linear_attention":
            layers.append(
                GatedDeltaNetLayer(
                    index=i,
                    name=f"{prefix}{i}.linear_attn",
                    num_k_heads=cfg.int_("linear_num_key_heads", minimum=1),
                    num_v_heads=cfg.int_("linear_num_value_heads", minimum=1),
                    head_k_dim=cfg.int_("linear_key_head_dim", minimum=1),
                    head_v_dim=cfg.int_("linear_value_head_dim", minimum=1),
                    conv_kernel=cfg.int_("linear_conv_kernel_dim", minimum=2),
                )
            )
        elif types[i] == "full_attention":
            layers.append(attention_layer(i, attn_name(prefix, i), num_kv, head_dim, window))
        else:
            raise InvalidFieldError(
                field=f"config.json {cfg.name('layer_types')}[{i}]",
                value=types[i],
                reason="must be 'linear_attention' or 'full_attention'",
            )
    return model_layout_of(
        top,
        cfg,
        num_layers,
        num_heads,
        layers,
        mamba_chunk_size=mamba_chunk_size(cfg),
        ssm_cache_dtype=ssm_dtype,
    )


def qwen3_next(top: HFConfig) -> ModelLayout:
    return _gdn_text(top, top, TEXT_PREFIX, None)


def qwen3_5(top: HFConfig) -> ModelLayout:
    text = top.sub("text_config")
    ssm = text.str_("mamba_ssm_dtype") if text.has("mamba_ssm_dtype") else None
    return _gdn_text(top, text, WRAPPED_PREFIX, ssm)
