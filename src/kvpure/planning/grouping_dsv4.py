"""The DeepSeek-V4 grouping path: full MLA plus sliding-window MLA of several sizes.

When a model has SlidingWindowMLASpec layers and its pages differ in size,
vLLM groups the full-MLA layers into one UniformTypeKVCacheSpecs and the
sliding-window layers, by (block size, window), into others; then it splits
the sliding-window groups into "layer tuples" so that every group has about
as many tuples as the full-MLA group, padding sliding-window pages up to the
nearest full-MLA page size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kvpure.errors import PlanningAssertionError
from kvpure.planning.values import new_kv_cache_group
from kvpure.settings import PlannerSettings
from kvpure.specs import (
    KVCacheSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    UniformTypeKVCacheSpecs,
    cdiv,
)
from kvpure.specs.attention import set_page_size_padded
from kvpure.specs.kv_cache_config import KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap
from kvpure.specs.mla import DEEPSEEK_V4


def approximate_gcd(values: Sequence[int], *, lower_bound: int | None = None) -> int:
    """The divisor ``d >= lower_bound`` that minimises total round-up padding of ``values``.

    Padding is ``sum((d - x % d) % d)``; ties go to the larger ``d``.
    """
    if not values:
        raise PlanningAssertionError(check="approximate_gcd", detail="values must be non-empty")
    if any(x <= 0 for x in values):
        raise PlanningAssertionError(
            check="approximate_gcd", detail=f"values must be positive, got: {list(values)!r}"
        )
    min_d = max(1, lower_bound if lower_bound is not None else 1)
    max_d = max(values)
    if min_d > max_d:
        return min_d
    best_d = min_d
    best_pad: int | None = None
    for d in range(min_d, max_d + 1):
        pad = sum((d - (x % d)) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_pad = pad
            best_d = d
    return best_d


def group_and_unify_kv_cache_specs(
    specs: LayerMap[KVCacheSpec],
) -> tuple[UniformTypeKVCacheSpecs, ...] | None:
    """Full-MLA layers, then sliding-window MLA layers by (block size, window), as uniform specs.

    None unless there is a SlidingWindowMLASpec layer and the pages differ in
    size (vLLM 0.26.0). Layers of other types are left out, as in vLLM.
    """
    values = specs.ordered_values()
    if not any(isinstance(s, SlidingWindowMLASpec) for s in values):
        return None
    if len({s.page_size_bytes for s in values}) <= 1:
        return None
    mla: list[tuple[str, KVCacheSpec]] = []
    swa: dict[tuple[int, int], list[tuple[str, KVCacheSpec]]] = {}
    for name, spec in specs.ordered_items():
        if isinstance(spec, SlidingWindowMLASpec):
            swa.setdefault((spec.block_size, spec.sliding_window), []).append((name, spec))
        elif isinstance(spec, MLAAttentionSpec):
            mla.append((name, spec))
    if not mla:
        raise PlanningAssertionError(
            check="deepseek_v4_full_mla",
            detail="sliding-window MLA layers need at least one full MLA layer",
        )
    grouped: list[UniformTypeKVCacheSpecs] = []
    for pairs in (mla, *swa.values()):
        uniform = UniformTypeKVCacheSpecs.from_specs(LayerMap.from_pairs(pairs))
        if uniform is None:
            raise PlanningAssertionError(
                check="deepseek_v4_uniform_type",
                detail="layers of one DeepSeek-V4 group are not of one uniform type "
                f"(layers {pairs[0][0]}...)",
            )
        grouped.append(uniform)
    return tuple(grouped)


def _with_raw_page_padding(spec: KVCacheSpec, page_size_padded: int) -> KVCacheSpec:
    # vLLM sets the field directly, bypassing __post_init__ (and so alignment).
    copy = dataclasses.replace(spec)
    set_page_size_padded(copy, page_size_padded)
    return copy


def get_kv_cache_groups_uniform_groups(
    grouped_specs: Sequence[UniformTypeKVCacheSpecs],
) -> tuple[KVCacheGroupSpec, ...]:
    """Groups for the DeepSeek-V4 layout: the full-MLA group, then split sliding-window groups."""
    full_mla = grouped_specs[0]
    if not all(isinstance(s, MLAAttentionSpec) for s in full_mla.kv_cache_specs.ordered_values()):
        raise PlanningAssertionError(
            check="deepseek_v4_full_mla", detail="the first group must hold only MLA layers"
        )
    groups: list[KVCacheGroupSpec] = [
        new_kv_cache_group(layer_names=full_mla.kv_cache_specs.names, kv_cache_spec=full_mla)
    ]
    tuple_counts = [g.get_num_layer_tuples() for g in grouped_specs]
    num_layer_tuples = approximate_gcd(tuple_counts, lower_bound=tuple_counts[0])
    full_page_sizes = full_mla.get_page_sizes()
    for sm_spec in grouped_specs[1:]:
        layer_specs = sm_spec.kv_cache_specs
        if not all(isinstance(s, SlidingWindowMLASpec) for s in layer_specs.ordered_values()):
            raise PlanningAssertionError(
                check="deepseek_v4_swa_mla", detail="later groups must hold only SWA-MLA layers"
            )
        sm_page_sizes = sm_spec.get_page_sizes()
        if max(sm_page_sizes) > max(full_page_sizes):
            raise PlanningAssertionError(
                check="deepseek_v4_page_sizes",
                detail=f"a sliding-window page ({max(sm_page_sizes)} bytes) is larger than "
                f"every full-MLA page (largest {max(full_page_sizes)} bytes)",
            )
        candidate = {ps: min(x for x in full_page_sizes if x >= ps) for ps in sm_page_sizes}
        padded: dict[str, KVCacheSpec] = {}
        layers_per_size: dict[int, list[str]] = {}
        for name, spec in layer_specs.ordered_items():
            target = candidate[spec.page_size_bytes]
            if spec.page_size_bytes < target:
                spec = _with_raw_page_padding(spec, target)
            padded[name] = spec
            layers_per_size.setdefault(target, []).append(name)
        sizes = {len(names) for names in layers_per_size.values()}
        if len(sizes) != 1:
            raise PlanningAssertionError(
                check="deepseek_v4_layer_tuples",
                detail="every page size of a sliding-window group must have the same number "
                f"of layers, got {sorted(sizes)}",
            )
        num_layers_per_size = sizes.pop()
        num_tuple_groups = cdiv(num_layers_per_size, num_layer_tuples)
        layer_tuples = list(zip(*layers_per_size.values(), strict=True))
        for i in range(num_tuple_groups):
            names = tuple(
                n for layer_tuple in layer_tuples[i::num_tuple_groups] for n in layer_tuple
            )
            sub = UniformTypeKVCacheSpecs.from_specs(
                LayerMap.from_pairs((n, padded[n]) for n in names)
            )
            if sub is None:
                raise PlanningAssertionError(
                    check="deepseek_v4_uniform_type",
                    detail=f"split sliding-window group {i} is not of one uniform type",
                )
            groups.append(new_kv_cache_group(layer_names=names, kv_cache_spec=sub))
    return tuple(groups)


def annotate_eagle_groups_deepseek_v4(
    settings: PlannerSettings,
    specs: LayerMap[KVCacheSpec],
    groups: tuple[KVCacheGroupSpec, ...],
) -> tuple[KVCacheGroupSpec, ...]:
    """Flag the group holding the last layer (DeepSeek-V4's MTP layer) as the EAGLE group."""
    if not settings.use_eagle:
        return groups
    if not any(getattr(s, "model_version", None) == DEEPSEEK_V4 for s in specs.ordered_values()):
        return groups
    last_layer = specs.names[-1]
    out = list(groups)
    for i, group in enumerate(out):
        if last_layer in group.layer_names:
            out[i] = dataclasses.replace(group, is_eagle_group=True)
            break
    return tuple(out)
