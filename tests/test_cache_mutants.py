"""The replay's small types at the values vLLM gives them (issue 24's mutation round).

Each expected value is read from vLLM's source or the cache-replay goldens' README,
not from kvpure: vLLM 0.26 ``vllm/v1/request.py`` (a request's report mode is
"incremental" unless its sampling params say otherwise),
``vllm/distributed/kv_events.py`` (``MEDIUM_GPU = "GPU"``; the event structs and
their defaults), and ``cache_replay/README.md`` of the 0.26 goldens (the ``replay``
object's values and an ``arrive``'s ``lora_int_id`` default of 1).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kvpure.cache import parse_trace
from kvpure.cache.events import (
    MEDIUM_GPU,
    BlockRemoved,
    BlockStored,
    block_removed_on_gpu,
    blocks_removed_on_gpu,
)
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.trace import (
    ArriveOp,
    DecodeOutcome,
    DraftFlags,
    PoolSnapshot,
    ReplaySettings,
    StepRecord,
    allocated_step,
)
from kvpure.hashing import HashRequest, HashScheme
from tests.conftest import GOLDEN_026

EVICTION = GOLDEN_026 / "cache_replay" / "eviction_lru.json"


def _trace() -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(EVICTION.read_text(encoding="utf-8"))["trace"]
    return trace


def test_a_request_reports_incrementally_unless_told_otherwise() -> None:
    # vllm/v1/request.py: extra_args.get("kv_cache_report_mode", "incremental")
    request = CacheRequest(
        request_id="r", hash_request=HashRequest(prompt_token_ids=(1, 2, 3)), scheme=None
    )
    assert request.kv_cache_report_mode == "incremental"
    assert request.status is RequestStatus.WAITING
    assert (request.num_tokens, request.num_prompt_tokens, request.num_computed_tokens) == (3, 3, 0)
    assert request.lora_int_id is None
    assert (request.shared_prefix_boundary, request.num_preemptions) == (0, 0)  # request.py:188
    assert request.skip_reading_prefix_cache is False
    assert request.block_hashes == ()


def test_appending_extends_the_tokens_and_hashes_a_completed_block() -> None:
    scheme = HashScheme.from_seed(algorithm="sha256", block_size=2, seed="0")
    request = CacheRequest(
        request_id="r", hash_request=HashRequest(prompt_token_ids=(1, 2, 3)), scheme=scheme
    )
    assert len(request.block_hashes) == 1  # one full block of 2 in a 3-token prompt
    request.append_output_token_ids(4)
    assert request.all_token_ids == [1, 2, 3, 4]
    assert request.num_tokens == 4
    assert request.num_prompt_tokens == 3
    assert len(request.block_hashes) == 2
    unhashed = CacheRequest(
        request_id="r", hash_request=HashRequest(prompt_token_ids=(1, 2, 3)), scheme=None
    )
    unhashed.append_output_token_ids(4)
    assert unhashed.all_token_ids == [1, 2, 3, 4]
    assert unhashed.block_hashes == ()


def test_the_request_states_are_vllms_names() -> None:
    assert RequestStatus.WAITING.value == "waiting"
    assert RequestStatus.RUNNING.value == "running"


def test_removed_events_on_the_gpu_equal_vllms_structs() -> None:
    assert MEDIUM_GPU == "GPU"  # kv_events.py
    want = BlockRemoved(block_hashes=(7,), medium="GPU", group_idx=2)
    assert block_removed_on_gpu(7, 2) == want
    got = blocks_removed_on_gpu([(7, 2), (9, 0)])
    assert got == [want, BlockRemoved(block_hashes=(9,), medium="GPU", group_idx=0)]
    for event in (*got, block_removed_on_gpu(7, 2)):
        assert event.locality is None
        assert event.ownership is None
    assert blocks_removed_on_gpu([]) == []


def test_a_stored_event_takes_its_groups_spec_metadata() -> None:
    stored = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
    )
    assert (stored.extra_keys, stored.group_idx, stored.kv_cache_spec_kind) == (None, None, None)
    full = stored.with_spec_metadata("full_attention", None)
    assert (full.kv_cache_spec_kind, full.kv_cache_spec_sliding_window) == ("full_attention", None)
    assert full.with_spec_metadata("full_attention", None) is full
    sliding = full.with_spec_metadata("sliding_window", 128)
    assert (sliding.kv_cache_spec_kind, sliding.kv_cache_spec_sliding_window) == (
        "sliding_window",
        128,
    )
    assert full.with_spec_metadata("full_attention", 128).kv_cache_spec_sliding_window == 128
    assert sliding.block_hashes == (1,)
    assert sliding.token_ids == (1, 2)


def test_a_trace_without_replay_settings_takes_the_readmes_values() -> None:
    # cache_replay/README.md: {"log_stats": true, "enable_kv_cache_events": true,
    # "use_int_block_hashes": true, "pythonhashseed": "0", "watermark": 0.0,
    # "reserve_full_isl": true}
    want = ReplaySettings(
        log_stats=True,
        enable_kv_cache_events=True,
        use_int_block_hashes=True,
        pythonhashseed="0",
        watermark=0.0,
        reserve_full_isl=True,
    )
    assert ReplaySettings() == want
    trace = _trace()
    trace.pop("replay", None)
    assert parse_trace(trace, vllm_version="0.26").replay == want
    assert DraftFlags() == DraftFlags(
        disable_lookahead_block_hashes=False, disable_eagle_block_drop=False
    )


def test_an_arrive_with_only_the_required_fields() -> None:
    # README: lora_int_id default 1, lora_path default /adapters/<name>, report mode
    # "incremental", prefix-cache reads not skipped, no salt, no images
    op = ArriveOp(request_id="r", prompt_token_ids=(1,))
    assert (op.lora_name, op.lora_int_id, op.lora_path, op.cache_salt) == (None, 1, "", None)
    assert (op.mm_features, op.kv_cache_report_mode, op.skip_reading_prefix_cache) == (
        (),
        "incremental",
        False,
    )
    trace = _trace()
    bare = copy.deepcopy(trace)
    bare["ops"] = [{"op": "arrive", "request_id": "r", "prompt_token_ids": [1, 2, 3]}]
    parsed = parse_trace(bare, vllm_version="0.26").ops[0]
    assert parsed == ArriveOp(request_id="r", prompt_token_ids=(1, 2, 3))


def test_an_allocated_step_equals_the_dataclass() -> None:
    ids = ((1, 2), (3,))
    step = allocated_step(5, ids)
    assert step == StepRecord(num_new_tokens=5, allocated=True, new_block_ids=ids)
    assert step.allocated is True


def test_a_pool_snapshot_counts_the_free_blocks_left_out() -> None:
    whole = PoolSnapshot(free_queue=(3, 4, 5), num_free_blocks=3, num_cached_hashes=0, usage=0.0)
    assert whole.free_queue_omitted == 0
    head = PoolSnapshot(free_queue=(3, 4), num_free_blocks=10, num_cached_hashes=0, usage=0.5)
    assert head.free_queue_omitted == 8


def test_a_skipped_decode_appended_nothing() -> None:
    # README: a decode of a waiting request is `skipped: "waiting"`; no token was appended
    skipped = DecodeOutcome(skipped="waiting")
    assert (skipped.tokens_appended, skipped.steps) == (0, ())
    assert DecodeOutcome().skipped is None
