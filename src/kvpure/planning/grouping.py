"""Splitting a model's layers into KV cache groups, as vLLM 0.26.0's ``get_kv_cache_groups``.

In order: the hybrid-manager-disabled conversion; no layers -> no groups;
one mergeable spec -> one group; one uniform type -> one UniformType group;
the DeepSeek-V4 path; else the general hybrid path (hidden-state layers
pulled out, page sizes unified, layers bucketed by spec and split into
equal-sized groups, hidden-state layers added back with aligned pages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kvpure.errors import (
    HybridUnificationError,
    PageSizeUnificationError,
    PlanningAssertionError,
)
from kvpure.planning.grouping_dsv4 import (
    annotate_eagle_groups_deepseek_v4,
    get_kv_cache_groups_uniform_groups,
    group_and_unify_kv_cache_specs,
)
from kvpure.planning.grouping_promote import (
    ensure_min_page_size,
    hidden_state_block_size,
    merge_compatible_buckets,
    merged_if_uniform,
    promote_local_kv_cache_specs,
)
from kvpure.planning.grouping_promote import (
    is_kv_cache_spec_uniform as is_kv_cache_spec_uniform,
)
from kvpure.planning.inputs import check_settings, layer_specs_checked
from kvpure.planning.values import new_kv_cache_group
from kvpure.settings import PlannerSettings
from kvpure.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    cdiv,
    merge_specs,
)
from kvpure.specs.base import spec_type_names
from kvpure.specs.kv_cache_config import KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap


@dataclass(frozen=True, slots=True, kw_only=True)
class PaddingFact:
    """vLLM's "Add N padding layers, may waste at most P% KV cache memory" warning, as data."""

    num_padding_layers: int
    num_layers: int

    @property
    def waste_percent(self) -> float:
        """The most KV cache memory the padding may waste, in percent of the bucket."""
        return self.num_padding_layers / self.num_layers * 100

    @property
    def message(self) -> str:
        """The warning as vLLM logs it."""
        return (
            f"Add {self.num_padding_layers} padding layers, may waste at most "
            f"{self.waste_percent:.2f}% KV cache memory"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheGrouping:
    """The groups, plus the facts vLLM only logs while grouping."""

    groups: tuple[KVCacheGroupSpec, ...]
    padding: tuple[PaddingFact, ...] = ()
    hybrid_specs_converted: bool = False


def is_kv_cache_page_size_uniform(specs: LayerMap[KVCacheSpec]) -> bool:
    """Whether every layer has the same page size."""
    return len({s.page_size_bytes for s in specs.ordered_values()}) == 1


def get_uniform_page_size(specs: Iterable[KVCacheSpec]) -> int:
    """The one page size of ``specs``; a typed error if they differ."""
    sizes = {s.page_size_bytes for s in specs}
    if len(sizes) != 1:
        raise PlanningAssertionError(
            check="uniform_page_size",
            detail=f"KV cache groups must share one page size, got {sorted(sizes)} bytes",
        )
    return sizes.pop()


def _is_uniform_or_uniform_type(specs: LayerMap[KVCacheSpec]) -> bool:
    return is_kv_cache_spec_uniform(specs) or UniformTypeKVCacheSpecs.is_uniform_type(specs)


def unify_hybrid_kv_cache_specs(specs: LayerMap[KVCacheSpec]) -> LayerMap[KVCacheSpec]:
    """With the hybrid manager disabled: window and chunk layers become full attention.

    Returns a new map (vLLM edits its dict in place). As in vLLM, the
    converted specs lose ``indexes_kv_by_block_stride`` (and chunked layers
    their ``kv_quant_mode`` and ``head_size_v``).
    """
    if _is_uniform_or_uniform_type(specs):
        return specs
    values = specs.ordered_values()
    has_full = any(isinstance(s, FullAttentionSpec) for s in values)
    has_sliding = any(isinstance(s, SlidingWindowSpec) for s in values)
    has_chunked = any(isinstance(s, ChunkedLocalAttentionSpec) for s in values)
    has_swa_mla = any(isinstance(s, SlidingWindowMLASpec) for s in values)
    uniform_block_size: int | None = None
    if has_swa_mla:
        first_full = next((s for s in values if isinstance(s, FullAttentionSpec)), None)
        if first_full is None:
            raise PlanningAssertionError(
                check="swa_mla_needs_full",
                detail="sliding-window MLA layers need a full-attention layer to unify with",
            )
        uniform_block_size = first_full.block_size
    if has_full and (has_sliding or has_chunked):
        updates: dict[str, KVCacheSpec] = {}
        for name, spec in specs.ordered_items():
            converted = _as_full_attention(spec, uniform_block_size)
            if converted is not None:
                updates[name] = converted
        specs = specs.replace_values(updates)
    if not _is_uniform_or_uniform_type(specs):
        raise HybridUnificationError(spec_types=spec_type_names(specs.ordered_values()))
    return specs


def _as_full_attention(spec: KVCacheSpec, uniform_block_size: int | None) -> KVCacheSpec | None:
    if isinstance(spec, SlidingWindowMLASpec):
        return MLAAttentionSpec(
            block_size=uniform_block_size if uniform_block_size is not None else spec.block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            dtype=spec.dtype,
            page_size_padded=spec.page_size_padded,
            cache_dtype_str=spec.cache_dtype_str,
            alignment=spec.alignment,
            compress_ratio=spec.compress_ratio,
            model_version=spec.model_version,
        )
    if isinstance(spec, SlidingWindowSpec):
        return FullAttentionSpec(
            block_size=spec.block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            head_size_v=spec.head_size_v,
            dtype=spec.dtype,
            kv_quant_mode=spec.kv_quant_mode,
            sliding_window=spec.sliding_window,
            page_size_padded=spec.page_size_padded,
        )
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return FullAttentionSpec(
            block_size=spec.block_size,
            num_kv_heads=spec.num_kv_heads,
            head_size=spec.head_size,
            dtype=spec.dtype,
            attention_chunk_size=spec.attention_chunk_size,
            page_size_padded=spec.page_size_padded,
        )
    return None


def unify_kv_cache_spec_page_size(
    specs: LayerMap[KVCacheSpec], *, pads_any_attention_page: bool = False
) -> LayerMap[KVCacheSpec]:
    """Bring every layer to the largest page: scale block sizes, or pad where allowed.

    Rule ``pads_any_attention_page`` (``unify_kv_cache_spec_page_size``): vLLM 0.33+ pads
    any non-MLA attention page; 0.26 only one with ``indexes_kv_by_block_stride``.
    """
    values = specs.ordered_values()
    page_sizes = {s.page_size_bytes for s in values}
    if len(page_sizes) <= 1:
        return specs
    max_page = max(page_sizes)
    updates: dict[str, KVCacheSpec] = {}
    for name, spec in specs.ordered_items():
        page = spec.page_size_bytes
        if page == max_page:
            continue
        new_spec: KVCacheSpec
        if isinstance(spec, MambaSpec):
            new_spec = dataclasses.replace(spec, page_size_padded=max_page)
        elif max_page % page == 0:
            new_spec = spec.copy_with_new_block_size(spec.block_size * (max_page // page))
        elif isinstance(spec, AttentionSpec) and (
            spec.indexes_kv_by_block_stride
            if not pads_any_attention_page
            else not isinstance(spec, MLAAttentionSpec)
        ):
            new_spec = dataclasses.replace(spec, page_size_padded=max_page)
        else:
            raise PageSizeUnificationError(
                layer_name=name,
                page_size_bytes=page,
                max_page_size_bytes=max_page,
                pads_any_attention_page=pads_any_attention_page,
            )
        if new_spec.page_size_bytes != max_page:
            raise PlanningAssertionError(
                check="unified_page_size",
                detail=f"layer {name}: page is {new_spec.page_size_bytes} bytes after "
                f"unification, expected {max_page} bytes",
            )
        updates[name] = new_spec
    return specs.replace_values(updates)


def create_kv_cache_group_specs(
    specs: LayerMap[KVCacheSpec], grouped_layer_names: Sequence[Sequence[str]]
) -> tuple[KVCacheGroupSpec, ...]:
    """One group per name list, with the merged spec of its layers."""
    return tuple(
        new_kv_cache_group(
            layer_names=tuple(names), kv_cache_spec=merge_specs([specs[n] for n in names])
        )
        for names in grouped_layer_names
    )


def get_kv_cache_groups_uniform_page_size(
    specs: LayerMap[KVCacheSpec], *, merges_compatible_buckets: bool = False
) -> tuple[tuple[KVCacheGroupSpec, ...], tuple[PaddingFact, ...]]:
    """Hybrid layers of one page size: bucket by spec, split buckets into equal-sized groups.

    The group size is the smallest bucket, or the largest when the largest is
    under 1.5x the smallest; bucket ``i``-th groups take ``layers[i::n]``. Rule
    ``merges_compatible_buckets`` (vLLM 0.33+): buckets whose specs merge share groups.
    """
    by_spec: dict[KVCacheSpec, list[str]] = {}
    for name, spec in specs.ordered_items():
        by_spec.setdefault(spec, []).append(name)
    if not by_spec:
        raise PlanningAssertionError(check="layers_to_group", detail="no layers to group")
    buckets = (
        merge_compatible_buckets(by_spec) if merges_compatible_buckets else list(by_spec.values())
    )
    sizes = [len(layers) for layers in buckets]
    min_layers, max_layers = min(sizes), max(sizes)
    group_size = max_layers if 2 * max_layers < 3 * min_layers else min_layers
    grouped: list[list[str]] = []
    padding: list[PaddingFact] = []
    for layers in buckets:
        num_padding = group_size - len(layers) % group_size
        if num_padding != group_size:
            padding.append(PaddingFact(num_padding_layers=num_padding, num_layers=len(layers)))
        num_groups = cdiv(len(layers), group_size)
        grouped.extend(layers[i::num_groups] for i in range(num_groups))
    return create_kv_cache_group_specs(specs, grouped), tuple(padding)


def get_kv_cache_groups(settings: PlannerSettings, specs: LayerMap[KVCacheSpec]) -> KVCacheGrouping:
    """The KV cache groups of a model (all workers' layers merged), with grouping facts."""
    check_settings(settings)
    specs = layer_specs_checked("specs", specs)
    rules = settings.rules
    converted = False
    if settings.disable_hybrid_kv_cache_manager:
        unified = (
            promote_local_kv_cache_specs(specs)
            if rules.promotes_local_specs
            else unify_hybrid_kv_cache_specs(specs)
        )
        converted = unified is not specs
        specs = unified
    if not specs:
        return KVCacheGrouping(groups=(), hybrid_specs_converted=converted)
    merged = merged_if_uniform(specs)
    if merged is not None:  # one group (vLLM merges the layers a second time; same result)
        group = new_kv_cache_group(layer_names=specs.names, kv_cache_spec=merged)
        return KVCacheGrouping(groups=(group,), hybrid_specs_converted=converted)
    uniform = UniformTypeKVCacheSpecs.from_specs(
        specs, mamba_states_match=rules.mamba_uniform_needs_equal_states
    )
    if uniform is not None:
        group = new_kv_cache_group(layer_names=specs.names, kv_cache_spec=uniform)
        return KVCacheGrouping(groups=(group,), hybrid_specs_converted=converted)
    grouped_specs = group_and_unify_kv_cache_specs(specs) if rules.deepseek_v4_grouping else None
    if grouped_specs:
        groups = get_kv_cache_groups_uniform_groups(grouped_specs)
        groups = annotate_eagle_groups_deepseek_v4(settings, specs, groups)
        return KVCacheGrouping(groups=groups, hybrid_specs_converted=converted)
    hidden = [(n, s) for n, s in specs.ordered_items() if isinstance(s, HiddenStateCacheSpec)]
    others = specs
    if hidden:
        others = specs.subset(
            n for n in specs.names if not isinstance(specs[n], HiddenStateCacheSpec)
        )
    others = unify_kv_cache_spec_page_size(
        others, pads_any_attention_page=rules.pads_any_attention_page
    )
    groups, padding = get_kv_cache_groups_uniform_page_size(
        others, merges_compatible_buckets=rules.merges_compatible_buckets
    )
    if hidden:
        common_page = get_uniform_page_size(g.kv_cache_spec for g in groups)
        if rules.hidden_state_block_divides_groups:
            widest = max(s.num_kv_heads * s.head_size * s.dtype.itemsize for _, s in hidden)
            groups, common_page = ensure_min_page_size(groups, common_page, widest)
        extra: list[KVCacheGroupSpec] = []
        for name, spec in hidden:
            per_token = spec.num_kv_heads * spec.head_size * spec.dtype.itemsize
            block = (
                hidden_state_block_size(groups, common_page, per_token)
                if rules.hidden_state_block_divides_groups
                else max(common_page // per_token, 1)
            )
            aligned = dataclasses.replace(spec, block_size=block, page_size_padded=common_page)
            extra.append(new_kv_cache_group(layer_names=(name,), kv_cache_spec=aligned))
        groups = (*groups, *extra)
    return KVCacheGrouping(groups=groups, padding=padding, hybrid_specs_converted=converted)
