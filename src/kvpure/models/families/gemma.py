"""Gemma-2 / Gemma-3 / Gemma-3n and gpt-oss: interleaved sliding-window attention.

- Gemma-2: ``layer_types``, else even layers slide.
- Gemma-3: ``layer_types``, else layer ``i`` slides unless
  ``(i + 1) % sliding_window_pattern == 0`` (pattern 6: five sliding, one full);
  the multimodal checkpoints' partial ``text_config`` gets Gemma3TextConfig's
  defaults (head_dim 256, window 4096, 131072 positions).
- Gemma-3n: ``layer_types``; the last ``num_kv_shared_layers`` layers reuse
  the KV cache of an earlier layer of their kind (vLLM's ``Gemma3nAttention``
  sets ``kv_sharing_target_layer_name``) and so have no spec of their own.
- gpt-oss: ``layer_types`` (alternating sliding / full; window 128).
"""

from __future__ import annotations

from collections.abc import Callable

from pyrsistent import pmap

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.families.common import (
    TEXT_PREFIX,
    WRAPPED_PREFIX,
    Layer,
    attention_layer,
    attention_model,
    attn_name,
    heads,
    is_sliding,
    layer_types,
    model_layout_of,
    with_defaults,
)
from kvpure.models.layout import ModelLayout

__all__ = ["GEMMA3_TEXT_DEFAULTS", "gemma2", "gemma3", "gemma3_mm", "gemma3n", "gpt_oss"]

GEMMA3_TEXT_DEFAULTS: dict[str, object] = {
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
    "head_dim": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "num_hidden_layers": 26,
    "hidden_size": 2304,
}
"""transformers' ``Gemma3TextConfig`` defaults for the fields kvpure reads
(``configuration_gemma3.py``), given to a nested ``text_config`` that omits them."""
_GEMMA3_TOP_DEFAULTS: dict[str, object] = {
    key: GEMMA3_TEXT_DEFAULTS[key]
    for key in ("max_position_embeddings", "sliding_window", "head_dim")
}
"""The defaults a top-level Gemma-3 text config gets (its shape fields must be given)."""


def gemma2(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = layer_types(top, num_layers)
    if types is not None:
        return attention_model(
            top, top, prefix=TEXT_PREFIX, sliding=lambda i: is_sliding(top, types[i], i)
        )
    return attention_model(top, top, prefix=TEXT_PREFIX, sliding=lambda i: i % 2 == 0)


def _gemma3_text(
    top: HFConfig, cfg: HFConfig, prefix: str, defaults: dict[str, object]
) -> ModelLayout:
    filled = with_defaults(cfg, defaults)
    num_layers = filled.int_("num_hidden_layers", minimum=1)
    types = layer_types(filled, num_layers)
    if types is not None:
        rule: Callable[[int], bool] = lambda i: is_sliding(filled, types[i], i)  # noqa: E731
    else:
        field = "sliding_window_pattern" if filled.has("sliding_window_pattern") else None
        field = field or (
            "_sliding_window_pattern" if filled.has("_sliding_window_pattern") else None
        )
        pattern = filled.int_(field, minimum=1) if field else 6
        rule = lambda i: (i + 1) % pattern != 0  # noqa: E731
    return attention_model(top, filled, prefix=prefix, sliding=rule)


def gemma3(top: HFConfig) -> ModelLayout:
    return _gemma3_text(top, top, TEXT_PREFIX, _GEMMA3_TOP_DEFAULTS)


def gemma3_mm(top: HFConfig) -> ModelLayout:
    # No text_config at all: transformers builds Gemma3TextConfig() from its defaults.
    text = (
        top.sub("text_config")
        if top.has("text_config")
        else HFConfig(data=pmap(), architecture=top.architecture, path="text_config.")
    )
    return _gemma3_text(top, text, WRAPPED_PREFIX, GEMMA3_TEXT_DEFAULTS)


def gemma3n(top: HFConfig) -> ModelLayout:
    """Gemma-3n (``Gemma3nForConditionalGeneration``): its text tower, KV-shared layers left out."""
    cfg = top.sub("text_config")
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    types = layer_types(cfg, num_layers)
    if types is None:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('layer_types')}",
            value=None,
            reason=f"{top.architecture} needs a layer type for each layer",
        )
    num_heads, num_kv, head_dim = heads(cfg)
    shared = cfg.int_("num_kv_shared_layers", 0)
    first_shared = num_layers - shared
    layers: list[Layer] = []
    for i in range(num_layers):
        sliding = is_sliding(cfg, types[i], i)
        # A shared layer reads the last unshared layer of its kind (vLLM:
        # first_shared - 2 for sliding, - 1 for full); it keeps no cache.
        if i >= first_shared and first_shared - (2 if sliding else 1) >= 0:
            continue
        window = cfg.int_("sliding_window", minimum=1) if sliding else None
        layers.append(attention_layer(i, attn_name(WRAPPED_PREFIX, i), num_kv, head_dim, window))
    return model_layout_of(top, cfg, num_layers, num_heads, layers)


def gpt_oss(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = layer_types(top, num_layers)
    if types is None:
        types = tuple(
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)
        )
    # vLLM's gpt-oss module is named model.layers.{i}.attn.attn; the golden
    # planning case (gpt_oss_20b) names it self_attn.attn, and the goldens win.
    return attention_model(
        top, top, prefix=TEXT_PREFIX, sliding=lambda i: is_sliding(top, types[i], i)
    )
