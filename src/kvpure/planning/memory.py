"""How much memory a request needs, how long a request can be, and how many fit.

Pure versions of vLLM's ``max_memory_usage_bytes``, ``estimate_max_model_len``
(a binary search over new settings values, not over an edited config),
``_max_memory_usage_bytes_from_groups``, the admission check, concurrency,
capacity and ``resolve_kv_cache_block_sizes`` (0.26.0: scaled by DCP only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from kvpure.errors import (
    InsufficientKVCacheMemoryError,
    NoKVCacheMemoryError,
    PlanningAssertionError,
    PrefixMatchUnitError,
)
from kvpure.planning.grouping import get_uniform_page_size
from kvpure.settings import PlannerSettings
from kvpure.specs import AttentionSpec, KVCacheSpec, MambaSpec, UniformTypeKVCacheSpecs, cdiv
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap


def max_memory_usage_bytes(settings: PlannerSettings, specs: Iterable[KVCacheSpec]) -> int:
    """The sum of every spec's most memory for one request."""
    return sum(spec.max_memory_usage_bytes(settings) for spec in specs)


def _binary_search_max_model_len(
    settings: PlannerSettings, needed_bytes: Callable[[PlannerSettings], int], available_bytes: int
) -> int:
    """The longest max_model_len in [1, settings.max_model_len] that fits, or 0."""

    def fits(model_len: int) -> bool:
        return needed_bytes(settings.with_max_model_len(model_len)) <= available_bytes

    left, right = 1, settings.max_model_len
    if not fits(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result = mid
            left = mid + 1
        else:
            right = mid - 1
    return result


def estimate_max_model_len(
    settings: PlannerSettings, kv_cache_spec: LayerMap[KVCacheSpec], available_memory: int
) -> int:
    """The longest max_model_len whose per-layer memory sum fits ``available_memory`` (0: none)."""
    specs = kv_cache_spec.ordered_values()
    return _binary_search_max_model_len(
        settings, lambda s: max_memory_usage_bytes(s, specs), available_memory
    )


def max_memory_usage_bytes_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]
) -> int:
    """Memory one max-length request needs across groups, counting padding layers."""
    if not groups:
        return 0
    first = groups[0].kv_cache_spec
    if len(groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        return max_memory_usage_bytes(settings, first.kv_cache_specs.ordered_values())
    uniform_specs = [g.kv_cache_spec for g in groups]
    if all(isinstance(s, UniformTypeKVCacheSpecs) for s in uniform_specs):
        typed = [s for s in uniform_specs if isinstance(s, UniformTypeKVCacheSpecs)]
        layer_tuple_bytes = sum(typed[0].get_page_sizes())
        num_layer_tuples = max(s.get_num_layer_tuples() for s in typed)
        return sum(
            num_layer_tuples * s.max_memory_usage_pages(settings) * layer_tuple_bytes for s in typed
        )
    group_size = max(len(g.layer_names) for g in groups)
    page_size = get_uniform_page_size(uniform_specs)
    blocks_needed = sum(cdiv(s.max_memory_usage_bytes(settings), page_size) for s in uniform_specs)
    return group_size * page_size * blocks_needed


def estimate_max_model_len_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec], available_memory: int
) -> int:
    """The longest max_model_len whose group memory fits ``available_memory`` (0: none)."""
    return _binary_search_max_model_len(
        settings, lambda s: max_memory_usage_bytes_from_groups(s, groups), available_memory
    )


def check_enough_memory(
    available_memory: int,
    needed_memory: Callable[[], int],
    max_model_len: int,
    estimate: Callable[[int], int],
) -> None:
    """vLLM's admission check: one request of ``max_model_len`` tokens must fit."""
    if available_memory <= 0:
        raise NoKVCacheMemoryError(available_bytes=available_memory)
    needed = needed_memory()
    if needed > available_memory:
        raise InsufficientKVCacheMemoryError(
            max_model_len=max_model_len,
            needed_bytes=needed,
            available_bytes=available_memory,
            estimated_max_model_len=estimate(available_memory),
        )


def check_enough_kv_cache_memory(
    settings: PlannerSettings, kv_cache_spec: LayerMap[KVCacheSpec], available_memory: int
) -> None:
    """The admission check over per-layer specs (no check when there are no layers)."""
    if not kv_cache_spec:
        return
    specs = kv_cache_spec.ordered_values()
    check_enough_memory(
        available_memory,
        lambda: max_memory_usage_bytes(settings, specs),
        settings.max_model_len,
        lambda mem: estimate_max_model_len(settings, kv_cache_spec, mem),
    )


def get_max_concurrency_for_kv_cache_config(
    settings: PlannerSettings, kv_cache_config: KVCacheConfig
) -> float:
    """How many max-length requests the blocks can hold at once."""
    groups = kv_cache_config.kv_cache_groups
    layers_per_group = max(len(g.layer_names) for g in groups)
    per_request = layers_per_group * max_memory_usage_bytes(
        settings, (g.kv_cache_spec for g in groups)
    )
    per_block = groups[0].kv_cache_spec.page_size_bytes * layers_per_group
    if per_block == 0:
        raise PlanningAssertionError(
            check="concurrency", detail="the worker's groups hold no layers (zero bytes per block)"
        )
    return kv_cache_config.num_blocks / cdiv(per_request, per_block)


def get_kv_cache_capacity(
    settings: PlannerSettings, kv_cache_config: KVCacheConfig
) -> tuple[int, float]:
    """``(tokens the pool holds at peak, max concurrency)`` as vLLM logs them."""
    concurrency = get_max_concurrency_for_kv_cache_config(settings, kv_cache_config)
    return int(concurrency * settings.max_model_len), concurrency


def resolve_kv_cache_block_sizes(
    kv_cache_config: KVCacheConfig, settings: PlannerSettings
) -> tuple[int, int]:
    """``(scheduler_block_size, hash_block_size)`` as vLLM 0.26.0 resolves them.

    Attention groups are scaled by the decode context parallel size only.
    """
    dcp = settings.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    if len(groups) <= 1:
        size = settings.block_size * dcp
        return size, size
    sizes = tuple(
        g.kv_cache_spec.block_size * dcp
        if isinstance(g.kv_cache_spec, AttentionSpec)
        else g.kv_cache_spec.block_size
        for g in groups
    )
    scheduler = math.lcm(*sizes)
    if not (settings.enable_prefix_caching or settings.has_kv_connector):
        return scheduler, scheduler
    if any(
        isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.block_size != settings.block_size
        for g in groups
    ):
        return scheduler, scheduler
    requested = settings.prefix_match_unit
    hash_size = requested if requested is not None else math.gcd(*sizes)
    if any(size % hash_size != 0 for size in sizes):
        raise PrefixMatchUnitError(prefix_match_unit=hash_size, group_block_sizes=sizes)
    return scheduler, hash_size
