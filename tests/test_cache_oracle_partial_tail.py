"""Partial tail blocks against the real vLLM 0.26.0 and 0.34.0 KVCacheManagers.

When a full-attention group's block (16) is larger than the hash block (4), every
release's ``FullAttentionManager._cache_partial_tail_block`` registers the prompt's last
hash boundary on the block holding it (``BlockPool.cache_partial_block``: a primary hash
or a secondary key, a BlockStored of one hash block); a block that fills drops those keys
before its full hash (promotion), and eviction drops them all. The traces
(``tools/vllm_oracle/gen_partial_tail_traces.py``: sliding-window, full-attention and
Mamba partners, EAGLE with and without lookahead hashes, decodes into the partial block,
small pools, preemption for 0.26) and what vLLM's own manager did on each
(``cache_replay_vllm.py`` / ``cache_replay_vllm034.py``) are in
``tests/data/vllm-0.2x.0-oracle/cache_replay_partial_tail.json.gz`` and
``tests/data/vllm-0.34.0-oracle/cache_replay_partial_tail.json.gz``. Every record,
events included, and the final state must agree.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.errors import KVPureError
from tests.conftest import DATA_DIR
from tests.test_cache_oracle_mutants import _replay_with_preemptions, _same


def _load(release: str) -> list[dict[str, Any]]:
    path = DATA_DIR / f"vllm-{release}-oracle" / "cache_replay_partial_tail.json.gz"
    oracle: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    assert oracle["meta"]["vllm_version"] == release
    cases: list[dict[str, Any]] = oracle["cases"]
    return cases


CASES_026 = _load("0.26.0")
CASES_034 = _load("0.34.0")


def _partial_events(case: dict[str, Any]) -> int:
    return sum(
        event["type"] == "BlockStored" and event["block_size"] == 4 and event["group_idx"] == 0
        for record in case["vllm"].get("records", ())
        for event in record["events"]
    )


@pytest.mark.parametrize("cases", [CASES_026, CASES_034], ids=["0.26", "0.34"])
def test_the_traces_reach_partial_tails_promotions_and_evictions(
    cases: list[dict[str, Any]],
) -> None:
    ok = [c for c in cases if "error" not in c["vllm"]]
    assert len(ok) >= 20
    assert sum(_partial_events(c) > 0 for c in ok) >= len(ok) // 2
    removed = sum(
        event["type"] == "BlockRemoved" and event["group_idx"] == 0
        for c in ok
        for record in c["vllm"]["records"]
        for event in record["events"]
    )
    assert removed >= 20
    assert any("eagle" in c["trace"]["name"] for c in ok)


@pytest.mark.parametrize("index", range(len(CASES_026)))
def test_replay_agrees_with_vllm_026(index: int) -> None:
    case = CASES_026[index]
    name, want = case["trace"]["name"], case["vllm"]
    if "error" in want:
        with pytest.raises(KVPureError):
            replay_trace(case["trace"], vllm_version="0.26")
        return
    if any(op["op"] == "preempt" for op in case["trace"]["ops"]):
        _same(_replay_with_preemptions(case["trace"]), want["records"], f"{name}.records")
        return
    got: Any = replay_trace(case["trace"], vllm_version="0.26")
    _same(got["records"], want["records"], f"{name}.records")
    _same(got["final_state"], want["final_state"], f"{name}.final_state")


@pytest.mark.parametrize("index", range(len(CASES_034)))
def test_replay_agrees_with_vllm_034(index: int) -> None:
    case = CASES_034[index]
    name, want = case["trace"]["name"], case["vllm"]
    if "error" in want:
        with pytest.raises(KVPureError):
            replay_trace(case["trace"], vllm_version="0.34")
        return
    if any(op["op"] == "preempt" for op in case["trace"]["ops"]):
        _same(_replay_with_preemptions(case["trace"], "0.34"), want["records"], f"{name}.records")
        return
    got: Any = replay_trace(case["trace"], vllm_version="0.34")
    header: Any = got["kv_cache_config"]
    for key, value in want["header"].items():
        assert header[key] == value, f"{name}.kv_cache_config.{key}"
    _same(got["records"], want["records"], f"{name}.records")
    _same(got["final_state"], want["final_state"], f"{name}.final_state")


@pytest.mark.parametrize("cases", [CASES_026, CASES_034], ids=["0.26", "0.34"])
def test_the_traces_preempt_requests(cases: list[dict[str, Any]]) -> None:
    ok = [c for c in cases if "error" not in c["vllm"]]
    preempts = [r for c in ok for r in c["vllm"]["records"] if r["op"] == "preempt"]
    assert len(preempts) >= 20
    assert any(
        (record["prefix_cache_stats"] or {}).get("preempted_requests", 0) > 0
        for c in ok
        for record in c["vllm"]["records"]
    )
