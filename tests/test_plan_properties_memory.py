"""Planning properties where memory is short: not enough memory, auto-fit, the block override.

Every expected number comes from a brute-force search over the planner's own
success and failure, one setting at a time (the planner is checked against vLLM
field by field by the goldens and the oracle):

- not enough memory: the error's ``needed_bytes`` is the least memory that plans
  (``needed - 1`` fails), ``available_bytes`` the memory given, and
  ``estimated_max_model_len`` the longest max_model_len that plans in that memory
  (scanning every length below), 0 when none does;
- auto-fit: the fitted length is the longest length up to the configured one that
  plans in the memory given (every length scanned), and it fails with AutoFitError
  exactly when length 1 does not plan;
- ``num_gpu_blocks_override``: the plan has exactly the override's blocks, and the
  admission check runs against ``override x bytes per block`` (not the memory given).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpure.errors import AutoFitError, InsufficientKVCacheMemoryError
from kvpure.planning.planner import KVCachePlan, get_kv_cache_configs
from kvpure.planning.tensors import pool_bytes_per_block
from kvpure.settings import AUTO_FIT_MAX_MODEL_LEN, PlannerSettings
from kvpure.specs import KVCacheSpec
from kvpure.specs.layer_map import LayerMap
from tests.strategies_specs import layouts

Workers = tuple[LayerMap[KVCacheSpec], ...]


@st.composite
def short_settings(draw: st.DrawFn) -> PlannerSettings:
    """Settings with a small max_model_len, so every length can be tried."""
    return PlannerSettings(
        block_size=16,
        max_model_len=draw(st.sampled_from([16, 40, 64])),
        max_num_batched_tokens=draw(st.sampled_from([32, 256])),
        max_num_encoder_input_tokens=draw(st.sampled_from([64, 1500])),
        async_scheduling=draw(st.booleans()),
        enable_prefix_caching=draw(st.booleans()),
        vllm_version="0.26",
    )


def _plans(settings_: PlannerSettings, workers: Workers, memory: int) -> KVCachePlan | None:
    try:
        return get_kv_cache_configs(settings_, workers, (memory,))
    except InsufficientKVCacheMemoryError:
        return None


def _longest_that_plans(settings_: PlannerSettings, workers: Workers, memory: int, top: int) -> int:
    """Brute force: the longest max_model_len in [1, top] that plans in ``memory``, or 0."""
    for length in range(top, 0, -1):
        if _plans(settings_.with_max_model_len(length), workers, memory) is not None:
            return length
    return 0


def _least_memory_that_plans(settings_: PlannerSettings, workers: Workers) -> int:
    """Brute force over memory (doubling, then halving the gap) for one layout."""
    high = 1
    while _plans(settings_, workers, high) is None:
        high *= 2
    low = high // 2  # does not plan (or is 0)
    while high - low > 1:
        mid = (low + high) // 2
        if _plans(settings_, workers, mid) is None:
            low = mid
        else:
            high = mid
    return high


@settings(max_examples=12)
@given(short_settings(), layouts(), st.data())
def test_not_enough_memory_reports_vllms_numbers(
    settings_: PlannerSettings, layout: LayerMap[KVCacheSpec], data: st.DataObject
) -> None:
    workers = (layout,)
    least = _least_memory_that_plans(settings_, workers)
    memory = data.draw(st.integers(1, least - 1), label="memory") if least > 1 else None
    if memory is None:
        return
    with pytest.raises(InsufficientKVCacheMemoryError) as caught:
        get_kv_cache_configs(settings_, workers, (memory,))
    error = caught.value
    assert error.needed_bytes == least
    assert error.available_bytes == memory
    assert error.max_model_len == settings_.max_model_len
    top = settings_.max_model_len - 1
    assert error.estimated_max_model_len == _longest_that_plans(settings_, workers, memory, top)
    if error.estimated_max_model_len:
        assert f"maximum model length is {error.estimated_max_model_len}. " in str(error)
    assert f"the model's max seq len ({settings_.max_model_len})," in str(error)


@settings(max_examples=12)
@given(short_settings(), layouts(), st.data())
def test_auto_fit_gives_the_longest_length_that_plans(
    settings_: PlannerSettings, layout: LayerMap[KVCacheSpec], data: st.DataObject
) -> None:
    workers = (layout,)
    least = _least_memory_that_plans(settings_, workers)
    memory = data.draw(st.integers(1, 2 * least), label="memory")
    auto = PlannerSettings(
        **{
            **{
                f: getattr(settings_, f)
                for f, spec in settings_.__dataclass_fields__.items()
                if spec.init
            },
            "original_max_model_len": AUTO_FIT_MAX_MODEL_LEN,
        },
    )
    expected = _longest_that_plans(settings_, workers, memory, settings_.max_model_len)
    try:
        plan = get_kv_cache_configs(auto, workers, (memory,))
    except AutoFitError:
        assert expected == 0
        return
    assert plan.final_max_model_len == expected
    assert plan.auto_fit is not None
    assert plan.auto_fit.fitted_max_model_len == expected
    assert plan.auto_fit.original_max_model_len == settings_.max_model_len


@settings(max_examples=12)
@given(short_settings(), layouts(), st.integers(1, 4096), st.integers(0, 4))
def test_override_sets_the_blocks_and_the_memory_admitted(
    settings_: PlannerSettings, layout: LayerMap[KVCacheSpec], override: int, shift: int
) -> None:
    workers = (layout,)
    least = _least_memory_that_plans(settings_, workers)
    plain = get_kv_cache_configs(settings_, workers, (least,))
    per_block = pool_bytes_per_block(settings_, plain.kv_cache_configs[0].kv_cache_groups)
    overridden = PlannerSettings(
        **{
            **{
                f: getattr(settings_, f)
                for f, spec in settings_.__dataclass_fields__.items()
                if spec.init
            },
            "num_gpu_blocks_override": override,
        },
    )
    memory = least << shift  # the memory given plays no part once overridden
    if override * per_block < least:
        with pytest.raises(InsufficientKVCacheMemoryError) as caught:
            get_kv_cache_configs(overridden, workers, (memory,))
        assert caught.value.available_bytes == override * per_block
        assert caught.value.needed_bytes == least
        return
    plan = get_kv_cache_configs(overridden, workers, (memory,))
    assert plan.num_blocks == override
    assert plan.num_blocks_overrides[0].num_blocks_from_memory == memory // per_block
    assert plan.num_blocks_overrides[0].bytes_per_block == per_block
