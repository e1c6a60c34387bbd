"""Planning properties (DESIGN.md section 9) over random layouts of every spec kind."""

from __future__ import annotations

import copy
import json

from hypothesis import assume, given
from hypothesis import strategies as st

from kvpure.errors import InsufficientKVCacheMemoryError
from kvpure.interop.planning import parse_kv_cache_spec, render_kv_cache_spec
from kvpure.planning.planner import KVCachePlan, get_kv_cache_configs
from kvpure.planning.tensors import pool_bytes_per_block
from kvpure.settings import PlannerSettings
from kvpure.specs import KVCacheSpec
from kvpure.specs.kv_cache_config import KVCacheConfig
from kvpure.specs.layer_map import LayerMap
from tests.strategies_specs import layouts, planner_settings, specs, worker_splits


@st.composite
def planning_inputs(
    draw: st.DrawFn,
) -> tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]]:
    settings = draw(planner_settings())
    layout = draw(layouts())
    workers = draw(worker_splits(layout))
    memory = []
    for worker in workers:
        need = sum(s.max_memory_usage_bytes(settings) for s in worker.ordered_values())
        factor = draw(st.integers(2, 50))
        memory.append(need * factor + draw(st.integers(0, 2**20)))
    return settings, workers, tuple(memory)


def _plan(
    settings: PlannerSettings, workers: tuple[LayerMap[KVCacheSpec], ...], memory: tuple[int, ...]
) -> KVCachePlan:
    try:
        return get_kv_cache_configs(settings, workers, memory)
    except InsufficientKVCacheMemoryError:
        assume(False)
        raise


def _bytes_allocated(config: KVCacheConfig) -> int:
    # Packed tensors alias one backing buffer of their (common) size.
    plain = sum(t.size for t in config.kv_cache_tensors if t.block_stride == 0)
    packed = [t.size for t in config.kv_cache_tensors if t.block_stride > 0]
    return plain + (max(packed) if packed else 0)


@given(planning_inputs())
def test_memory_used_never_exceeds_available(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]],
) -> None:
    settings, workers, memory = case
    plan = _plan(settings, workers, memory)
    for config, mem in zip(plan.kv_cache_configs, memory, strict=True):
        assert _bytes_allocated(config) <= mem


@given(planning_inputs())
def test_one_more_block_would_not_fit(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]],
) -> None:
    settings, workers, memory = case
    plan = _plan(settings, workers, memory)
    num_blocks = plan.num_blocks
    assert any(
        (num_blocks + 1) * pool_bytes_per_block(settings, config.kv_cache_groups) > mem
        for config, mem in zip(plan.kv_cache_configs, memory, strict=True)
    )


@given(planning_inputs())
def test_every_layer_in_exactly_one_group_and_one_tensor(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]],
) -> None:
    settings, workers, memory = case
    plan = _plan(settings, workers, memory)
    for config, worker in zip(plan.kv_cache_configs, workers, strict=True):
        in_groups = [n for g in config.kv_cache_groups for n in g.layer_names]
        in_tensors = [n for t in config.kv_cache_tensors for n in t.shared_by]
        assert sorted(in_groups) == sorted(worker.names)
        assert sorted(in_tensors) == sorted(worker.names)


@given(planning_inputs())
def test_tensor_sizes_divide_by_num_blocks(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]],
) -> None:
    settings, workers, memory = case
    plan = _plan(settings, workers, memory)
    assert plan.num_blocks > 0
    for config in plan.kv_cache_configs:
        assert config.num_blocks == plan.num_blocks
        for tensor in config.kv_cache_tensors:
            assert tensor.size % plan.num_blocks == 0


@given(planning_inputs(), st.integers(1, 2**34))
def test_more_memory_never_gives_fewer_blocks(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]], extra: int
) -> None:
    settings, workers, memory = case
    plan = _plan(settings, workers, memory)
    more = get_kv_cache_configs(settings, workers, tuple(m + extra for m in memory))
    assert more.num_blocks >= plan.num_blocks


@given(planning_inputs())
def test_inputs_are_never_mutated(
    case: tuple[PlannerSettings, tuple[LayerMap[KVCacheSpec], ...], tuple[int, ...]],
) -> None:
    settings, workers, memory = case
    before = copy.deepcopy((settings, workers, memory))
    rendered = [
        json.dumps([render_kv_cache_spec(s, vllm_version="0.26") for s in w.ordered_values()])
        for w in workers
    ]
    _plan(settings, workers, memory)
    assert (settings, workers, memory) == before
    assert rendered == [
        json.dumps([render_kv_cache_spec(s, vllm_version="0.26") for s in w.ordered_values()])
        for w in workers
    ]


@given(specs())
def test_spec_json_round_trip(spec: KVCacheSpec) -> None:
    again = parse_kv_cache_spec(
        render_kv_cache_spec(spec, vllm_version="0.26"), vllm_version="0.26"
    )
    assert again == spec
    assert hash(again) == hash(spec)
    assert spec.page_size_bytes > 0


@given(specs())
def test_padding_never_shrinks_a_page(spec: KVCacheSpec) -> None:
    real = getattr(spec, "real_page_size_bytes", None)
    if real is not None:
        assert spec.page_size_bytes >= real
