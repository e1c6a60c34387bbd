"""Encoder-decoder models: Whisper.

vLLM 0.26 (``whisper.py``) caches only the decoder: each of the
``decoder_layers`` layers has a self-attention layer (a full-attention spec)
and a cross-attention layer over the encoder's output (a cross-attention spec,
sized by ``max_num_encoder_input_tokens``); the encoder keeps no KV cache.
Heads are ``decoder_attention_heads`` (no grouped-query attention) of
``d_model / decoder_attention_heads``. vLLM names the decoder's layers
``.decoder.layers.{i}.layers.self_attn.attn`` and ``...encoder_attn.attn``:
the model is built with an empty prefix, and ``WhisperDecoder`` hands each
layer ``f"{prefix}.layers"`` on top of ``make_layers``' ``...layers.{i}``.
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.families.common import Layer, attention_layer, model_layout_of
from kvpure.models.layout import AttentionKind, AttentionLayer, ModelLayout

__all__ = ["whisper"]

_DECODER: str = ".decoder.layers.{i}.layers"


def whisper(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("decoder_layers", minimum=1)
    heads = top.int_("decoder_attention_heads", minimum=1)
    width = top.int_("d_model", minimum=1)
    if width % heads:
        raise InvalidFieldError(
            field="config.json d_model",
            value=width,
            reason=f"must be a multiple of decoder_attention_heads ({heads})",
        )
    head = width // heads
    window = top.int_("sliding_window", minimum=1) if top.has("sliding_window") else None
    layers: list[Layer] = []
    for i in range(num_layers):
        base = _DECODER.format(i=i)
        layers.append(attention_layer(i, f"{base}.self_attn.attn", heads, head, window))
        layers.append(
            AttentionLayer(
                index=i,
                name=f"{base}.encoder_attn.attn",
                kind=AttentionKind.CROSS,
                num_kv_heads=heads,
                head_size=head,
                head_size_v=head,
            )
        )
    layout = model_layout_of(top, top, num_layers, heads, layers)
    return ModelLayout(
        architecture=layout.architecture,
        model_type=layout.model_type,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        layers=layout.layers,
        config_dtype=layout.config_dtype,
        derived_max_model_len=layout.derived_max_model_len,
        default_max_model_len=layout.default_max_model_len,
        is_encoder_decoder=True,
    )
