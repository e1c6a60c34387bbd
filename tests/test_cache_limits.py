"""Sizes the replay bounds: the pool's block count and the free queue a record copies.

``MAX_NUM_GPU_BLOCKS`` (4,194,304 blocks) caps the pool, refused before anything is
allocated; ``FREE_QUEUE_RECORD_LIMIT`` (4096 ids) caps the free queue each record and
the final state copy (the head of the queue, the rest counted in ``free_queue_omitted``).
"""

from __future__ import annotations

import argparse
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache import replay, replay_trace
from kvpure.cache.block_pool import MAX_NUM_GPU_BLOCKS, BlockPool
from kvpure.cache.errors import CacheStateError, UnsupportedTraceError
from kvpure.cache.replay import FREE_QUEUE_RECORD_LIMIT
from kvpure.cache.trace_json import parse_trace, render_result
from kvpure.cli import cache_replay_command
from tests.conftest import DATA_DIR

EVICTION = DATA_DIR / "vllm-0.34.0" / "cache_replay" / "eviction_lru.json"


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EVICTION.read_text(encoding="utf-8"))
    return data


def _with_pool(num_blocks: int) -> dict[str, Any]:
    trace: dict[str, Any] = _golden()["trace"]
    trace["plan_input"]["vllm_config"]["cache_config"]["num_gpu_blocks_override"] = num_blocks
    return trace


def test_the_stated_limits() -> None:
    assert MAX_NUM_GPU_BLOCKS == 4_194_304
    assert FREE_QUEUE_RECORD_LIMIT == 4096


@pytest.mark.parametrize("version", ["0.26", "0.33", "0.34"])
def test_a_pool_of_10_12_blocks_is_refused_at_once(version: str) -> None:
    trace = _with_pool(10**12)
    # "At once": refused before any per-block memory is taken (a pool of even 2**22 blocks
    # takes hundreds of MiB), so the peak stays small.
    tracemalloc.start()
    try:
        with pytest.raises(UnsupportedTraceError, match="num_gpu_blocks_override") as info:
            replay_trace(trace, vllm_version=version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    assert "1000000000000 blocks" in str(info.value)
    assert f"at most {MAX_NUM_GPU_BLOCKS}" in str(info.value)


def test_one_block_over_the_cap_is_refused_and_the_cap_itself_is_not() -> None:
    with pytest.raises(UnsupportedTraceError):
        replay_trace(_with_pool(MAX_NUM_GPU_BLOCKS + 1))
    pool = BlockPool(num_gpu_blocks=64, enable_caching=True, hash_block_size=4)
    assert pool.get_num_free_blocks() == 63


@pytest.mark.parametrize("bad", [0, -1, MAX_NUM_GPU_BLOCKS + 1, 10**12, True])
def test_the_block_pool_refuses_a_count_out_of_range(bad: Any) -> None:
    with pytest.raises(CacheStateError, match="num_gpu_blocks must be an integer from 1 to"):
        BlockPool(num_gpu_blocks=bad, enable_caching=True, hash_block_size=4)


@pytest.mark.parametrize("bad", [-1, True])
def test_the_block_pool_refuses_a_bad_lookahead(bad: Any) -> None:
    with pytest.raises(CacheStateError, match="num_hash_lookahead_tokens"):
        BlockPool(
            num_gpu_blocks=4, enable_caching=True, hash_block_size=4, num_hash_lookahead_tokens=bad
        )


def test_the_command_refuses_a_huge_pool_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_with_pool(10**12)), encoding="utf-8")
    parser = argparse.ArgumentParser(prog="kvpure")
    cache_replay_command.register(parser.add_subparsers())
    args = parser.parse_args(["cache-replay", str(path), "--json"])
    assert args.run(args) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["type"] == "UnsupportedTraceError"
    assert err.startswith("kvpure: error: vllm_config.cache_config.num_gpu_blocks_override")
    assert err.count("\n") == 1


def test_a_record_copies_the_queue_head_and_counts_the_rest() -> None:
    golden = _golden()
    result = render_result(replay(parse_trace(golden["trace"]), free_queue_limit=3))
    records = zip(result["records"], golden["records"], strict=True)
    pairs = [(r["pool"], w["pool"]) for r, w in records]
    pairs.append((result["final_state"]["pool"], golden["final_state"]["pool"]))
    assert any(len(want["free_queue"]) > 3 for _, want in pairs)
    for got, want in pairs:
        assert got["free_queue"] == want["free_queue"][:3]
        assert got["num_free_blocks"] == want["num_free_blocks"]
        omitted = len(want["free_queue"]) - 3
        if omitted > 0:
            assert got["free_queue_omitted"] == omitted
        else:
            assert "free_queue_omitted" not in got


def test_a_short_queue_is_copied_whole_without_the_count() -> None:
    golden = _golden()
    result = replay_trace(golden["trace"])
    for got, want in zip(result["records"], golden["records"], strict=True):  # type: ignore[call-overload]  # JSON
        assert got["pool"] == want["pool"]


def test_a_large_pool_records_4096_ids_each() -> None:
    trace = _with_pool(10_000)
    result: Any = replay_trace(trace)
    pools = [r["pool"] for r in result["records"]] + [result["final_state"]["pool"]]
    for pool in pools:
        assert len(pool["free_queue"]) == FREE_QUEUE_RECORD_LIMIT
        assert pool["free_queue_omitted"] == pool["num_free_blocks"] - FREE_QUEUE_RECORD_LIMIT
    # the head is the next to evict: the never-used blocks after the ones the ops took
    assert pools[0]["free_queue"][0] > 0


@pytest.mark.parametrize("bad", [-1, True])
def test_the_free_queue_limit_must_be_a_count(bad: Any) -> None:
    from kvpure.errors import InvalidFieldError

    with pytest.raises(InvalidFieldError, match="free_queue_limit"):
        replay(parse_trace(_golden()["trace"]), free_queue_limit=bad)
