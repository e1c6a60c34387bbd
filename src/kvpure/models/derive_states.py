"""The per-worker state of recurrent layers, and the indexer spec, as vLLM 0.26 sizes them.

Each state layer (``kvpure.models.layout``) keeps a fixed-size state per
request: a vLLM ``MambaSpec`` with one tensor per entry of ``shapes``. The
sizes follow vLLM 0.26's ``MambaStateShapeCalculator`` and
``MambaStateDtypeCalculator`` (``vllm/model_executor/layers/mamba/mamba_utils.py``):

- the convolution state holds ``conv_kernel - 1`` past inputs (plus one per
  speculative token for Mamba2 and gated delta nets) of the layer's
  convolution channels divided over tensor parallelism, written
  ``(channels, state_len)`` as the project's goldens write it (vLLM's
  ``DS`` layout; its default ``SD`` layout holds the same bytes as
  ``(state_len, channels)``, see :func:`_conv`);
- Mamba1: channels = ``intermediate_size``; SSM state
  ``(intermediate_size / TP, state_size)``;
- Mamba2: channels = ``intermediate_size + 2 * groups * state_size``, the
  groups replicated up to TP when TP does not divide them; SSM state
  ``(heads / TP, head_dim, state_size)``;
- gated delta net: channels = ``2 * k_heads * k_dim + v_heads * v_dim``;
  recurrent state ``(v_heads / TP, v_dim, k_dim)``;
- Kimi delta attention: channels = ``3 * heads * head_dim``; recurrent state
  ``(heads / TP, head_dim, head_dim)`` always in float32.

The convolution state is in the model dtype; the SSM / recurrent state in
``--mamba-ssm-cache-dtype`` (``auto``: the model's own choice, else the model
dtype), except Kimi's, which is float32.
"""

from __future__ import annotations

from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.layout import (
    AttentionLayer,
    GatedDeltaNetLayer,
    KDALayer,
    Mamba1Layer,
    Mamba2Layer,
    StateLayer,
)
from kvpure.specs import CrossAttentionSpec, KVDtype, MLAAttentionSpec, get_kv_quant_mode
from kvpure.specs.mamba import MambaAttentionBackendEnum

__all__ = [
    "INDEXER_QUANT_BLOCK",
    "cross_attention_spec",
    "indexer_spec",
    "state_backend",
    "state_dtypes",
    "state_shapes",
]

INDEXER_QUANT_BLOCK: Final = 128
"""Elements per fp32 scale in DeepSeek-V3.2's fp8 indexer key cache."""


def _conv(channels: int, state_len: int) -> tuple[int, int]:
    """The conv state's shape: ``(channels, state_len)``, the orientation of the
    golden planning inputs (``mamba_hybrid_4attn_28mamba``); the page size does
    not depend on it."""
    return (channels, state_len)


def _shard(layer: StateLayer, what: str, total: int, tp: int) -> int:
    if total % tp:
        raise InvalidFieldError(
            field="tensor_parallel_size",
            value=tp,
            reason=f"must divide the {what} ({total}) of {layer.name}",
        )
    return total // tp


def state_shapes(
    layer: StateLayer, tp: int, num_speculative_tokens: int = 0
) -> tuple[tuple[int, ...], ...]:
    """The state tensors' shapes on one of ``tp`` workers (vLLM's ``get_state_shape``)."""
    spec = num_speculative_tokens
    if isinstance(layer, Mamba1Layer):
        channels = _shard(layer, "Mamba channels", layer.intermediate_size, tp)
        return (_conv(channels, layer.conv_kernel - 1), (channels, layer.state_size))
    if isinstance(layer, Mamba2Layer):
        heads = _shard(layer, "Mamba2 heads", layer.num_heads, tp)
        _shard(layer, "Mamba2 channels", layer.intermediate_size, tp)
        # Groups that TP does not divide are replicated up to TP.
        groups = layer.n_groups if layer.n_groups % tp == 0 else tp
        conv = layer.intermediate_size + 2 * groups * layer.state_size
        return (
            _conv(_shard(layer, "Mamba2 conv channels", conv, tp), layer.conv_kernel - 1 + spec),
            (heads, layer.head_dim, layer.state_size),
        )
    if isinstance(layer, GatedDeltaNetLayer):
        conv = 2 * layer.num_k_heads * layer.head_k_dim + layer.num_v_heads * layer.head_v_dim
        return (
            _conv(_shard(layer, "delta-net conv channels", conv, tp), layer.conv_kernel - 1 + spec),
            (
                _shard(layer, "delta-net value heads", layer.num_v_heads, tp),
                layer.head_v_dim,
                layer.head_k_dim,
            ),
        )
    conv = 3 * layer.num_heads * layer.head_dim
    return (
        _conv(_shard(layer, "KDA conv channels", conv, tp), layer.conv_kernel - 1),
        (_shard(layer, "KDA heads", layer.num_heads, tp), layer.head_dim, layer.head_dim),
    )


def state_dtypes(
    layer: StateLayer, model_dtype: KVDtype, ssm_dtype: KVDtype
) -> tuple[KVDtype, ...]:
    """The state tensors' dtypes (vLLM's ``get_state_dtype``)."""
    if isinstance(layer, KDALayer):
        return (model_dtype, KVDtype.FLOAT32)
    return (model_dtype, ssm_dtype)


def state_backend(layer: StateLayer) -> MambaAttentionBackendEnum:
    """The Mamba backend vLLM names in the layer's spec (``mamba_type``)."""
    if isinstance(layer, Mamba1Layer):
        return MambaAttentionBackendEnum.MAMBA1
    if isinstance(layer, Mamba2Layer):
        return MambaAttentionBackendEnum.MAMBA2
    return MambaAttentionBackendEnum.GDN_ATTN


def indexer_spec(layer: AttentionLayer, block_size: int) -> MLAAttentionSpec:
    """DeepSeek-V3.2's indexer key cache: one latent of fp8 keys plus fp32 scales, as bytes.

    vLLM 0.26 (``DeepseekV32IndexerCache.get_kv_cache_spec`` in
    ``deepseek_v2.py``) stores ``index_head_dim`` fp8 values and one 4-byte
    scale per 128 of them, typed uint8, at the attention block size, whatever
    the KV cache dtype.
    """
    return MLAAttentionSpec(
        block_size=block_size,
        num_kv_heads=1,
        head_size=layer.head_size,
        dtype=KVDtype.UINT8,
    )


def cross_attention_spec(
    layer: AttentionLayer,
    *,
    block_size: int,
    num_kv_heads: int,
    dtype: KVDtype,
    cache_dtype: str,
    indexes_kv_by_block_stride: bool,
) -> CrossAttentionSpec:
    """An encoder-decoder cross-attention layer (vLLM's ``CrossAttention.get_kv_cache_spec``)."""
    return CrossAttentionSpec(
        block_size=block_size,
        num_kv_heads=num_kv_heads,
        head_size=layer.head_size,
        dtype=dtype,
        kv_quant_mode=get_kv_quant_mode(cache_dtype),
        indexes_kv_by_block_stride=indexes_kv_by_block_stride,
    )
