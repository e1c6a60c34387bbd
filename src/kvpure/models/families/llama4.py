"""Llama-4: chunked local attention on RoPE layers, global attention on NoPE layers.

Chunked local attention (``attention_chunk_size``) runs on the RoPE layers;
the NoPE layers (``no_rope_layers[i] == 0``, by default every 4th) are global.
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.families.common import (
    TEXT_PREFIX,
    WRAPPED_PREFIX,
    Layer,
    attn_name,
    heads,
    model_layout_of,
)
from kvpure.models.layout import AttentionKind, AttentionLayer, ModelLayout

__all__ = ["llama4", "llama4_mm"]


def _llama4_text(top: HFConfig, cfg: HFConfig, prefix: str) -> ModelLayout:
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    num_heads, num_kv, head_dim = heads(cfg)
    chunk = cfg.optional_int("attention_chunk_size", minimum=1)
    no_rope = cfg.int_list("no_rope_layers") if cfg.has("no_rope_layers") else ()
    if not no_rope:
        interval = cfg.int_("no_rope_layer_interval", 4, minimum=1)
        no_rope = tuple(int((i + 1) % interval != 0) for i in range(num_layers))
    if len(no_rope) < num_layers:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('no_rope_layers')}",
            value=len(no_rope),
            reason=f"must have an entry for each of the {num_layers} layers",
        )
    layers: list[Layer] = []
    for i in range(num_layers):
        local = chunk is not None and no_rope[i] != 0
        layers.append(
            AttentionLayer(
                index=i,
                name=attn_name(prefix, i),
                kind=AttentionKind.CHUNKED_LOCAL if local else AttentionKind.FULL,
                num_kv_heads=num_kv,
                head_size=head_dim,
                head_size_v=head_dim,
                attention_chunk_size=chunk if local else None,
            )
        )
    return model_layout_of(top, cfg, num_layers, num_heads, layers)


def llama4(top: HFConfig) -> ModelLayout:
    return _llama4_text(top, top, TEXT_PREFIX)


def llama4_mm(top: HFConfig) -> ModelLayout:
    return _llama4_text(top, top.sub("text_config"), WRAPPED_PREFIX)
