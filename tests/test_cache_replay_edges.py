"""``kvpure.cache.replay`` at its edges: its bounds, and records against vLLM's goldens.

Expected records are the cache-replay goldens of vLLM 0.26 and 0.34 (each op's outcome,
request, pool, events and stats as vLLM's scheduler and manager left them). The bounds
are kvpure's own and stated in ``replay.py``: the free-queue ids a record copies are at
most ``MAX_FREE_QUEUE_LIMIT`` (2**62, a block-id bound), that count included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvpure.cache import replay, replay_trace
from kvpure.cache.trace_json import parse_trace, render_result
from kvpure.errors import InvalidFieldError
from tests.conftest import DATA_DIR

EVICTION_034 = DATA_DIR / "vllm-0.34.0" / "cache_replay" / "eviction_lru.json"


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EVICTION_034.read_text(encoding="utf-8"))
    return data


def test_the_free_queue_limit_bound_is_allowed_and_one_past_it_is_not() -> None:
    golden = _golden()
    result = render_result(replay(parse_trace(golden["trace"]), free_queue_limit=2**62))
    assert [r["pool"] for r in result["records"]] == [r["pool"] for r in golden["records"]]
    with pytest.raises(InvalidFieldError) as info:
        replay(parse_trace(golden["trace"]), free_queue_limit=2**62 + 1)
    assert info.value.field == "free_queue_limit"


def test_a_free_queue_limit_of_zero_records_counts_only() -> None:
    golden = _golden()
    result = render_result(replay(parse_trace(golden["trace"]), free_queue_limit=0))
    for got, want in zip(result["records"], golden["records"], strict=True):
        assert got["pool"]["free_queue"] == []
        assert got["pool"]["num_free_blocks"] == want["pool"]["num_free_blocks"]
        omitted = len(want["pool"]["free_queue"])
        assert got["pool"].get("free_queue_omitted", 0) == omitted


def test_034_without_caching_holds_the_largest_int32_token_id() -> None:
    """0.34's ``Request`` holds token ids in a ``TokenBuffer``, an ``array("i")``
    (``vllm/v1/token_buffer.py``): 2**31 - 1 fits, in the prompt and decoded."""
    trace = _golden()["trace"]
    trace["plan_input"]["vllm_config"]["cache_config"]["enable_prefix_caching"] = False
    trace["ops"] = [
        {"op": "arrive", "request_id": "a", "prompt_token_ids": [1, 2**31 - 1, 3]},
        {"op": "decode", "request_id": "a", "token_ids": [2**31 - 1]},
    ]
    result: Any = replay_trace(trace, vllm_version="0.34")  # JSON
    assert [r["outcome"].get("tokens_appended") for r in result["records"]] == [None, 1]
