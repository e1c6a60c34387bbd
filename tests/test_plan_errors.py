"""Planning errors: typed, stdlib-compatible, carrying their inputs, pickling intact."""

from __future__ import annotations

import pickle

import pytest

from kvpure.errors import (
    AutoFitError,
    InsufficientKVCacheMemoryError,
    KVPureError,
    NoKVCacheMemoryError,
    PageSizeUnificationError,
    SpecMergeError,
    WorkerSpecMismatchError,
    format_gib,
)
from kvpure.planning.memory import check_enough_kv_cache_memory, estimate_max_model_len
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.settings import PlannerSettings
from kvpure.specs import FullAttentionSpec, KVCacheSpec, KVDtype
from kvpure.specs.layer_map import LayerMap

SPEC = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
LLAMA = LayerMap.from_pairs((f"layers.{i}", SPEC) for i in range(32))


def _model(n: int) -> LayerMap[KVCacheSpec]:
    return LayerMap.from_pairs((f"layers.{i}", SPEC) for i in range(n))


def test_format_gib_rounds_like_vllm() -> None:
    assert format_gib(16 * 2**30) == "16.0"
    assert format_gib(2**25) == "0.03"
    assert format_gib(0) == "0.0"


@pytest.mark.parametrize(
    "err",
    [
        InsufficientKVCacheMemoryError(
            max_model_len=10, needed_bytes=2, available_bytes=1, estimated_max_model_len=5
        ),
        NoKVCacheMemoryError(available_bytes=0),
        AutoFitError(available_bytes=(1, 2)),
        PageSizeUnificationError(layer_name="x", page_size_bytes=3, max_page_size_bytes=4),
        SpecMergeError(reason="r", spec_types=("FullAttentionSpec",)),
        WorkerSpecMismatchError(layer_name="x", first_worker=0, other_worker=1),
    ],
)
def test_errors_pickle_with_attributes(err: KVPureError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err)
    assert str(again) == str(err)
    assert again.__dict__ == err.__dict__


def test_admission_check_numbers() -> None:
    # 32 layers x 131072 tokens x 128 KiB per 16-token block = 16 GiB; 4 GiB holds 32768 tokens.
    settings = PlannerSettings(max_model_len=131072, vllm_version="0.26")
    with pytest.raises(InsufficientKVCacheMemoryError) as info:
        get_kv_cache_configs(settings, [LLAMA], [4 * 2**30])
    err = info.value
    assert (err.needed_bytes, err.available_bytes) == (16 * 2**30, 4 * 2**30)
    assert err.estimated_max_model_len == 32768
    assert err.max_model_len == 131072
    assert estimate_max_model_len(settings, LLAMA, 4 * 2**30) == 32768
    with pytest.raises(InsufficientKVCacheMemoryError):
        check_enough_kv_cache_memory(settings, LLAMA, 4 * 2**30)
    check_enough_kv_cache_memory(settings, LLAMA, 16 * 2**30)


def test_no_memory_and_auto_fit_failure() -> None:
    with pytest.raises(NoKVCacheMemoryError):
        get_kv_cache_configs(PlannerSettings(vllm_version="0.26"), [LLAMA], [0])
    auto = PlannerSettings(max_model_len=1024, original_max_model_len=-1, vllm_version="0.26")
    with pytest.raises(AutoFitError):
        get_kv_cache_configs(auto, [LLAMA], [1000])


def test_auto_fit_is_returned_not_written() -> None:
    # 8 layers x 64 KiB per 16 tokens: 2**25 bytes hold 512 blocks / 8 = 64 blocks = 1024 tokens.
    settings = PlannerSettings(max_model_len=131072, original_max_model_len=-1, vllm_version="0.26")
    plan = get_kv_cache_configs(settings, [_model(8)], [2**25])
    assert plan.final_max_model_len == 1024
    assert plan.auto_fit is not None
    assert plan.auto_fit.reduced
    assert settings.max_model_len == 131072
    assert plan.settings.max_model_len == 1024


def test_min_blocks_across_workers_shrinks_tensors() -> None:
    # Pipeline halves with 1 GiB and 2 GiB: both get the smaller worker's block count.
    first, second = (
        _model(4).subset(["layers.0", "layers.1"]),
        _model(4).subset(["layers.2", "layers.3"]),
    )
    plan = get_kv_cache_configs(
        PlannerSettings(max_model_len=16, vllm_version="0.26"), [first, second], [2**30, 2**31]
    )
    blocks = 2**30 // SPEC.page_size_bytes // 2
    assert plan.num_blocks == blocks
    assert plan.workers[1].num_blocks_before_equalisation == 2 * blocks
    for config in plan.kv_cache_configs:
        assert all(t.size == blocks * SPEC.page_size_bytes for t in config.kv_cache_tensors)


def test_num_gpu_blocks_override() -> None:
    settings = PlannerSettings(num_gpu_blocks_override=7, max_model_len=112, vllm_version="0.26")
    plan = get_kv_cache_configs(settings, [_model(2)], [2**30])
    assert plan.num_blocks == 7
    (fact,) = plan.num_blocks_overrides
    assert fact.num_blocks_from_memory == 2**30 // (2 * SPEC.page_size_bytes)
