"""KV cache specs: what one layer's cache looks like, and how big it gets.

This module gathers the spec family (the classes live in ``specs_base``,
``specs_attention``, ``specs_full_family``, ``specs_mla``, ``specs_mamba`` and
``specs_uniform``):

- :class:`KVDtype` (torch-free dtypes with ``itemsize``), :class:`KVQuantMode`,
  :func:`get_kv_quant_mode`;
- attention: :class:`FullAttentionSpec`, :class:`SinkFullAttentionSpec`,
  :class:`TQFullAttentionSpec`, :class:`RSWASpec`, :class:`MLAAttentionSpec`,
  :class:`HiddenStateCacheSpec`, :class:`SlidingWindowSpec`,
  :class:`SlidingWindowMLASpec`, :class:`ChunkedLocalAttentionSpec`,
  :class:`CrossAttentionSpec`, :class:`EncoderOnlyAttentionSpec`;
- :class:`MambaSpec`; :class:`UniformTypeKVCacheSpecs`;
- :class:`KVCacheSpecKind`, :func:`get_kv_cache_spec_kind`,
  :func:`get_kv_cache_spec_sliding_window`.

Every spec is a frozen, slotted, keyword-only dataclass, equal and hashable
by value over all its fields, as in vLLM 0.26.0.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.errors import FieldTypeError
from kvpure.specs.attention import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
)
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    cdiv,
    get_kv_quant_mode,
    nvfp4_kv_cache_full_dim,
    round_up,
)
from kvpure.specs.full_family import RSWASpec, SinkFullAttentionSpec, TQFullAttentionSpec
from kvpure.specs.mamba import MambaAttentionBackendEnum, MambaSpec
from kvpure.specs.mla import HiddenStateCacheSpec, MLAAttentionSpec, SlidingWindowMLASpec
from kvpure.specs.uniform import (
    UNIFORM_TYPE_BASE_SPEC,
    KVCacheSpecKind,
    UniformTypeKVCacheSpecs,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
    get_uniform_type_base_spec,
    is_uniform_with_collection,
)

#: Every spec class by its vLLM class name (what the JSON ``type`` field holds).
SPEC_CLASSES: dict[str, type[KVCacheSpec]] = {
    cls.__name__: cls
    for cls in (
        FullAttentionSpec,
        SinkFullAttentionSpec,
        TQFullAttentionSpec,
        RSWASpec,
        MLAAttentionSpec,
        HiddenStateCacheSpec,
        SlidingWindowSpec,
        SlidingWindowMLASpec,
        ChunkedLocalAttentionSpec,
        CrossAttentionSpec,
        EncoderOnlyAttentionSpec,
        MambaSpec,
        UniformTypeKVCacheSpecs,
    )
}


def merge_specs(specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
    """vLLM's ``specs[0].merge(specs)``: the one spec for a group of layers."""
    if not isinstance(specs, list | tuple) or not specs:
        raise FieldTypeError(
            field="specs", value=specs, reason="must be a non-empty list or tuple of KVCacheSpec"
        )
    for index, spec in enumerate(specs):
        if not isinstance(spec, KVCacheSpec):
            raise FieldTypeError(
                field=f"specs[{index}]", value=spec, reason="must be a KVCacheSpec"
            )
    first: KVCacheSpec = specs[0]
    return first.merge(specs)


__all__ = [
    "SPEC_CLASSES",
    "UNIFORM_TYPE_BASE_SPEC",
    "AttentionSpec",
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "FullAttentionSpec",
    "HiddenStateCacheSpec",
    "KVCacheSpec",
    "KVCacheSpecKind",
    "KVDtype",
    "KVQuantMode",
    "MLAAttentionSpec",
    "MambaAttentionBackendEnum",
    "MambaSpec",
    "RSWASpec",
    "SinkFullAttentionSpec",
    "SlidingWindowMLASpec",
    "SlidingWindowSpec",
    "TQFullAttentionSpec",
    "UniformTypeKVCacheSpecs",
    "cdiv",
    "get_kv_cache_spec_kind",
    "get_kv_cache_spec_sliding_window",
    "get_kv_quant_mode",
    "get_uniform_type_base_spec",
    "is_uniform_with_collection",
    "merge_specs",
    "nvfp4_kv_cache_full_dim",
    "round_up",
]
