"""vLLM 0.26.0's ``get_kv_cache_configs`` as a pure function over frozen values.

:func:`get_kv_cache_configs` merges the workers' layer specs, groups them,
projects the groups onto each worker, applies ``num_gpu_blocks_override``,
auto-fits ``max_model_len`` when asked, checks that one request fits, builds
each worker's :class:`KVCacheConfig` and gives every worker the smallest
block count. It returns a :class:`KVCachePlan`: the configs, the final
max_model_len, and the facts vLLM only logs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kvpure.errors import (
    AutoFitError,
    InvalidFieldError,
    PlanningAssertionError,
    UnregisteredSpecError,
    WorkerSpecMismatchError,
)
from kvpure.planning.engine_facts import (
    SchedulerFacts,
    held_back_null_block,
    mark_draft_groups,
    retain_extra_tokens,
    scheduler_facts,
    with_tp_replicas,
)
from kvpure.planning.grouping import KVCacheGrouping, get_kv_cache_groups
from kvpure.planning.inputs import check_plan_inputs
from kvpure.planning.memory import (
    check_enough_memory,
    estimate_max_model_len_from_groups,
    max_memory_usage_bytes_from_groups,
    resolve_kv_cache_block_sizes,
)
from kvpure.planning.plan import (
    AutoFitFact,
    KVCachePlan,
    NumBlocksOverrideFact,
    WorkerPlanFacts,
    generate_scheduler_kv_cache_config,
)
from kvpure.planning.tensors import get_kv_cache_config_from_groups, pool_bytes_per_block
from kvpure.planning.values import (
    new_kv_cache_config,
    new_kv_cache_group,
    new_kv_cache_tensor,
    new_uniform_type_specs,
)
from kvpure.settings import PlannerSettings
from kvpure.specs import (
    KVCacheSpec,
    UniformTypeKVCacheSpecs,
    get_uniform_type_base_spec,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap
from kvpure.specs.uniform import uniform_type_base_of_class


def merge_worker_specs(specs_per_worker: Sequence[LayerMap[KVCacheSpec]]) -> LayerMap[KVCacheSpec]:
    """All workers' layers in first-seen order; a layer must have one spec on every worker."""
    if len(specs_per_worker) == 1:
        return specs_per_worker[0]
    merged: dict[str, KVCacheSpec] = {}
    first_worker: dict[str, int] = {}
    for worker, specs in enumerate(specs_per_worker):
        for name, spec in specs.ordered_items():
            known = merged.get(name)
            if known is None:
                merged[name] = spec
                first_worker[name] = worker
            elif known != spec:
                raise WorkerSpecMismatchError(
                    layer_name=name, first_worker=first_worker[name], other_worker=worker
                )
    return LayerMap.from_pairs(merged.items())


def check_kv_cache_spec_registry(specs: LayerMap[KVCacheSpec]) -> None:
    """Every layer's spec type must be one the planner can manage."""
    classes = {type(s) for s in specs.ordered_values()}
    if all(uniform_type_base_of_class(cls) is not None for cls in classes):
        return
    for name, spec in specs.ordered_items():
        if get_uniform_type_base_spec(spec) is None:
            raise UnregisteredSpecError(layer_name=name, spec_type=type(spec).__name__)


def project_kv_cache_groups_to_worker(
    groups: Sequence[KVCacheGroupSpec], worker_specs: LayerMap[KVCacheSpec]
) -> tuple[KVCacheGroupSpec, ...]:
    """The global groups restricted to one worker's layers (empty groups are kept)."""
    projected: list[KVCacheGroupSpec] = []
    for group in groups:
        names = tuple(n for n in group.layer_names if n in worker_specs)
        spec = group.kv_cache_spec
        if names and isinstance(spec, UniformTypeKVCacheSpecs):
            spec = new_uniform_type_specs(
                block_size=spec.block_size, kv_cache_specs=spec.kv_cache_specs.subset(names)
            )
        projected.append(
            new_kv_cache_group(
                layer_names=names,
                kv_cache_spec=spec,
                is_eagle_group=group.is_eagle_group and bool(names),
            )
        )
    return tuple(projected)


def _auto_fit(
    settings: PlannerSettings,
    projected: Sequence[tuple[KVCacheGroupSpec, ...]],
    available: Sequence[int],
) -> AutoFitFact:
    original = settings.max_model_len
    if all(not groups for groups in projected):
        return AutoFitFact(
            original_max_model_len=original,
            fitted_max_model_len=original,
            limiting_available_bytes=None,
            attention_free=True,
        )
    fitted = original
    limiting = available[0]
    for worker, groups in enumerate(projected):
        if not groups:
            continue
        mem = available[worker]
        worker_max = estimate_max_model_len_from_groups(settings, groups, mem)
        if worker_max < fitted:
            fitted = worker_max
            limiting = mem
    if fitted <= 0:
        raise AutoFitError(available_bytes=tuple(available), hint=settings.rules.more_memory_hint)
    return AutoFitFact(
        original_max_model_len=original,
        fitted_max_model_len=min(fitted, original),
        limiting_available_bytes=limiting,
    )


def equalise_num_blocks(
    settings: PlannerSettings, config: KVCacheConfig, num_blocks: int
) -> KVCacheConfig:
    """Give a worker the smallest worker's block count.

    Rule ``single_backing_allocation``: vLLM 0.33+ places the worker again with exactly
    ``num_blocks`` (strides follow the allocation); 0.26 scaled each tensor's size.
    """
    if config.num_blocks == num_blocks:
        return config
    if settings.rules.single_backing_allocation and config.kv_cache_groups:
        per_block = pool_bytes_per_block(settings, config.kv_cache_groups)
        return get_kv_cache_config_from_groups(
            dataclasses.replace(settings, num_gpu_blocks_override=None),
            config.kv_cache_groups,
            num_blocks * per_block,
        )
    return _shrink(config, num_blocks)


def _shrink(config: KVCacheConfig, num_blocks: int) -> KVCacheConfig:
    """vLLM's equalisation: each tensor scaled from the worker's blocks to ``num_blocks``."""
    old = config.num_blocks
    if old == 0 or any(tensor.size % old for tensor in config.kv_cache_tensors):
        raise PlanningAssertionError(
            check="tensor_size_divides",
            detail=f"every tensor's size must divide into the worker's {old} blocks",
        )
    # Built from the worker's checked tensors: the unchecked constructors (as replace would).
    tensors = tuple(
        new_kv_cache_tensor(
            size=tensor.size // old * num_blocks,
            shared_by=tensor.shared_by,
            offset=tensor.offset,
            block_stride=tensor.block_stride,
            layer_stride=tensor.layer_stride,
            host_resident=tensor.host_resident,
        )
        for tensor in config.kv_cache_tensors
    )
    return new_kv_cache_config(
        num_blocks=num_blocks,
        kv_cache_tensors=tensors,
        kv_cache_groups=config.kv_cache_groups,
        kv_tp_replicas=config.kv_tp_replicas,
    )


def _check_worker_memory(
    settings: PlannerSettings, groups: tuple[KVCacheGroupSpec, ...], available_memory: int
) -> None:
    check_enough_memory(
        available_memory,
        lambda: max_memory_usage_bytes_from_groups(settings, groups),
        settings.max_model_len,
        lambda mem: estimate_max_model_len_from_groups(settings, groups, mem),
        hint=settings.rules.more_memory_hint,
    )


def get_kv_cache_configs(
    settings: PlannerSettings,
    specs_per_worker: Sequence[Mapping[str, KVCacheSpec]],
    available_memory_per_worker: Sequence[int],
) -> KVCachePlan:
    """Plan every worker's KV cache exactly as vLLM 0.26.0 would.

    ``specs_per_worker[w]`` maps worker ``w``'s layer names (in model order)
    to their specs; ``available_memory_per_worker[w]`` is its free memory in
    bytes (a LayerMap, or any mapping in layer order). Nothing is mutated:
    the fitted max_model_len is in the result.
    """
    check_plan_inputs(settings, specs_per_worker, available_memory_per_worker)
    if not specs_per_worker:
        raise InvalidFieldError(
            field="kv_cache_specs", value=[], reason="needs at least one worker"
        )
    if len(specs_per_worker) != len(available_memory_per_worker):
        raise InvalidFieldError(
            field="available_memory",
            value=list(available_memory_per_worker),
            reason=f"must give one figure per worker ({len(specs_per_worker)} workers have specs)",
        )
    workers = tuple(LayerMap.from_mapping(w) for w in specs_per_worker)
    merged = merge_worker_specs(workers)
    check_kv_cache_spec_registry(merged)
    if settings.rules.sets_extra_retained_tokens:
        merged = retain_extra_tokens(settings, merged)
    grouping: KVCacheGrouping = get_kv_cache_groups(settings, merged)
    if settings.rules.sets_extra_retained_tokens and settings.use_eagle_block_drop:
        grouping = mark_draft_groups(merged, grouping)
    if len(workers) == 1 and all(g.layer_names for g in grouping.groups):
        projected = [grouping.groups]  # one worker holds every grouped layer: as they are
    else:
        projected = [project_kv_cache_groups_to_worker(grouping.groups, w) for w in workers]
    available = list(available_memory_per_worker)
    overrides: list[NumBlocksOverrideFact] = []
    override = settings.num_gpu_blocks_override
    if override is not None:
        for worker, groups in enumerate(projected):
            if not groups:
                continue
            per_block = pool_bytes_per_block(settings, groups)
            if per_block == 0:  # vLLM divides by it here (ZeroDivisionError)
                raise PlanningAssertionError(
                    check="num_gpu_blocks_override",
                    detail=f"worker {worker}'s groups hold no layers (zero bytes per block)",
                )
            overrides.append(
                NumBlocksOverrideFact(
                    worker=worker,
                    num_blocks_from_memory=available[worker] // per_block,
                    num_gpu_blocks_override=override,
                    bytes_per_block=per_block,
                )
            )
            available[worker] = override * per_block
    check_memory = held_back_null_block(settings, projected, available)
    auto_fit: AutoFitFact | None = None
    if settings.auto_fit_max_model_len:
        auto_fit = _auto_fit(settings, projected, check_memory)
        settings = settings.with_max_model_len(auto_fit.fitted_max_model_len)
    for worker, groups in enumerate(projected):
        if groups:
            _check_worker_memory(settings, groups, check_memory[worker])
    configs: list[KVCacheConfig] = []
    for groups, worker_specs, mem in zip(projected, workers, available, strict=True):
        if sum(len(g.layer_names) for g in groups) != len(worker_specs):
            grouped = {n for g in groups for n in g.layer_names}
            missing = [n for n in worker_specs.names if n not in grouped]
            raise PlanningAssertionError(
                check="layers_assigned",
                detail="Some layers are not assigned to any group: "
                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}",
            )
        configs.append(get_kv_cache_config_from_groups(settings, groups, mem))
    min_blocks = min(c.num_blocks for c in configs)
    before = [c.num_blocks for c in configs]
    configs = [equalise_num_blocks(settings, c, min_blocks) for c in configs]
    block_sizes = tuple(resolve_kv_cache_block_sizes(c, settings) for c in configs)
    scheduler: SchedulerFacts | None = None
    if settings.rules.block_sizes_from_prefix_cacheable_groups:
        configs = [with_tp_replicas(settings, c) for c in configs]
        scheduler = scheduler_facts(settings, generate_scheduler_kv_cache_config(configs))
    return KVCachePlan(
        scheduler=scheduler,
        kv_cache_configs=tuple(configs),
        final_max_model_len=settings.max_model_len,
        settings=settings,
        kv_cache_groups=grouping.groups,
        padding=grouping.padding,
        hybrid_specs_converted=grouping.hybrid_specs_converted,
        num_blocks_overrides=tuple(overrides),
        auto_fit=auto_fit,
        num_blocks_before_equalisation=tuple(before),
        block_sizes=block_sizes,
    )


__all__ = [
    "AutoFitFact",
    "KVCachePlan",
    "NumBlocksOverrideFact",
    "WorkerPlanFacts",
    "check_kv_cache_spec_registry",
    "equalise_num_blocks",
    "generate_scheduler_kv_cache_config",
    "get_kv_cache_configs",
    "merge_worker_specs",
    "project_kv_cache_groups_to_worker",
]
