"""Attention-only families: every layer full or sliding-window attention.

- Llama / Mistral / Mixtral / Phi-3 / Gemma / InternLM3 / Ministral: ``layer_types``
  when present, else every layer slides when ``sliding_window`` is set
  (Mistral-7B-v0.1: 4096).
- Qwen2 / Qwen3 (and their MoE and VL text towers): sliding only with
  ``use_sliding_window``: by ``layer_types``, else layers from
  ``max_window_layers`` on.
- GLM-4 / GLM-4.5, Granite, MiniMax-M2: no window of their own (the config's,
  for a model that is not interleaved); head size ``head_dim`` else
  ``hidden_size / heads``.
- GraniteMoe, InternLM2, Command-R, OLMo-3: head size always
  ``hidden_size / heads`` (their vLLM modules ignore ``head_dim``); Command-R7B/A
  and OLMo-3 slide on their ``sliding_attention`` layers (transformers fills
  ``layer_types`` with every fourth layer full). InternLM2 names its
  layers ``model.layers.{i}.attention.attn``; OLMo-2 runs on vLLM's
  Transformers backend, whose layers are named ``{i}.attn``.
"""

from __future__ import annotations

from pyrsistent import freeze

from kvpure.models.config import HFConfig
from kvpure.models.families.common import (
    TEXT_PREFIX,
    WRAPPED_PREFIX,
    attention_model,
    attn_name,
    layer_types,
    typed_window,
    untyped_window,
    with_defaults,
)
from kvpure.models.layout import ModelLayout

__all__ = [
    "glm_like",
    "granite_moe",
    "internlm2",
    "llama",
    "mistral3",
    "olmo2",
    "qwen",
    "qwen_vl",
    "cohere",
    "every_fourth_full",
]


def _text(top: HFConfig) -> HFConfig:
    """vLLM's ``hf_text_config``: ``text_config`` when the config nests one, else the config."""
    return top.sub("text_config") if top.has("text_config") else top


def llama_text(top: HFConfig, cfg: HFConfig, prefix: str) -> ModelLayout:
    """vLLM's ``LlamaAttention`` rule on ``cfg`` (``llama.py``)."""
    return attention_model(top, cfg, prefix=prefix, sliding=typed_window(cfg))


def llama(top: HFConfig) -> ModelLayout:
    """Llama and every architecture vLLM runs with ``LlamaForCausalLM``'s attention."""
    return llama_text(top, top, TEXT_PREFIX)


def mistral3(top: HFConfig) -> ModelLayout:
    """Mistral-3 (``Mistral3ForConditionalGeneration``): a Mistral (Llama) text tower."""
    return llama_text(top, top.sub("text_config"), WRAPPED_PREFIX)


def qwen_text(top: HFConfig, cfg: HFConfig, prefix: str) -> ModelLayout:
    """The Qwen2/Qwen3 window rule on ``cfg`` (transformers drops the window
    unless ``use_sliding_window``)."""
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    if not cfg.bool_("use_sliding_window", False) or not cfg.has("sliding_window"):
        return attention_model(top, cfg, prefix=prefix, sliding=lambda i: False)
    if layer_types(cfg, num_layers) is not None:
        return attention_model(top, cfg, prefix=prefix, sliding=typed_window(cfg))
    first = cfg.int_("max_window_layers", num_layers)
    return attention_model(top, cfg, prefix=prefix, sliding=lambda i: i >= first)


def qwen(top: HFConfig) -> ModelLayout:
    """Qwen2 / Qwen2-MoE / Qwen3 / Qwen3-MoE."""
    return qwen_text(top, top, TEXT_PREFIX)


def qwen_vl(top: HFConfig) -> ModelLayout:
    """Qwen2-VL / Qwen2.5-VL / Qwen3-VL (+MoE): the Qwen text tower under ``language_model.``."""
    return qwen_text(top, _text(top), WRAPPED_PREFIX)


def glm_like(top: HFConfig) -> ModelLayout:
    """GLM-4, GLM-4.5 (MoE), Granite-3, MiniMax-M2: ``head_dim`` else hidden / heads."""
    return attention_model(top, top, prefix=TEXT_PREFIX, sliding=untyped_window(top))


def granite_moe(top: HFConfig) -> ModelLayout:
    """GraniteMoe: ``hidden_size / num_attention_heads`` (``granitemoe.py`` ignores head_dim)."""
    return attention_model(
        top, top, prefix=TEXT_PREFIX, sliding=untyped_window(top), use_head_dim=False
    )


def cohere(top: HFConfig) -> ModelLayout:
    """Command-R (Cohere v1): hidden / heads, no window of its own (``commandr.py``)."""
    return attention_model(
        top, top, prefix=TEXT_PREFIX, sliding=untyped_window(top), use_head_dim=False
    )


def every_fourth_full(top: HFConfig) -> ModelLayout:
    """Command-R7B / Command-A (Cohere2) and OLMo-3: hidden / heads, windows on
    ``sliding_attention`` layers.

    Without ``layer_types`` transformers fills them (``Cohere2Config``,
    ``Olmo3Config``): layer ``i`` slides unless ``(i + 1) % sliding_window_pattern
    == 0`` (pattern 4), with a window of 4096 when the config gives none.
    """
    cfg = with_defaults(top, {"sliding_window": 4096})
    num_layers = cfg.int_("num_hidden_layers", minimum=1)
    if layer_types(cfg, num_layers) is None:
        pattern = cfg.int_("sliding_window_pattern", 4, minimum=1)
        filled = tuple(
            "sliding_attention" if (i + 1) % pattern else "full_attention"
            for i in range(num_layers)
        )
        cfg = HFConfig(
            data=cfg.data.set("layer_types", freeze(list(filled))),
            architecture=cfg.architecture,
            path=cfg.path,
        )
    return attention_model(
        top, cfg, prefix=TEXT_PREFIX, sliding=typed_window(cfg), use_head_dim=False
    )


def internlm2(top: HFConfig) -> ModelLayout:
    """InternLM2 / 2.5: ``model.layers.{i}.attention.attn``, hidden / heads."""
    return attention_model(
        top,
        top,
        prefix=TEXT_PREFIX,
        sliding=untyped_window(top),
        use_head_dim=False,
        name=lambda i: attn_name(TEXT_PREFIX, i, "attention"),
    )


def olmo2(top: HFConfig) -> ModelLayout:
    """OLMo-2 on vLLM's Transformers backend: layers ``{i}.attn`` (``transformers/base.py``)."""
    return attention_model(
        top, top, prefix="", sliding=typed_window(top), name=lambda i: f"{i}.attn"
    )
