"""Specialised full-attention specs: attention sinks, TurboQuant pages, R-SWA.

They count as full attention for grouping (the registry's uniform base is
FullAttentionSpec) and merge by FullAttentionSpec's rules plus their own field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from kvpure.errors import PlanningAssertionError, SpecMergeError
from kvpure.runtime_types import typed_init
from kvpure.specs.attention import (
    FullAttentionSpec,
    full_attention_last_dim,
    merge_full_attention,
    new_attention_fields,
)
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,  # noqa: F401  # beartype resolves the inherited ``dtype: KVDtype`` hint here
    KVQuantMode,  # noqa: F401  # and ``kv_quant_mode: KVQuantMode``
    check_non_negative,
    check_positive,
    spec_type_names,
)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SinkFullAttentionSpec(FullAttentionSpec):
    """Full attention with attention-sink tokens."""

    sink_len: int | None = None

    def __post_init__(self) -> None:
        FullAttentionSpec.__post_init__(self)
        if self.sink_len is not None:
            check_non_negative("sink_len", self.sink_len)

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        first = specs[0]
        sink_len = first.sink_len if isinstance(first, SinkFullAttentionSpec) else None
        return merge_full_attention(cls, specs, sink_len=sink_len)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TQFullAttentionSpec(FullAttentionSpec):
    """Full attention whose page is sized by TurboQuant slot bytes when ``tq_slot_size > 0``."""

    tq_slot_size: int = 0

    def __post_init__(self) -> None:
        check_non_negative("tq_slot_size", self.tq_slot_size)
        FullAttentionSpec.__post_init__(self)

    @property
    def real_page_size_bytes(self) -> int:
        if self.tq_slot_size > 0:
            return self.block_size * self.num_kv_heads * self.tq_slot_size
        last_dim = full_attention_last_dim(self)
        return self.block_size * self.num_kv_heads * last_dim * self.dtype.itemsize

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        first = specs[0]
        slot = first.tq_slot_size if isinstance(first, TQFullAttentionSpec) else 0
        # Built with the slot size already set: a padded TQ page may be smaller than the
        # head-size formula's page, which vLLM's intermediate never checks.
        merged = cast(TQFullAttentionSpec, merge_full_attention(cls, specs, tq_slot_size=slot))
        for spec in specs:
            if not isinstance(spec, TQFullAttentionSpec):
                # vLLM fails here with AttributeError (a non-TQ spec has no slot size).
                raise PlanningAssertionError(
                    check="tq_slot_size",
                    detail=f"{type(spec).__name__} cannot share a KV cache group with "
                    "TQFullAttentionSpec layers",
                )
            if spec.tq_slot_size != slot:
                raise SpecMergeError(
                    reason="All TQ layers in the same KV cache group must use the same "
                    "tq_slot_size.",
                    spec_types=spec_type_names(specs),
                )
        return replace(merged, tq_slot_size=slot)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RSWASpec(FullAttentionSpec):
    """Reference sliding window attention: prefill stays visible, decode keeps a window."""

    rswa_window: int

    def __post_init__(self) -> None:
        FullAttentionSpec.__post_init__(self)
        check_positive("rswa_window", self.rswa_window)

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        windows: list[int] = []
        for spec in specs:
            if not isinstance(spec, RSWASpec):
                raise SpecMergeError(
                    reason="All attention layers in the same KV cache group must be RSWASpec.",
                    spec_types=spec_type_names(specs),
                )
            windows.append(spec.rswa_window)
        if len(set(windows)) != 1:
            raise SpecMergeError(
                reason=f"All R-SWA layers must share the same rswa_window, got {set(windows)}",
                spec_types=spec_type_names(specs),
            )
        base = merge_full_attention(FullAttentionSpec, specs)
        return cls(
            block_size=base.block_size,
            num_kv_heads=base.num_kv_heads,
            head_size=base.head_size,
            head_size_v=base.head_size_v,
            dtype=base.dtype,
            kv_quant_mode=base.kv_quant_mode,
            page_size_padded=base.page_size_padded,
            indexes_kv_by_block_stride=base.indexes_kv_by_block_stride,
            **new_attention_fields(base),
            sliding_window=base.sliding_window,
            attention_chunk_size=base.attention_chunk_size,
            non_causal=base.non_causal,
            rswa_window=windows[0],
        )
