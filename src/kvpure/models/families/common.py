"""Shared reading rules of the architecture families: heads, layer types, windows, layouts.

Every attention layer vLLM 0.26 builds takes its window from the layer
(``per_layer_sliding_window``) when the model passes one, else from the text
config's ``sliding_window`` (``CacheConfig.sliding_window``); the helpers here
encode those two paths once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig, checkpoint_kv_cache_dtype, default_max_model_len
from kvpure.models.layout import AttentionKind, AttentionLayer, ModelLayout, StateLayer

__all__ = [
    "TEXT_PREFIX",
    "WRAPPED_PREFIX",
    "Layer",
    "attention_layer",
    "attention_model",
    "attn_name",
    "check_kv_heads",
    "global_window",
    "heads",
    "is_sliding",
    "layer_types",
    "model_layout_of",
    "typed_window",
    "untyped_window",
    "with_defaults",
]

TEXT_PREFIX: Final = "model.layers."
WRAPPED_PREFIX: Final = "language_model.model.layers."

Layer = AttentionLayer | StateLayer


def attn_name(prefix: str, index: int, module: str = "self_attn") -> str:
    """vLLM's name of an attention layer: ``{prefix}{index}.{module}.attn``."""
    return f"{prefix}{index}.{module}.attn"


def _dtype(top: HFConfig, text: HFConfig) -> str:
    for cfg in (top, text):
        for field in ("torch_dtype", "dtype"):
            if cfg.has(field):
                return cfg.str_(field)
    return "float32"


def model_layout_of(
    top: HFConfig,
    text: HFConfig,
    num_layers: int,
    num_heads: int,
    layers: Iterable[Layer],
    *,
    mamba_chunk_size: int | None = None,
    ssm_cache_dtype: str | None = None,
) -> ModelLayout:
    """The layout of a model whose text config is ``text`` (``top`` itself when not nested)."""
    return ModelLayout(
        architecture=top.architecture,
        model_type=text.str_("model_type", ""),
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        layers=tuple(layers),
        config_dtype=_dtype(top, text),
        derived_max_model_len=text.derived_max_model_len(),
        default_max_model_len=default_max_model_len(text),
        mamba_chunk_size=mamba_chunk_size,
        ssm_cache_dtype=ssm_cache_dtype,
        yarn_unscaled_max_model_len=_yarn_unscaled(text),
        checkpoint_kv_cache_dtype=checkpoint_kv_cache_dtype(top),
    )


def _yarn_unscaled(text: HFConfig) -> tuple[int, int] | None:
    lengths = (
        text.derived_max_model_len(yarn_factor=False),
        default_max_model_len(text, yarn_factor=False),
    )
    scaled = (text.derived_max_model_len(), default_max_model_len(text))
    return None if lengths == scaled else lengths


def with_defaults(cfg: HFConfig, defaults: dict[str, object]) -> HFConfig:
    """``cfg`` with the fields of ``defaults`` it lacks (transformers' class defaults)."""
    missing = {key: value for key, value in defaults.items() if not cfg.has(key)}
    if not missing:
        return cfg
    return HFConfig(data=cfg.data.update(missing), architecture=cfg.architecture, path=cfg.path)


def layer_types(cfg: HFConfig, num_layers: int) -> tuple[str, ...] | None:
    """The config's ``layer_types`` (one per layer), or None when absent."""
    if not cfg.has("layer_types"):
        return None
    types = cfg.str_list("layer_types")
    if len(types) < num_layers:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('layer_types')}",
            value=len(types),
            reason=f"must name a type for each of the {num_layers} layers",
        )
    return types


def is_sliding(cfg: HFConfig, layer_type: str, index: int) -> bool:
    """Whether a ``layer_types`` entry names a sliding-window layer."""
    if layer_type in ("sliding_attention", "sliding_window"):
        return True
    if layer_type in ("full_attention", "attention", "chunked_attention"):
        return False
    raise InvalidFieldError(
        field=f"config.json {cfg.name('layer_types')}[{index}]",
        value=layer_type,
        reason="must be 'sliding_attention' or 'full_attention'",
    )


def check_kv_heads(cfg: HFConfig, num_heads: int, num_kv_heads: int) -> None:
    """Grouped-query attention shares each KV head among whole groups of query heads."""
    if num_kv_heads > num_heads or num_heads % num_kv_heads:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('num_key_value_heads')}",
            value=num_kv_heads,
            reason=f"must divide num_attention_heads ({num_heads})",
        )


def heads(cfg: HFConfig, *, use_head_dim: bool = True) -> tuple[int, int, int]:
    """(attention heads, KV heads, head size) of a standard attention config.

    The head size is ``head_dim`` when given (and ``use_head_dim``), else
    ``hidden_size / num_attention_heads`` (the models that ignore
    ``head_dim`` pass ``use_head_dim=False``).
    """
    num_heads = cfg.int_("num_attention_heads", minimum=1)
    num_kv_heads = cfg.int_("num_key_value_heads", num_heads, minimum=1)
    check_kv_heads(cfg, num_heads, num_kv_heads)
    if use_head_dim and cfg.has("head_dim"):
        return num_heads, num_kv_heads, cfg.int_("head_dim", minimum=1)
    hidden = cfg.int_("hidden_size", minimum=1)
    if hidden % num_heads:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('hidden_size')}",
            value=hidden,
            reason=f"is not a multiple of num_attention_heads ({num_heads}); give head_dim",
        )
    return num_heads, num_kv_heads, hidden // num_heads


def attention_layer(
    index: int, name: str, num_kv_heads: int, head_size: int, window: int | None
) -> AttentionLayer:
    """A full (``window`` None) or sliding-window attention layer."""
    return AttentionLayer(
        index=index,
        name=name,
        kind=AttentionKind.SLIDING_WINDOW if window is not None else AttentionKind.FULL,
        num_kv_heads=num_kv_heads,
        head_size=head_size,
        head_size_v=head_size,
        sliding_window=window,
    )


def attention_model(
    top: HFConfig,
    cfg: HFConfig,
    *,
    prefix: str,
    sliding: Callable[[int], bool],
    head_dim_default: int | None = None,
    use_head_dim: bool = True,
    name: Callable[[int], str] | None = None,
) -> ModelLayout:
    """A model whose every layer is full or sliding-window attention."""
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    if head_dim_default is not None and not cfg.has("head_dim"):
        num_heads = cfg.int_("num_attention_heads", minimum=1)
        num_kv = cfg.int_("num_key_value_heads", num_heads, minimum=1)
        check_kv_heads(cfg, num_heads, num_kv)
        head_dim = head_dim_default
    else:
        num_heads, num_kv, head_dim = heads(cfg, use_head_dim=use_head_dim)
    layers: list[Layer] = []
    for i in range(num_layers):
        window = cfg.int_("sliding_window", minimum=1) if sliding(i) else None
        layer_name = name(i) if name is not None else attn_name(prefix, i)
        layers.append(attention_layer(i, layer_name, num_kv, head_dim, window))
    return model_layout_of(top, cfg, num_layers, num_heads, layers)


def global_window(cfg: HFConfig) -> bool:
    """Whether layers that name no window of their own slide.

    vLLM 0.26 gives them the config's ``sliding_window`` (0 means none) unless
    ``layer_types`` mixes kinds (``EngineArgs.create_engine_config``: the cache
    config's window is set only for models that are not interleaved).
    """
    if not cfg.has("sliding_window") or cfg.raw("sliding_window") == 0:
        return False
    if cfg.has("layer_types"):
        return len(set(cfg.str_list("layer_types"))) <= 1
    return True


def typed_window(cfg: HFConfig) -> Callable[[int], bool]:
    """The rule of models that pass ``per_layer_sliding_window`` from ``layer_types``:
    ``sliding_attention`` layers slide, the others fall back to :func:`global_window`."""
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    types = layer_types(cfg, num_layers)
    fallback = global_window(cfg)
    if types is None:
        return lambda i: fallback
    return lambda i: is_sliding(cfg, types[i], i) or fallback


def untyped_window(cfg: HFConfig) -> Callable[[int], bool]:
    """The rule of models whose layers name no window: :func:`global_window` for all."""
    fallback = global_window(cfg)
    return lambda i: fallback
