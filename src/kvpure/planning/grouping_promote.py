"""Grouping steps that changed in vLLM 0.33 (``vllm/v1/core/kv_cache_planning.py``).

- :func:`promote_local_kv_cache_specs`: with the hybrid manager disabled, window and
  chunk layers become full attention keeping every field (``replace_as``), at the full
  layers' block size, separately for DCP-sharded and replicated layers
  (``unify_hybrid_kv_cache_specs`` -> ``_promote_local_kv_cache_specs``).
- :func:`merge_compatible_buckets`: buckets of equal specs that merge into one spec
  share groups (``_get_kv_cache_groups_uniform_page_size``).
- :func:`hidden_state_block_size`: the largest divisor of the groups' gcd block size
  whose tokens fit the common page (``_largest_divisor_at_most``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import cast

from kvpure.errors import HybridPromotionError, KVPureValueError, SpecMergeError
from kvpure.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    cdiv,
    merge_specs,
)
from kvpure.specs.kv_cache_config import KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap

_DROPPED = frozenset({"extra_retained_tokens", "bounded_replay"})


def replace_as(spec: KVCacheSpec, target: type[KVCacheSpec], **changes: object) -> KVCacheSpec:
    """vLLM 0.33+'s ``replace_as``: ``spec``'s fields rebuilt as ``target`` (the fields
    ``target`` lacks dropped), with ``changes`` applied."""
    names = {f.name for f in dataclasses.fields(target) if f.init}
    kwargs: dict[str, object] = {
        f.name: getattr(spec, f.name)
        for f in dataclasses.fields(spec)
        if f.init and f.name in names and f.name not in _DROPPED
    }
    kwargs.update(changes)
    build = cast(Callable[..., KVCacheSpec], target)
    return build(**kwargs)


def is_kv_cache_spec_uniform(specs: LayerMap[KVCacheSpec]) -> bool:
    """Whether all layers merge into one spec (no layers counts as uniform)."""
    return not specs or merged_if_uniform(specs) is not None


def merged_if_uniform(specs: LayerMap[KVCacheSpec]) -> KVCacheSpec | None:
    """The one spec all of ``specs`` (at least one layer) merge into; None if they do not."""
    try:
        return merge_specs(specs.ordered_values())
    except SpecMergeError:
        return None


def _uniform(specs: LayerMap[KVCacheSpec]) -> bool:
    return is_kv_cache_spec_uniform(specs) or UniformTypeKVCacheSpecs.is_uniform_type(
        specs, mamba_states_match=True
    )


def _promote_one(specs: LayerMap[KVCacheSpec]) -> LayerMap[KVCacheSpec]:
    if _uniform(specs):
        return specs
    values = specs.ordered_values()
    has_full = any(isinstance(s, FullAttentionSpec) for s in values)
    has_local = any(isinstance(s, SlidingWindowSpec | ChunkedLocalAttentionSpec) for s in values)
    full_sizes = {s.block_size for s in values if isinstance(s, FullAttentionSpec)}
    full_block = next(iter(full_sizes)) if len(full_sizes) == 1 else None
    if has_full and has_local:
        updates: dict[str, KVCacheSpec] = {}
        for name, spec in specs.ordered_items():
            target: type[KVCacheSpec] | None = None
            if isinstance(spec, SlidingWindowMLASpec):
                target = MLAAttentionSpec
            elif isinstance(spec, SlidingWindowSpec | ChunkedLocalAttentionSpec):
                target = FullAttentionSpec
            if target is None or not isinstance(spec, AttentionSpec):
                continue
            block = full_block or spec.block_size
            padded = spec.page_size_padded
            if padded is not None:
                padded = max(padded, spec.unpadded_page_size_bytes * block // spec.block_size)
            updates[name] = replace_as(spec, target, block_size=block, page_size_padded=padded)
        specs = specs.replace_values(updates)
    if not _uniform(specs):
        raise HybridPromotionError()
    return specs


def promote_local_kv_cache_specs(specs: LayerMap[KVCacheSpec]) -> LayerMap[KVCacheSpec]:
    """vLLM 0.33+'s ``unify_hybrid_kv_cache_specs``: DCP-replicated attention layers and
    the rest are promoted separately; the map keeps the model's layer order."""
    parts: dict[bool, list[str]] = {}
    for name, spec in specs.ordered_items():
        replicated = isinstance(spec, AttentionSpec) and not spec.dcp_sharded
        parts.setdefault(replicated, []).append(name)
    updates: dict[str, KVCacheSpec] = {}
    for names in parts.values():
        part = specs.subset(names)
        promoted = _promote_one(part)
        if promoted is not part:
            updates.update(promoted.ordered_items())
    return specs.replace_values(updates) if updates else specs


def merge_compatible_buckets(
    buckets: dict[KVCacheSpec, list[str]],
) -> list[list[str]]:
    """vLLM 0.33+: a bucket joins the first earlier bucket whose specs it merges with."""
    layer_buckets: list[list[str]] = []
    spec_buckets: list[list[KVCacheSpec]] = []
    for spec, names in buckets.items():
        for layers, specs in zip(layer_buckets, spec_buckets, strict=True):
            try:
                merge_specs([*specs, spec])
            except KVPureValueError:
                continue
            layers.extend(names)
            specs.append(spec)
            break
        else:
            layer_buckets.append(list(names))
            spec_buckets.append([spec])
    return layer_buckets


def _largest_divisor_at_most(value: int, limit: int) -> int:
    for candidate in range(min(value, limit), 0, -1):
        if value % candidate == 0:
            return candidate
    return 1


def ensure_min_page_size(
    groups: Sequence[KVCacheGroupSpec], common_page: int, max_per_token: int
) -> tuple[tuple[KVCacheGroupSpec, ...], int]:
    """vLLM 0.33+'s ``_ensure_min_page_size``: scale the groups' block sizes until the
    common page holds the widest hidden-state token."""
    if max_per_token <= common_page:
        return tuple(groups), common_page
    scale = cdiv(max_per_token, common_page)
    scaled: list[KVCacheGroupSpec] = []
    for group in groups:
        spec = group.kv_cache_spec
        changes: dict[str, object] = {"block_size": spec.block_size * scale}
        if isinstance(spec, AttentionSpec | MambaSpec) and spec.page_size_padded is not None:
            changes["page_size_padded"] = spec.page_size_padded * scale
        scaled.append(
            dataclasses.replace(group, kv_cache_spec=replace_as(spec, type(spec), **changes))
        )
    return tuple(scaled), common_page * scale


def hidden_state_block_size(
    groups: Sequence[KVCacheGroupSpec], common_page: int, per_token: int
) -> int:
    """vLLM 0.33+: the hidden-state layer's block size."""
    group_block = math.gcd(*(g.kv_cache_spec.block_size for g in groups))
    return _largest_divisor_at_most(group_block, max(common_page // per_token, 1))
