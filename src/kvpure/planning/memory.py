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
    SinglePrefixMatchUnitError,
)
from kvpure.planning.grouping import get_uniform_page_size
from kvpure.planning.inputs import (
    check_kv_cache_config,
    check_memory,
    check_settings,
    layer_specs_checked,
)
from kvpure.planning.tensors import single_pool_bytes_per_block
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
    """The longest max_model_len in [1, settings.max_model_len] that fits, or 0.

    As vLLM edits its config's ``max_model_len`` in place while it searches, the search
    sets it on one private copy of the settings (made here, never handed out: the
    memory functions only read it) instead of building a copy per probe.
    """
    probe = settings.with_max_model_len(1)

    def fits(model_len: int) -> bool:
        object.__setattr__(probe, "max_model_len", model_len)
        return needed_bytes(probe) <= available_bytes

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
    check_settings(settings)
    specs = layer_specs_checked("kv_cache_spec", kv_cache_spec).ordered_values()
    check_memory("available_memory", available_memory)
    return _binary_search_max_model_len(
        settings, lambda s: max_memory_usage_bytes(s, specs), available_memory
    )


def _group_pages(settings: PlannerSettings, spec: KVCacheSpec) -> int:
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.max_memory_usage_pages(settings)
    return cdiv(spec.max_memory_usage_bytes(settings), spec.page_size_bytes)


def max_memory_usage_bytes_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]
) -> int:
    """Memory one max-length request needs across groups, counting padding layers.

    Rule ``memory_from_pool_bytes_per_block``: vLLM 0.33+
    (``kv_cache_planning._max_memory_usage_bytes_from_groups``) multiplies the pool's
    bytes per block by the sum of the groups' pages; 0.26 (``kv_cache_utils``) had a
    formula per layout.
    """
    return groups_memory(settings, groups)(settings)


def groups_memory(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]
) -> Callable[[PlannerSettings], int]:
    """:func:`max_memory_usage_bytes_from_groups` as a function of the settings, with what
    does not depend on ``max_model_len`` (layout, page sizes, group size) worked out once:
    the max_model_len search calls it for every probe."""
    if not groups:
        return lambda _settings: 0
    if settings.rules.memory_from_pool_bytes_per_block:
        per_block = single_pool_bytes_per_block(groups)
        specs = tuple(g.kv_cache_spec for g in groups)
        return lambda s: per_block * sum(_group_pages(s, spec) for spec in specs)
    first = groups[0].kv_cache_spec
    if len(groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        layers = first.kv_cache_specs.ordered_values()
        return lambda s: max_memory_usage_bytes(s, layers)
    uniform_specs = [g.kv_cache_spec for g in groups]
    if all(isinstance(s, UniformTypeKVCacheSpecs) for s in uniform_specs):
        typed = [s for s in uniform_specs if isinstance(s, UniformTypeKVCacheSpecs)]
        layer_tuple_bytes = sum(typed[0].get_page_sizes())
        num_layer_tuples = max(s.get_num_layer_tuples() for s in typed)
        return lambda s: sum(
            num_layer_tuples * spec.max_memory_usage_pages(s) * layer_tuple_bytes for spec in typed
        )
    group_size = max(len(g.layer_names) for g in groups)
    page_size = get_uniform_page_size(uniform_specs)
    return lambda s: (
        group_size
        * page_size
        * sum(cdiv(spec.max_memory_usage_bytes(s), page_size) for spec in uniform_specs)
    )


def estimate_max_model_len_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec], available_memory: int
) -> int:
    """The longest max_model_len whose group memory fits ``available_memory`` (0: none)."""
    return _binary_search_max_model_len(settings, groups_memory(settings, groups), available_memory)


def check_enough_memory(
    available_memory: int,
    needed_memory: Callable[[], int],
    max_model_len: int,
    estimate: Callable[[int], int],
    *,
    hint: str | None = None,
) -> None:
    """vLLM's admission check: one request of ``max_model_len`` tokens must fit.

    ``hint`` is the release's ``more_memory_hint`` (None: the 0.26/0.33 wording).
    """
    if available_memory <= 0:
        raise NoKVCacheMemoryError(available_bytes=available_memory, hint=hint)
    needed = needed_memory()
    if needed > available_memory:
        raise InsufficientKVCacheMemoryError(
            max_model_len=max_model_len,
            needed_bytes=needed,
            available_bytes=available_memory,
            estimated_max_model_len=estimate(available_memory),
            hint=hint,
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
    """How many max-length requests the blocks can hold at once.

    Rule ``concurrency_sums_group_blocks``: vLLM 0.33+ (``kv_cache_utils.
    get_max_concurrency_for_kv_cache_config``) divides by the sum of each group's
    pages per request; 0.26 by the pages of all groups' memory at the largest group size.
    """
    check_settings(settings)
    check_kv_cache_config(kv_cache_config)
    groups = kv_cache_config.kv_cache_groups
    if settings.rules.concurrency_sums_group_blocks:
        per_request = sum(
            cdiv(g.kv_cache_spec.max_memory_usage_bytes(settings), g.kv_cache_spec.page_size_bytes)
            for g in groups
        )
        if per_request == 0:
            raise PlanningAssertionError(
                check="concurrency", detail="a request needs no blocks (division by zero)"
            )
        return kv_cache_config.num_blocks / per_request
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
    """``(scheduler_block_size, hash_block_size)`` as vLLM resolves them.

    ``settings.block_size`` is ``cache_config.block_size`` (0.33+: after EngineCore set
    it to the smallest prefix-cacheable group block size). Rules
    ``block_sizes_from_prefix_cacheable_groups`` and ``mamba_backoff_keyed_on_align``
    (``kv_cache_utils.resolve_kv_cache_block_sizes``): 0.33+ scales only ``dcp_sharded``
    specs by DCP, refuses a single group's stray ``prefix_match_unit``, takes the gcd
    over prefix-cacheable groups and backs off when a Mamba spec is not in "align"
    mode; 0.26 scaled every attention group and backed off when a Mamba group's block
    size differed from ``cache_config.block_size``.
    """
    rules = settings.rules
    dcp = settings.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    hashing_on = settings.enable_prefix_caching or settings.has_kv_connector
    if len(groups) <= 1:
        if rules.block_sizes_from_prefix_cacheable_groups:
            if groups and not groups[0].kv_cache_spec.dcp_sharded:
                dcp = 1
            size = settings.block_size * dcp
            unit = settings.prefix_match_unit
            if unit not in (None, size) and len(groups) == 1 and hashing_on:
                raise SinglePrefixMatchUnitError(prefix_match_unit=unit, block_size=size)
            return size, size
        size = settings.block_size * dcp
        return size, size
    if rules.block_sizes_from_prefix_cacheable_groups:
        sizes = tuple(
            g.kv_cache_spec.block_size * (dcp if g.kv_cache_spec.dcp_sharded else 1) for g in groups
        )
    else:
        sizes = tuple(
            g.kv_cache_spec.block_size * dcp
            if isinstance(g.kv_cache_spec, AttentionSpec)
            else g.kv_cache_spec.block_size
            for g in groups
        )
    scheduler = math.lcm(*sizes)
    if not hashing_on:
        return scheduler, scheduler
    if _mamba_backoff(settings, groups):
        return scheduler, scheduler
    hashing = sizes
    if rules.block_sizes_from_prefix_cacheable_groups:
        hashing = (
            tuple(
                size
                for g, size in zip(groups, sizes, strict=True)
                if g.kv_cache_spec.prefix_cacheable
            )
            or sizes
        )
    requested = settings.prefix_match_unit
    hash_size = requested if requested is not None else math.gcd(*hashing)
    if any(size % hash_size != 0 for size in hashing):
        if rules.block_sizes_from_prefix_cacheable_groups:
            raise PrefixMatchUnitError(
                prefix_match_unit=hash_size, group_block_sizes=sizes, prefix_cacheable=hashing
            )
        raise PrefixMatchUnitError(prefix_match_unit=hash_size, group_block_sizes=sizes)
    return scheduler, hash_size


def layer_specs(spec: KVCacheSpec) -> tuple[KVCacheSpec, ...]:
    """vLLM 0.33+'s ``iter_layer_specs``: a uniform-type group's layer specs, else the spec."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.kv_cache_specs.ordered_values()
    return (spec,)


def _mamba_backoff(settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]) -> bool:
    """Rule ``mamba_backoff_keyed_on_align``: when hashing falls back to the scheduler
    block size because of Mamba groups."""
    if settings.rules.mamba_backoff_keyed_on_align:
        return any(
            isinstance(s, MambaSpec) and s.mamba_cache_mode != "align"
            for g in groups
            for s in layer_specs(g.kv_cache_spec)
        )
    return any(
        isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.block_size != settings.block_size
        for g in groups
    )


def resolve_cache_hit_alignment_tokens(
    kv_cache_config: KVCacheConfig,
    settings: PlannerSettings,
    scheduler_block_size: int,
    hash_block_size: int,
) -> int:
    """vLLM 0.33+'s ``resolve_cache_hit_alignment_tokens`` (``kv_cache_utils.py``): where
    prefix-cache hits land: ``hash_block_size`` when aligned Mamba states allow sub-block
    hits (``partial_hash_hits_enabled``), else the scheduler block size."""
    groups = kv_cache_config.kv_cache_groups
    if not settings.enable_prefix_caching or len(groups) <= 1:
        return scheduler_block_size
    if _partial_hash_hits_enabled(groups, hash_block_size, settings):
        return hash_block_size
    return scheduler_block_size


def _partial_hash_hits_enabled(
    groups: Sequence[KVCacheGroupSpec], hash_block_size: int, settings: PlannerSettings
) -> bool:
    dcp = settings.decode_context_parallel_size
    aligned_mamba = any(
        isinstance(s, MambaSpec)
        and s.mamba_cache_mode == "align"
        and (
            (dcp == 1 and s.block_size > hash_block_size)
            or (dcp > 1 and s.block_size >= hash_block_size)
        )
        for g in groups
        for s in layer_specs(g.kv_cache_spec)
    )
    if not aligned_mamba:
        return False
    # Every other prefix-cacheable group must support fine-grained lookups: the Mamba
    # and full-attention managers do; a group of another kind at a coarser block does not.
    for g in groups:
        spec = g.kv_cache_spec
        block = spec.block_size * (dcp if spec.dcp_sharded else 1)
        if spec.prefix_cacheable and block != hash_block_size and not _fine_grained(spec):
            return False
    return True


def _fine_grained(spec: KVCacheSpec) -> bool:
    from kvpure.specs import FullAttentionSpec  # (cheap; avoids a long import list)

    first = layer_specs(spec)[0]
    return isinstance(first, MambaSpec | FullAttentionSpec)
