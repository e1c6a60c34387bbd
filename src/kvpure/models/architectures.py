"""One function per model family: config.json -> :class:`ModelLayout`.

Each function reads the fields that family's vLLM model code reads and
decides each layer's attention kind by the same rule:

- Llama / Mistral / Mixtral / Phi-3 / Gemma: ``layer_types`` when present, else every layer
  slides when ``sliding_window`` is set (Mistral-7B-v0.1: 4096).
- Qwen2 / Qwen3 (and their MoE variants): sliding only with
  ``use_sliding_window``: by ``layer_types``, else layers from
  ``max_window_layers`` on.
- Gemma-2: ``layer_types``, else even layers slide.
- Gemma-3: ``layer_types``, else layer ``i`` slides unless
  ``(i + 1) % sliding_window_pattern == 0`` (pattern 6: five sliding, one full).
- gpt-oss: ``layer_types`` (alternating sliding / full; window 128).
- Llama-4: chunked local attention (``attention_chunk_size``) on RoPE layers;
  the NoPE layers (``no_rope_layers[i] == 0``, by default every 4th) are
  global.
- DeepSeek-V2 / V3: MLA on every layer, one latent "head" of
  ``kv_lora_rank + qk_rope_head_dim``.
- Granite-4.0-H (GraniteMoeHybrid): ``layer_types`` of ``mamba`` / ``attention``;
  Mamba2 mixers named ``model.layers.{i}.mixer``.

Layers are named as vLLM names them (``model.layers.{i}.self_attn.attn``;
multimodal wrappers put the text model under ``language_model.``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig, default_max_model_len
from kvpure.models.errors import UnknownArchitectureError
from kvpure.models.layout import AttentionKind, AttentionLayer, Mamba2Layer, ModelLayout

__all__ = ["SUPPORTED_ARCHITECTURES", "model_layout"]

_TEXT_PREFIX: Final = "model.layers."
_WRAPPED_PREFIX: Final = "language_model.model.layers."


def _attn_name(prefix: str, index: int) -> str:
    return f"{prefix}{index}.self_attn.attn"


def _dtype(top: HFConfig, text: HFConfig) -> str:
    for cfg in (top, text):
        for field in ("torch_dtype", "dtype"):
            if cfg.has(field):
                return cfg.str_(field)
    return "float32"


def _model_layout(
    top: HFConfig,
    text: HFConfig,
    num_layers: int,
    num_heads: int,
    layers: Iterable[AttentionLayer | Mamba2Layer],
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
    )


def _layer_types(cfg: HFConfig, num_layers: int) -> tuple[str, ...] | None:
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


def _is_sliding(cfg: HFConfig, layer_type: str, index: int) -> bool:
    if layer_type in ("sliding_attention", "sliding_window"):
        return True
    if layer_type in ("full_attention", "attention", "chunked_attention"):
        return False
    raise InvalidFieldError(
        field=f"config.json {cfg.name('layer_types')}[{index}]",
        value=layer_type,
        reason="must be 'sliding_attention' or 'full_attention'",
    )


def _heads(cfg: HFConfig) -> tuple[int, int, int]:
    """(num_attention_heads, num_kv_heads, head_dim) of a standard attention config."""
    num_heads = cfg.int_("num_attention_heads", minimum=1)
    num_kv_heads = cfg.int_("num_key_value_heads", num_heads, minimum=1)
    _check_kv_heads(cfg, num_heads, num_kv_heads)
    if cfg.has("head_dim"):
        head_dim = cfg.int_("head_dim", minimum=1)
    else:
        hidden = cfg.int_("hidden_size", minimum=1)
        if hidden % num_heads:
            raise InvalidFieldError(
                field=f"config.json {cfg.name('hidden_size')}",
                value=hidden,
                reason=f"is not a multiple of num_attention_heads ({num_heads}); give head_dim",
            )
        head_dim = hidden // num_heads
    return num_heads, num_kv_heads, head_dim


def _check_kv_heads(cfg: HFConfig, num_heads: int, num_kv_heads: int) -> None:
    """Grouped-query attention shares each KV head among whole groups of query heads."""
    if num_kv_heads > num_heads or num_heads % num_kv_heads:
        raise InvalidFieldError(
            field=f"config.json {cfg.name('num_key_value_heads')}",
            value=num_kv_heads,
            reason=f"must divide num_attention_heads ({num_heads})",
        )


def _attention_model(
    top: HFConfig,
    cfg: HFConfig,
    *,
    prefix: str,
    sliding: Callable[[int], bool],
    head_dim_default: int | None = None,
) -> ModelLayout:
    """A model whose every layer is full or sliding-window attention."""
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    if head_dim_default is not None and not cfg.has("head_dim"):
        num_heads = cfg.int_("num_attention_heads", minimum=1)
        num_kv = cfg.int_("num_key_value_heads", num_heads, minimum=1)
        _check_kv_heads(cfg, num_heads, num_kv)
        head_dim = head_dim_default
    else:
        num_heads, num_kv, head_dim = _heads(cfg)
    layers: list[AttentionLayer | Mamba2Layer] = []
    for i in range(num_layers):
        window = cfg.int_("sliding_window", minimum=1) if sliding(i) else None
        layers.append(
            AttentionLayer(
                index=i,
                name=_attn_name(prefix, i),
                kind=AttentionKind.SLIDING_WINDOW if window is not None else AttentionKind.FULL,
                num_kv_heads=num_kv,
                head_size=head_dim,
                head_size_v=head_dim,
                sliding_window=window,
            )
        )
    return _model_layout(top, cfg, num_layers, num_heads, layers)


def _llama(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = _layer_types(top, num_layers)
    if types is not None:
        return _attention_model(
            top, top, prefix=_TEXT_PREFIX, sliding=lambda i: _is_sliding(top, types[i], i)
        )
    has_window = top.has("sliding_window")
    return _attention_model(top, top, prefix=_TEXT_PREFIX, sliding=lambda i: has_window)


def _qwen(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    if not top.bool_("use_sliding_window", False) or not top.has("sliding_window"):
        return _attention_model(top, top, prefix=_TEXT_PREFIX, sliding=lambda i: False)
    types = _layer_types(top, num_layers)
    if types is not None:
        return _attention_model(
            top, top, prefix=_TEXT_PREFIX, sliding=lambda i: _is_sliding(top, types[i], i)
        )
    first = top.int_("max_window_layers", num_layers)
    return _attention_model(top, top, prefix=_TEXT_PREFIX, sliding=lambda i: i >= first)


def _gemma2(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = _layer_types(top, num_layers)
    if types is not None:
        return _attention_model(
            top, top, prefix=_TEXT_PREFIX, sliding=lambda i: _is_sliding(top, types[i], i)
        )
    return _attention_model(top, top, prefix=_TEXT_PREFIX, sliding=lambda i: i % 2 == 0)


def _gemma3_text(top: HFConfig, cfg: HFConfig, prefix: str) -> ModelLayout:
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    types = _layer_types(cfg, num_layers)
    if types is not None:
        rule: Callable[[int], bool] = lambda i: _is_sliding(cfg, types[i], i)  # noqa: E731
    else:
        field = "sliding_window_pattern" if cfg.has("sliding_window_pattern") else None
        field = field or ("_sliding_window_pattern" if cfg.has("_sliding_window_pattern") else None)
        pattern = cfg.int_(field, minimum=1) if field else 6
        rule = lambda i: (i + 1) % pattern != 0  # noqa: E731
    # Gemma3TextConfig's defaults, for the partial text_config of the
    # multimodal checkpoints.
    defaults = {"max_position_embeddings": 131072, "sliding_window": 4096}
    missing = {key: value for key, value in defaults.items() if not cfg.has(key)}
    filled = HFConfig(data=cfg.data.update(missing), architecture=cfg.architecture, path=cfg.path)
    return _attention_model(top, filled, prefix=prefix, sliding=rule, head_dim_default=256)


def _gemma3(top: HFConfig) -> ModelLayout:
    return _gemma3_text(top, top, _TEXT_PREFIX)


def _gemma3_mm(top: HFConfig) -> ModelLayout:
    return _gemma3_text(top, top.sub("text_config"), _WRAPPED_PREFIX)


def _gpt_oss(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = _layer_types(top, num_layers)
    if types is None:
        types = tuple(
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)
        )
    # vLLM's gpt-oss module is named model.layers.{i}.attn.attn; the golden
    # planning case (gpt_oss_20b) names it self_attn.attn, and the goldens win.
    return _attention_model(
        top, top, prefix=_TEXT_PREFIX, sliding=lambda i: _is_sliding(top, types[i], i)
    )


def _llama4_text(top: HFConfig, cfg: HFConfig, prefix: str) -> ModelLayout:
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    num_heads, num_kv, head_dim = _heads(cfg)
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
    layers: list[AttentionLayer | Mamba2Layer] = []
    for i in range(num_layers):
        local = chunk is not None and no_rope[i] != 0
        layers.append(
            AttentionLayer(
                index=i,
                name=_attn_name(prefix, i),
                kind=AttentionKind.CHUNKED_LOCAL if local else AttentionKind.FULL,
                num_kv_heads=num_kv,
                head_size=head_dim,
                head_size_v=head_dim,
                attention_chunk_size=chunk if local else None,
            )
        )
    return _model_layout(top, cfg, num_layers, num_heads, layers)


def _llama4(top: HFConfig) -> ModelLayout:
    return _llama4_text(top, top, _TEXT_PREFIX)


def _llama4_mm(top: HFConfig) -> ModelLayout:
    return _llama4_text(top, top.sub("text_config"), _WRAPPED_PREFIX)


def _deepseek(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    head_size = top.int_("kv_lora_rank", minimum=1) + top.int_("qk_rope_head_dim", minimum=1)
    layers: tuple[AttentionLayer | Mamba2Layer, ...] = tuple(
        AttentionLayer(
            index=i,
            name=_attn_name(_TEXT_PREFIX, i),
            kind=AttentionKind.MLA,
            num_kv_heads=1,
            head_size=head_size,
            head_size_v=head_size,
        )
        for i in range(num_layers)
    )
    return _model_layout(top, top, num_layers, top.int_("num_attention_heads", minimum=1), layers)


def _granite_hybrid(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    types = _layer_types(top, num_layers)
    if types is None:
        raise InvalidFieldError(
            field="config.json layer_types",
            value=None,
            reason=f"{top.architecture} needs 'mamba' or 'attention' for each layer",
        )
    hidden = top.int_("hidden_size", minimum=1)
    num_heads = top.int_("num_attention_heads", minimum=1)
    num_kv = top.int_("num_key_value_heads", num_heads, minimum=1)
    layers: list[AttentionLayer | Mamba2Layer] = []
    for i in range(num_layers):
        if types[i] == "mamba":
            layers.append(
                Mamba2Layer(
                    index=i,
                    name=f"{_TEXT_PREFIX}{i}.mixer",
                    num_heads=top.int_("mamba_n_heads", minimum=1),
                    head_dim=top.int_("mamba_d_head", minimum=1),
                    state_size=top.int_("mamba_d_state", minimum=1),
                    n_groups=top.int_("mamba_n_groups", minimum=1),
                    intermediate_size=top.int_("mamba_expand", minimum=1) * hidden,
                    conv_kernel=top.int_("mamba_d_conv", minimum=2),
                )
            )
        elif types[i] == "attention":
            layers.append(
                AttentionLayer(
                    index=i,
                    name=_attn_name(_TEXT_PREFIX, i),
                    kind=AttentionKind.FULL,
                    num_kv_heads=num_kv,
                    head_size=hidden // num_heads,
                    head_size_v=hidden // num_heads,
                )
            )
        else:
            raise InvalidFieldError(
                field=f"config.json layer_types[{i}]",
                value=types[i],
                reason="must be 'mamba' or 'attention'",
            )
    return ModelLayout(
        architecture=top.architecture,
        model_type=top.str_("model_type", ""),
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        layers=tuple(layers),
        config_dtype=_dtype(top, top),
        derived_max_model_len=top.derived_max_model_len(),
        default_max_model_len=default_max_model_len(top),
        mamba_chunk_size=top.int_("mamba_chunk_size", 256, minimum=1),
    )


_FAMILIES: Final[dict[str, Callable[[HFConfig], ModelLayout]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _llama,
    "MixtralForCausalLM": _llama,
    "Phi3ForCausalLM": _llama,
    "GemmaForCausalLM": _llama,
    "Qwen2ForCausalLM": _qwen,
    "Qwen2MoeForCausalLM": _qwen,
    "Qwen3ForCausalLM": _qwen,
    "Qwen3MoeForCausalLM": _qwen,
    "Gemma2ForCausalLM": _gemma2,
    "Gemma3ForCausalLM": _gemma3,
    "Gemma3ForConditionalGeneration": _gemma3_mm,
    "GptOssForCausalLM": _gpt_oss,
    "Llama4ForCausalLM": _llama4,
    "Llama4ForConditionalGeneration": _llama4_mm,
    "DeepseekV2ForCausalLM": _deepseek,
    "DeepseekV3ForCausalLM": _deepseek,
    "GraniteMoeHybridForCausalLM": _granite_hybrid,
}

SUPPORTED_ARCHITECTURES: Final[tuple[str, ...]] = tuple(sorted(_FAMILIES))


def model_layout(config: HFConfig) -> ModelLayout:
    """The stateful layers of the model config.json describes.

    The first entry of ``architectures`` that kvpure knows is used (vLLM
    tries them in order too); none known raises UnknownArchitectureError.
    """
    names = config.architectures()
    for name in names:
        family = _FAMILIES.get(name)
        if family is not None:
            return family(config.with_architecture(name))
    raise UnknownArchitectureError(architecture=", ".join(names), supported=SUPPORTED_ARCHITECTURES)
