"""``KVCacheManager``'s keyword defaults are vLLM's (issue 24's mutation round).

The replay passes every argument, so nothing else reads the defaults; a caller of the
public class gets them. Expected values: vLLM 0.26's ``KVCacheManager.__init__``
(``vllm/v1/core/kv_cache_manager.py``: ``max_in_flight_tokens=None`` falling back to
``max_model_len``, ``enable_caching=True``, ``use_eagle=False``, ``log_stats=False``,
``enable_kv_cache_events=False``, ``watermark=0.0``; ``allocate_slots``'s
``num_lookahead_tokens=0`` and ``has_scheduled_reqs=True``, so a waiting request keeps
the watermark free), its ``envs.py``
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` defaults to ``"1"``) and vLLM 0.34's
(``num_hash_lookahead_tokens=0``, also ``KVCacheCoordinator``'s in
``vllm/v1/core/kv_cache_coordinator.py``). The usage is the golden's last record's.
"""

from __future__ import annotations

import json

import pytest

from kvpure.cache import (
    CacheReplay,
    KVCacheCoordinator,
    KVCacheManager,
    get_cache_rules,
    parse_trace,
    replay_config_from_plan_input,
)
from kvpure.cache.request import CacheRequest
from kvpure.cache.windowed import SlidingWindowManager
from kvpure.hashing import HashRequest, HashScheme
from kvpure.specs import SlidingWindowSpec
from tests.conftest import GOLDEN_026

# one full-attention and one sliding-window group
HYBRID = GOLDEN_026 / "cache_replay" / "hybrid_full_sliding_window.json"


GOLDEN = json.loads(HYBRID.read_text(encoding="utf-8"))


def _manager(watermark: float | None = None) -> KVCacheManager:
    trace = parse_trace(GOLDEN["trace"])
    config = replay_config_from_plan_input(trace.plan_input)
    if watermark is not None:
        return KVCacheManager(
            kv_cache_config=config.kv_cache_config,
            max_model_len=config.max_model_len,
            scheduler_block_size=config.scheduler_block_size,
            hash_block_size=config.hash_block_size,
            rules=get_cache_rules("0.26"),
            watermark=watermark,
        )
    return KVCacheManager(
        kv_cache_config=config.kv_cache_config,
        max_model_len=config.max_model_len,
        scheduler_block_size=config.scheduler_block_size,
        hash_block_size=config.hash_block_size,
        rules=get_cache_rules("0.26"),
    )


def test_the_keyword_defaults_are_vllms() -> None:
    manager = _manager()
    pool = manager.block_pool
    assert manager.enable_caching is True
    assert pool.enable_caching is True
    assert manager.coordinator.kind == "HybridKVCacheCoordinator"  # caching on, two groups
    assert manager.log_stats is False
    assert manager.make_prefix_cache_stats() is None
    assert manager.enable_kv_cache_events is False
    assert pool.enable_kv_cache_events is False
    assert manager.watermark_blocks == 0
    assert pool.use_int_block_hashes is True
    assert pool.num_hash_lookahead_tokens == 0
    assert manager.coordinator.eagle_group_ids == set()
    assert not any(m.use_eagle for m in manager.coordinator.managers)


def test_max_in_flight_tokens_falls_back_to_max_model_len() -> None:
    manager = _manager()
    (sliding,) = [m for m in manager.coordinator.managers if isinstance(m, SlidingWindowManager)]
    spec = sliding.kv_cache_spec
    assert isinstance(spec, SlidingWindowSpec)
    # the admission cap of a sliding window is computed from max_in_flight_tokens
    expected = spec.max_admission_blocks_per_request(manager.max_model_len, manager.max_model_len)
    assert sliding.max_admission_blocks_per_request == expected


def test_the_coordinator_hashes_without_lookahead_by_default() -> None:
    trace = parse_trace(GOLDEN["trace"])
    config = replay_config_from_plan_input(trace.plan_input)
    coordinator = KVCacheCoordinator(
        kv_cache_config=config.kv_cache_config,
        max_model_len=config.max_model_len,
        max_in_flight_tokens=config.max_in_flight_tokens,
        use_eagle=False,
        enable_caching=True,
        enable_kv_cache_events=False,
        scheduler_block_size=config.scheduler_block_size,
        hash_block_size=config.hash_block_size,
        use_int_block_hashes=True,
        rules=get_cache_rules("0.26"),
    )
    assert coordinator.block_pool.num_hash_lookahead_tokens == 0
    assert coordinator.enable_caching is True


def test_the_managers_usage_is_the_pools() -> None:
    trace = parse_trace(GOLDEN["trace"], vllm_version="0.26")
    config = replay_config_from_plan_input(trace.plan_input)
    engine = CacheReplay(config, trace.replay)
    for index, op in enumerate(trace.ops):
        engine.apply(op, index)
    want = GOLDEN["records"][-1]["pool"]["usage"]  # vLLM 0.26's block_pool.get_usage()
    assert want > 0
    assert engine.manager.usage == pytest.approx(want, rel=1e-12)


def _one_block_request() -> CacheRequest:
    config = replay_config_from_plan_input(parse_trace(GOLDEN["trace"]).plan_input)
    scheme = HashScheme.from_seed(
        algorithm=config.hash_fn, block_size=config.hash_block_size, seed="0"
    )
    return CacheRequest(
        request_id="r",
        hash_request=HashRequest(prompt_token_ids=tuple(range(config.scheduler_block_size))),
        scheme=scheme,
    )


def test_a_waiting_request_keeps_the_watermark_free_by_default() -> None:
    # nearly the whole pool is watermark: a waiting request is refused while others run
    request = _one_block_request()
    assert _manager(watermark=0.99).allocate_slots(request, request.num_tokens) is None
    alone = _manager(watermark=0.99).allocate_slots(
        request, request.num_tokens, has_scheduled_reqs=False
    )
    assert alone is not None


def test_allocate_slots_reserves_no_lookahead_by_default() -> None:
    manager = _manager()
    config = replay_config_from_plan_input(parse_trace(GOLDEN["trace"]).plan_input)
    scheme = HashScheme.from_seed(
        algorithm=config.hash_fn, block_size=config.hash_block_size, seed="0"
    )
    block_size = config.scheduler_block_size
    request = CacheRequest(
        request_id="r",
        hash_request=HashRequest(prompt_token_ids=tuple(range(block_size))),
        scheme=scheme,
    )
    new_blocks = manager.allocate_slots(request, block_size)
    assert new_blocks is not None
    # one block a group for one block of tokens; a lookahead token would need a second
    assert [len(blocks) for blocks in new_blocks] == [1] * len(new_blocks)
