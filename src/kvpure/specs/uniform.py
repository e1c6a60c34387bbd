"""UniformTypeKVCacheSpecs, the spec-type registry, and spec kinds.

The registry is a static table: spec class -> the base class that decides
which specs count as "the same type" (vLLM registers the same table lazily).
Lookups walk the class's MRO, as vLLM's do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from kvpure.errors import InvalidFieldError, PlanningAssertionError
from kvpure.runtime_types import typed_init
from kvpure.settings import PlannerSettings
from kvpure.specs.attention import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
)
from kvpure.specs.base import KVCacheSpec, cdiv
from kvpure.specs.full_family import RSWASpec, SinkFullAttentionSpec, TQFullAttentionSpec
from kvpure.specs.layer_map import LayerMap
from kvpure.specs.mamba import MambaSpec
from kvpure.specs.mla import HiddenStateCacheSpec, MLAAttentionSpec, SlidingWindowMLASpec

#: spec class -> uniform-type base class (vLLM's ``register_all_kvcache_specs``).
UNIFORM_TYPE_BASE_SPEC: dict[type[KVCacheSpec], type[KVCacheSpec]] = {
    FullAttentionSpec: FullAttentionSpec,
    SlidingWindowSpec: SlidingWindowSpec,
    SlidingWindowMLASpec: SlidingWindowMLASpec,
    MambaSpec: MambaSpec,
    ChunkedLocalAttentionSpec: ChunkedLocalAttentionSpec,
    CrossAttentionSpec: CrossAttentionSpec,
    TQFullAttentionSpec: FullAttentionSpec,
    MLAAttentionSpec: FullAttentionSpec,
    RSWASpec: FullAttentionSpec,
    HiddenStateCacheSpec: FullAttentionSpec,
    SinkFullAttentionSpec: FullAttentionSpec,
}


def get_uniform_type_base_spec(spec: KVCacheSpec) -> type[KVCacheSpec] | None:
    """The registered uniform-type base of ``spec``'s class, or None if unregistered."""
    return uniform_type_base_of_class(type(spec))


def uniform_type_base_of_class(cls: type) -> type[KVCacheSpec] | None:
    """The registered uniform-type base of a spec class, or None if unregistered."""
    for base in cls.__mro__:
        found = UNIFORM_TYPE_BASE_SPEC.get(base)
        if found is not None:
            return found
    return None


def is_uniform_with_collection(
    spec: KVCacheSpec, specs: LayerMap[KVCacheSpec], *, mamba_states_match: bool = False
) -> bool:
    """vLLM's ``spec.is_uniform_with_collection(specs)``: may they share one uniform group?

    ``mamba_states_match`` is vLLM 0.33+'s ``MambaSpec.is_uniform_with_collection``: Mamba
    layers must also agree on page size, checkpoint blocks and alignment, state
    alignment and TP replication (0.26 compared the speculative blocks only).
    """
    values = specs.ordered_values()
    if isinstance(spec, ChunkedLocalAttentionSpec):
        chunk = spec.attention_chunk_size
        return all(
            isinstance(s, ChunkedLocalAttentionSpec) and s.attention_chunk_size == chunk
            for s in values
        )
    if isinstance(spec, SlidingWindowMLASpec):
        window = spec.sliding_window
        return all(
            isinstance(s, SlidingWindowMLASpec) and s.sliding_window == window for s in values
        )
    if isinstance(spec, SlidingWindowSpec):
        window = spec.sliding_window
        return all(isinstance(s, SlidingWindowSpec) and s.sliding_window == window for s in values)
    if isinstance(spec, MambaSpec):
        spec_blocks = spec.num_speculative_blocks
        if not all(
            isinstance(s, MambaSpec) and s.num_speculative_blocks == spec_blocks for s in values
        ):
            return False
        return not mamba_states_match or all(
            isinstance(s, MambaSpec)
            and s.num_prefill_checkpoint_blocks == spec.num_prefill_checkpoint_blocks
            and s.prefill_checkpoint_alignment == spec.prefill_checkpoint_alignment
            and s.page_size_bytes == spec.page_size_bytes
            and s.state_alignment == spec.state_alignment
            and s.tp_replicated == spec.tp_replicated
            for s in values
        )
    base = get_uniform_type_base_spec(spec)
    if base is None:
        raise PlanningAssertionError(
            check="registered_spec_type",
            detail=f"Unsupported KV cache spec type: {type(spec).__name__}; only registered "
            "spec types can be grouped.",
        )
    return all(isinstance(s, base) for s in values)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class UniformTypeKVCacheSpecs(KVCacheSpec):
    """Layers of one attention type (same token slots per request) but different page sizes.

    All of them go into one KV cache group; each layer keeps its own spec and
    the group's page is the sum of the layers' pages.
    """

    kv_cache_specs: LayerMap[KVCacheSpec]
    _page_size_bytes: int = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        KVCacheSpec.__post_init__(self)
        if not self.kv_cache_specs:
            raise InvalidFieldError(
                field="kv_cache_specs", value=self.kv_cache_specs, reason="must not be empty"
            )
        total = sum(s.page_size_bytes for s in self.kv_cache_specs.ordered_values())
        object.__setattr__(self, "_page_size_bytes", total)
        object.__setattr__(self, "dcp_sharded", self.kv_cache_specs.ordered_values()[0].dcp_sharded)

    @property
    def page_size_bytes(self) -> int:
        return self._page_size_bytes

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        return self.max_memory_usage_pages(settings) * self.page_size_bytes

    @property
    def prefix_cacheable(self) -> bool:
        return all(s.prefix_cacheable for s in self.kv_cache_specs.ordered_values())

    @classmethod
    def is_uniform_type(
        cls, kv_cache_specs: LayerMap[KVCacheSpec], *, mamba_states_match: bool = False
    ) -> bool:
        """Whether all layers share the block size, DCP sharding and the registered type."""
        values = kv_cache_specs.ordered_values()
        if len({s.block_size for s in values}) > 1:
            return False
        if len({s.dcp_sharded for s in values}) > 1:
            return False
        return is_uniform_with_collection(
            values[0], kv_cache_specs, mamba_states_match=mamba_states_match
        )

    @classmethod
    def from_specs(
        cls, kv_cache_specs: LayerMap[KVCacheSpec], *, mamba_states_match: bool = False
    ) -> UniformTypeKVCacheSpecs | None:
        """The uniform-type spec of these layers, or None if they are not of one type."""
        if not cls.is_uniform_type(kv_cache_specs, mamba_states_match=mamba_states_match):
            return None
        block_size = kv_cache_specs.ordered_values()[0].block_size
        return cls(block_size=block_size, kv_cache_specs=kv_cache_specs)

    def get_page_sizes(self) -> tuple[int, ...]:
        """The distinct page sizes of the layers, ascending."""
        return tuple(sorted({s.page_size_bytes for s in self.kv_cache_specs.ordered_values()}))

    def get_num_layer_tuples(self) -> int:
        """How many layers share the most common page size."""
        counts = Counter(s.page_size_bytes for s in self.kv_cache_specs.ordered_values())
        return counts.most_common(1)[0][1]

    def max_memory_usage_pages(self, settings: PlannerSettings) -> int:
        """The most blocks any one layer needs for one request."""
        return max(
            cdiv(s.max_memory_usage_bytes(settings), s.page_size_bytes)
            for s in self.kv_cache_specs.ordered_values()
        )


class KVCacheSpecKind(str, Enum):  # noqa: UP042  # vLLM mixes in str the same way
    """The kind of attention a spec describes (vLLM's ``KVCacheSpecKind``)."""

    FULL_ATTENTION = "full_attention"
    MLA_ATTENTION = "mla_attention"
    SLIDING_WINDOW = "sliding_window"
    SLIDING_WINDOW_MLA = "sliding_window_mla"
    MAMBA = "mamba"
    CHUNKED_LOCAL_ATTENTION = "chunked_local_attention"
    SINK_FULL_ATTENTION = "sink_full_attention"
    ENCODER_ONLY_ATTENTION = "encoder_only_attention"
    CROSS_ATTENTION = "cross_attention"
    UNKNOWN = "unknown"


# Most specific classes first, as vLLM checks them.
_KIND_ORDER: tuple[tuple[type[KVCacheSpec], KVCacheSpecKind], ...] = (
    (SlidingWindowMLASpec, KVCacheSpecKind.SLIDING_WINDOW_MLA),
    (MLAAttentionSpec, KVCacheSpecKind.MLA_ATTENTION),
    (SinkFullAttentionSpec, KVCacheSpecKind.SINK_FULL_ATTENTION),
    (FullAttentionSpec, KVCacheSpecKind.FULL_ATTENTION),
    (ChunkedLocalAttentionSpec, KVCacheSpecKind.CHUNKED_LOCAL_ATTENTION),
    (SlidingWindowSpec, KVCacheSpecKind.SLIDING_WINDOW),
    (MambaSpec, KVCacheSpecKind.MAMBA),
    (EncoderOnlyAttentionSpec, KVCacheSpecKind.ENCODER_ONLY_ATTENTION),
    (CrossAttentionSpec, KVCacheSpecKind.CROSS_ATTENTION),
)


def get_kv_cache_spec_kind(kv_cache_spec: KVCacheSpec) -> KVCacheSpecKind:
    """The spec's kind; a uniform-type spec has its layers' kind if they share one."""
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        kinds = {get_kv_cache_spec_kind(s) for s in kv_cache_spec.kv_cache_specs.ordered_values()}
        return kinds.pop() if len(kinds) == 1 else KVCacheSpecKind.UNKNOWN
    for cls, kind in _KIND_ORDER:
        if isinstance(kv_cache_spec, cls):
            return kind
    return KVCacheSpecKind.UNKNOWN


def get_kv_cache_spec_sliding_window(kv_cache_spec: KVCacheSpec) -> int | None:
    """The sliding window of a sliding-window spec (or the one window all layers share)."""
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        windows = {
            get_kv_cache_spec_sliding_window(s)
            for s in kv_cache_spec.kv_cache_specs.ordered_values()
        }
        return windows.pop() if len(windows) == 1 else None
    if isinstance(kv_cache_spec, SlidingWindowSpec):
        return kv_cache_spec.sliding_window
    return None
