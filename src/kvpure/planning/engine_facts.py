"""What vLLM 0.33+ adds around the planner, as pure functions over kvpure values.

``get_global_kv_cache_groups`` (``vllm/v1/core/kv_cache_planning.py``) retains extra
sliding-window tokens and marks draft groups; ``get_kv_cache_configs`` holds the null
block back and counts TP replicas; ``EngineCore._initialize_kv_caches``
(``vllm/v1/engine/core.py``) then resolves ``cache_config.block_size``, the block
sizes, the cache-hit alignment and the capacity on the scheduler's config.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvpure.planning.grouping import KVCacheGrouping
from kvpure.planning.memory import (
    get_kv_cache_capacity,
    layer_specs,
    resolve_cache_hit_alignment_tokens,
    resolve_kv_cache_block_sizes,
)
from kvpure.planning.tensors import pool_bytes_per_block
from kvpure.settings import PlannerSettings
from kvpure.specs import AttentionSpec, KVCacheSpec, SlidingWindowSpec
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerFacts:
    """What vLLM 0.33+'s ``EngineCore._initialize_kv_caches`` resolves after planning.

    ``cache_config_block_size``: the smallest prefix-cacheable group block size (0.26:
    the configured block size); then ``resolve_kv_cache_block_sizes``,
    ``resolve_cache_hit_alignment_tokens`` and ``update_kv_cache_capacity`` (None
    without groups) on the scheduler's config.
    """

    cache_config_block_size: int
    scheduler_block_size: int
    hash_block_size: int
    cache_hit_alignment_tokens: int
    kv_cache_size_tokens: int | None
    kv_cache_max_concurrency: float | None


def retain_extra_tokens(
    settings: PlannerSettings, merged: LayerMap[KVCacheSpec]
) -> LayerMap[KVCacheSpec]:
    """vLLM 0.33+'s ``get_global_kv_cache_groups``: every sliding-window layer keeps
    ``num_prefill_lookahead_tokens - 1`` more tokens below its window."""
    extra = max(0, settings.num_prefill_lookahead_tokens - 1)
    updates: dict[str, KVCacheSpec] = {
        name: dataclasses.replace(spec, extra_retained_tokens=extra)
        for name, spec in merged.ordered_items()
        if isinstance(spec, SlidingWindowSpec) and spec.extra_retained_tokens != extra
    }
    return merged.replace_values(updates) if updates else merged


def mark_draft_groups(merged: LayerMap[KVCacheSpec], grouping: KVCacheGrouping) -> KVCacheGrouping:
    """vLLM 0.33+: with the EAGLE block drop, a group is an EAGLE group when it holds a
    layer a draft model owns (``is_draft``)."""
    drafts = {name for name, spec in merged.ordered_items() if spec.is_draft}
    groups = tuple(
        dataclasses.replace(g, is_eagle_group=not drafts.isdisjoint(g.layer_names))
        for g in grouping.groups
    )
    return dataclasses.replace(grouping, groups=groups)


def _layer_tp_replicas(spec: KVCacheSpec, tp: int, dcp: int) -> int:
    if not isinstance(spec, AttentionSpec) or spec.max_tp_shards is None:
        return 1
    if spec.dcp_sharded and dcp > 1:
        return 1
    return max(1, tp // spec.max_tp_shards)


def with_tp_replicas(settings: PlannerSettings, config: KVCacheConfig) -> KVCacheConfig:
    """vLLM 0.33+'s ``kv_cache_groups_tp_replicas``: consecutive TP ranks holding the same KV."""
    specs = [s for g in config.kv_cache_groups for s in layer_specs(g.kv_cache_spec)]
    tp = settings.tensor_parallel_size
    dcp = settings.decode_context_parallel_size
    replicas = 1
    if specs:
        replicas = math.gcd(tp, *(_layer_tp_replicas(s, tp, dcp) for s in specs))
    return dataclasses.replace(config, kv_tp_replicas=replicas)


def scheduler_facts(settings: PlannerSettings, scheduler: KVCacheConfig) -> SchedulerFacts:
    """What ``EngineCore`` resolves from the scheduler's config (vLLM 0.33+)."""
    groups = scheduler.kv_cache_groups
    block_size = settings.block_size
    if groups:
        cacheable = [g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
        block_size = min(cacheable or [g.kv_cache_spec.block_size for g in groups])
    resolved = dataclasses.replace(settings, block_size=block_size)
    scheduler_bs, hash_bs = resolve_kv_cache_block_sizes(scheduler, resolved)
    alignment = resolve_cache_hit_alignment_tokens(scheduler, resolved, scheduler_bs, hash_bs)
    size: int | None = None
    concurrency: float | None = None
    if groups:
        size, concurrency = get_kv_cache_capacity(resolved, scheduler)
    return SchedulerFacts(
        cache_config_block_size=block_size,
        scheduler_block_size=scheduler_bs,
        hash_block_size=hash_bs,
        cache_hit_alignment_tokens=alignment,
        kv_cache_size_tokens=size,
        kv_cache_max_concurrency=concurrency,
    )


def held_back_null_block(
    settings: PlannerSettings,
    projected: Sequence[tuple[KVCacheGroupSpec, ...]],
    available: Sequence[int],
) -> list[int]:
    """The memory auto-fit and the admission check plan with, per worker.

    Rule ``null_block_held_back``: vLLM 0.33+ (``kv_cache_planning.get_kv_cache_configs``)
    subtracts one pool block (``_pool_bytes_per_block_from_builder``), the null block the
    BlockPool never hands out; 0.26 (``kv_cache_utils.get_kv_cache_configs``) checked all
    of it. Allocation still uses all the memory.
    """
    if not settings.rules.null_block_held_back:
        return list(available)
    return [
        mem - pool_bytes_per_block(settings, groups) if groups else mem
        for groups, mem in zip(projected, available, strict=True)
    ]
