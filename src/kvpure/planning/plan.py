"""What the planner returns: :class:`KVCachePlan` and the facts vLLM logs beside it.

:class:`KVCachePlan` holds every worker's :class:`KVCacheConfig`, the final
max_model_len and the facts of the planning (grouping padding, overrides, the
auto-fit). The per-worker numbers vLLM only logs (:class:`WorkerPlanFacts`:
capacity, concurrency, memory per request) are worked out on first use of
:attr:`KVCachePlan.workers`, so that planning itself does not spend time on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvpure.errors import PlanningAssertionError
from kvpure.planning.engine_facts import SchedulerFacts
from kvpure.planning.grouping import PaddingFact
from kvpure.planning.memory import (
    get_kv_cache_capacity,
    max_memory_usage_bytes_from_groups,
)
from kvpure.planning.tensors import pool_bytes_per_block
from kvpure.settings import PlannerSettings
from kvpure.specs import UniformTypeKVCacheSpecs
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class NumBlocksOverrideFact:
    """vLLM's "Overriding num_gpu_blocks=N with num_gpu_blocks_override=M" for one worker."""

    worker: int
    num_blocks_from_memory: int
    num_gpu_blocks_override: int
    bytes_per_block: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoFitFact:
    """What auto-fitting max_model_len decided (vLLM logs it)."""

    original_max_model_len: int
    fitted_max_model_len: int
    limiting_available_bytes: int | None
    attention_free: bool = False

    @property
    def reduced(self) -> bool:
        """Whether the model's full context did not fit and max_model_len was lowered."""
        return self.fitted_max_model_len < self.original_max_model_len


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerPlanFacts:
    """Per-worker numbers vLLM logs or derives from the final config.

    ``kv_cache_capacity_tokens`` and ``max_concurrency`` are None for a
    worker without KV cache groups.
    """

    num_blocks_before_equalisation: int
    kv_cache_capacity_tokens: int | None
    max_concurrency: float | None
    group_max_memory_usage_bytes: tuple[int, ...]
    max_memory_usage_bytes_from_groups: int
    scheduler_block_size: int
    hash_block_size: int
    pool_bytes_per_block: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCachePlan:
    """The result of :func:`get_kv_cache_configs`: one config per worker, plus facts."""

    kv_cache_configs: tuple[KVCacheConfig, ...]
    final_max_model_len: int
    settings: PlannerSettings
    kv_cache_groups: tuple[KVCacheGroupSpec, ...]
    padding: tuple[PaddingFact, ...]
    hybrid_specs_converted: bool
    num_blocks_overrides: tuple[NumBlocksOverrideFact, ...]
    auto_fit: AutoFitFact | None
    num_blocks_before_equalisation: tuple[int, ...]
    """Each worker's block count before every worker got the smallest."""
    block_sizes: tuple[tuple[int, int], ...]
    """Each worker's ``(scheduler_block_size, hash_block_size)`` (resolved while planning,
    as vLLM's engine does right after, so that a refusal is raised by the planner)."""
    scheduler: SchedulerFacts | None = None
    """Filled under vLLM 0.33+ rules (``block_sizes_from_prefix_cacheable_groups``)."""
    _workers: tuple[WorkerPlanFacts, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def workers(self) -> tuple[WorkerPlanFacts, ...]:
        """Per-worker numbers vLLM logs (capacity, concurrency, memory per request).

        Worked out on first use, from the plan's own fields: ``get_kv_cache_configs``
        does not spend time on what vLLM only logs.
        """
        found = self._workers
        if found is None:
            found = tuple(
                _worker_facts(self.settings, config, before, sizes)
                for config, before, sizes in zip(
                    self.kv_cache_configs,
                    self.num_blocks_before_equalisation,
                    self.block_sizes,
                    strict=True,
                )
            )
            object.__setattr__(self, "_workers", found)
        return found

    @property
    def needs_kv_cache_zeroing(self) -> bool:
        """vLLM 0.33+: every worker zeroes new blocks if any worker holds Mamba state."""
        return any(c.needs_kv_cache_zeroing for c in self.kv_cache_configs)

    @property
    def num_blocks(self) -> int:
        """The block count every worker shares."""
        return self.kv_cache_configs[0].num_blocks

    @property
    def scheduler_kv_cache_config(self) -> KVCacheConfig:
        """The scheduler's config (vLLM's ``generate_scheduler_kv_cache_config``)."""
        return generate_scheduler_kv_cache_config(self.kv_cache_configs)


def generate_scheduler_kv_cache_config(configs: Sequence[KVCacheConfig]) -> KVCacheConfig:
    """Worker 0's config with each uniform-type group spec replaced by its first layer's spec."""
    if any(c.num_blocks != configs[0].num_blocks for c in configs):
        raise PlanningAssertionError(
            check="scheduler_num_blocks", detail="all workers must have the same num_blocks"
        )
    first = configs[0]
    groups = tuple(
        dataclasses.replace(g, kv_cache_spec=g.kv_cache_spec.kv_cache_specs.ordered_values()[0])
        if isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs)
        else g
        for g in first.kv_cache_groups
    )
    return dataclasses.replace(first, kv_cache_groups=groups)


def _worker_facts(
    settings: PlannerSettings,
    config: KVCacheConfig,
    num_blocks_before: int,
    block_sizes: tuple[int, int],
) -> WorkerPlanFacts:
    scheduler_bs, hash_bs = block_sizes
    groups = config.kv_cache_groups
    capacity: int | None = None
    concurrency: float | None = None
    if groups:
        capacity, concurrency = get_kv_cache_capacity(settings, config)
    return WorkerPlanFacts(
        pool_bytes_per_block=pool_bytes_per_block(settings, groups) if groups else 0,
        num_blocks_before_equalisation=num_blocks_before,
        kv_cache_capacity_tokens=capacity,
        max_concurrency=concurrency,
        group_max_memory_usage_bytes=tuple(
            g.kv_cache_spec.max_memory_usage_bytes(settings) for g in groups
        ),
        max_memory_usage_bytes_from_groups=max_memory_usage_bytes_from_groups(settings, groups),
        scheduler_block_size=scheduler_bs,
        hash_block_size=hash_bs,
    )


__all__ = [
    "AutoFitFact",
    "KVCachePlan",
    "NumBlocksOverrideFact",
    "WorkerPlanFacts",
    "generate_scheduler_kv_cache_config",
]
