"""Multi-head latent attention families: DeepSeek-V2/V3/V3.2 (and Kimi-K2), Kimi-Linear.

- DeepSeek-V2 / V3 / R1 / Kimi-K2: MLA on every layer, one latent "head" of
  ``kv_lora_rank + qk_rope_head_dim`` (vLLM's ``MLAAttention``).
- DeepSeek-V3.2 (a config with ``index_topk``): the same, plus on each layer
  that runs the sparse-attention indexer an indexer key cache
  ``model.layers.{i}.self_attn.indexer.k_cache`` of ``index_head_dim`` fp8
  bytes and a 4-byte scale per 128 (``deepseek_v2.py``: ``Indexer`` and
  ``DeepseekV32IndexerCache``). A layer skips the indexer when
  ``index_topk_pattern`` marks it ``S``, else when
  ``max(i - index_skip_topk_offset + 1, 0) % index_topk_freq != 0``.
- Kimi-Linear: layer ``i`` is Kimi delta attention when ``i + 1`` is in
  ``linear_attn_config.kda_layers`` (state at ``model.layers.{i}.self_attn``),
  else MLA (``model.layers.{i}.self_attn.attn``).
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.config import HFConfig
from kvpure.models.derive_states import INDEXER_QUANT_BLOCK
from kvpure.models.families.common import TEXT_PREFIX, Layer, attn_name, model_layout_of
from kvpure.models.layout import AttentionKind, AttentionLayer, KDALayer, ModelLayout

__all__ = ["deepseek", "kimi_linear"]


def _mla_layer(cfg: HFConfig, index: int) -> AttentionLayer:
    head_size = cfg.int_("kv_lora_rank", minimum=1) + cfg.int_("qk_rope_head_dim", minimum=1)
    return AttentionLayer(
        index=index,
        name=attn_name(TEXT_PREFIX, index),
        kind=AttentionKind.MLA,
        num_kv_heads=1,
        head_size=head_size,
        head_size_v=head_size,
    )


def _runs_indexer(cfg: HFConfig, index: int) -> bool:
    if cfg.has("index_topk_pattern"):
        pattern = cfg.raw("index_topk_pattern")
        marks = pattern if isinstance(pattern, str) else "".join(cfg.str_list("index_topk_pattern"))
        return not (index < len(marks) and marks[index] == "S")
    freq = cfg.int_("index_topk_freq", 1, minimum=1)
    offset = cfg.int_("index_skip_topk_offset", 2)
    return max(index - offset + 1, 0) % freq == 0


def deepseek(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    sparse = top.has("index_topk")
    index_size = 0
    if sparse:
        index_dim = top.int_("index_head_dim", minimum=1)
        index_size = index_dim + index_dim // INDEXER_QUANT_BLOCK * 4
    layers: list[Layer] = []
    for i in range(num_layers):
        layers.append(_mla_layer(top, i))
        if sparse and _runs_indexer(top, i):
            layers.append(
                AttentionLayer(
                    index=i,
                    name=f"{TEXT_PREFIX}{i}.self_attn.indexer.k_cache",
                    kind=AttentionKind.MLA_INDEXER,
                    num_kv_heads=1,
                    head_size=index_size,
                    head_size_v=index_size,
                )
            )
    return model_layout_of(top, top, num_layers, top.int_("num_attention_heads", minimum=1), layers)


def kimi_linear(top: HFConfig) -> ModelLayout:
    num_layers = top.int_("num_hidden_layers", minimum=1)
    linear = top.sub("linear_attn_config")
    kda = set(linear.int_list("kda_layers"))
    if not kda:
        raise InvalidFieldError(
            field=f"config.json {linear.name('kda_layers')}",
            value=[],
            reason="must list the (1-based) Kimi delta attention layers",
        )
    layers: list[Layer] = []
    for i in range(num_layers):
        if i + 1 in kda:
            layers.append(
                KDALayer(
                    index=i,
                    name=f"{TEXT_PREFIX}{i}.self_attn",
                    num_heads=linear.int_("num_heads", minimum=1),
                    head_dim=linear.int_("head_dim", minimum=1),
                    conv_kernel=linear.int_("short_conv_kernel_size", minimum=2),
                )
            )
        else:
            layers.append(_mla_layer(top, i))
    return model_layout_of(top, top, num_layers, top.int_("num_attention_heads", minimum=1), layers)
