"""The block pool's C loops (``kvpure._pool_loops``) against the Python loops they stand in for.

:mod:`kvpure.cache.pool_loops` is the reference. These tests run the pool's
state machine, the vLLM 0.26 and 0.34 cache-replay goldens, the partial-tail oracle
traces and the hash-id
trace's token-path check on the pure path too; compare the two paths on
random hash-id traces (every count, the pool's final free queue and cached
keys) and on random block states loop by loop (including what the C loop
hands back: a block of a subclass, a block already cached, a foreign null
block, a block not in the queue, a block with secondary keys (partial tails), a
partial tail promoted to a full block), errors and all; and check that no reference is
leaked.
"""

from __future__ import annotations

import copy
import gc
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

import kvpure.cache.pool_loops as pool_loops
from kvpure.cache.hash_trace import TraceRequest
from kvpure.cache.pool_loops import CacheDict, holders_by_id
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.workload import RunResult, replay_config, result_of
from kvpure.cache.workload_server import ServerRun, make_request
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock
from tests import test_cache_golden, test_cache_golden_034, test_cache_oracle_partial_tail
from tests.test_cache_hash_trace import (
    LAYOUT,
    _deployment,
    _trace,
    test_derived_keys_give_the_token_paths_counts,
)
from tests.test_cache_pool_model import BlockPoolMachine

BUILT = pool_loops._BUILT is not None
needs_loops = pytest.mark.skipif(not BUILT, reason="kvpure._pool_loops is not built")


@pytest.fixture
def pure_path() -> Iterator[None]:
    pool_loops.set_accelerated(False)
    try:
        yield
    finally:
        pool_loops.set_accelerated(True)


def test_the_switch_says_which_path_runs() -> None:
    assert pool_loops.set_accelerated(False) is False
    assert not pool_loops.accelerated()
    assert pool_loops.set_accelerated(True) is BUILT
    assert pool_loops.accelerated() is BUILT


def test_state_machine_on_the_pure_path(pure_path: None) -> None:
    run_state_machine_as_test(BlockPoolMachine)


@pytest.mark.parametrize("path", test_cache_golden.GOLDEN_FILES, ids=lambda p: p.stem)
def test_the_026_goldens_on_the_pure_path(pure_path: None, path: Path) -> None:
    test_cache_golden.test_replay_reproduces_golden(path)


@pytest.mark.parametrize("path", test_cache_golden_034.GOLDEN_FILES, ids=lambda p: p.stem)
def test_the_034_goldens_on_the_pure_path(pure_path: None, path: Path) -> None:
    test_cache_golden_034.test_replay_reproduces_the_034_golden(path, "0.34")


def test_the_partial_tail_oracle_traces_on_the_pure_path(pure_path: None) -> None:
    """Partial tails (secondary keys, promotion, eviction of every key) through the
    Python loops: vLLM 0.26's and 0.34's records, events included."""
    for index in range(len(test_cache_oracle_partial_tail.CASES_026)):
        test_cache_oracle_partial_tail.test_replay_agrees_with_vllm_026(index)
    for index in range(len(test_cache_oracle_partial_tail.CASES_034)):
        test_cache_oracle_partial_tail.test_replay_agrees_with_vllm_034(index)


@pytest.mark.parametrize("seed", range(2))
def test_the_trace_keys_give_the_token_paths_counts_on_the_pure_path(
    pure_path: None, seed: int
) -> None:
    test_derived_keys_give_the_token_paths_counts(seed, 16, 22)


# -- whole runs, both paths -------------------------------------------------------------------


def _run(items: list[TraceRequest], config: ReplayConfig, seqs: int) -> tuple[RunResult, object]:
    server = ServerRun(config, seqs)
    for index, item in enumerate(items):
        request = make_request(index, item, server.scheme, config.hash_block_size)
        server.submit(index, item, request)
    pool = server.engine.manager.block_pool
    state = (
        pool.free_block_queue.free_block_ids(),
        {key: list(holders_by_id(h)) for key, h in pool.cached_block_hash_to_block.items()},
        [(b.ref_cnt, b.block_hash, b.block_hash_num_tokens) for b in pool.blocks],
    )
    return result_of(server), state


@needs_loops
@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 40),
    ids=st.integers(2, 12),
    blocks=st.sampled_from([22, 30, 60, None]),
    seqs=st.sampled_from([1, 3, 256]),
)
def test_random_traces_give_the_same_counts_and_pool_on_both_paths(
    seed: int, count: int, ids: int, blocks: int | None, seqs: int
) -> None:
    items = _trace(seed, count, 32, ids)
    config = replay_config(LAYOUT, _deployment(blocks, max_model_len=320))
    fast = _run(items, config, seqs)
    pool_loops.set_accelerated(False)
    try:
        pure = _run(items, config, seqs)
    finally:
        pool_loops.set_accelerated(True)
    assert fast == pure


# -- loop by loop, both paths, odd inputs included -----------------------------------------------


class _Weird(KVCacheBlock):
    """A block of a subclass: the C loops hand it to the Python loop."""

    __slots__ = ()


def _world(draw: st.DrawFn) -> dict[str, Any]:
    """A queue of free blocks, some held blocks, a prefix cache over some of them."""
    num = draw(st.integers(2, 12))
    blocks = [KVCacheBlock(i) for i in range(num)]
    queue = FreeKVCacheBlockQueue(blocks)
    null = queue.popleft()
    null.is_null = True
    held: dict[bytes, dict[int, KVCacheBlock]] = {}
    extras: dict[int, list[bytes]] = {}
    for block in blocks[1:]:
        if draw(st.booleans()):
            key = bytes([draw(st.integers(0, 3))]) + b"\0\0\0\0"
            # a partial tail's hash covers fewer tokens (cache_full_blocks promotes it)
            block.set_block_hash(key, draw(st.sampled_from([8, 16])))
            held.setdefault(key, {})[block.block_id] = block
            # secondary keys (partial tails beside the block's own hash)
            for _ in range(draw(st.integers(0, 2))):
                extra = bytes([draw(st.integers(4, 6))]) + b"\0\0\0\0"
                if block.block_id not in held.setdefault(extra, {}):
                    held[extra][block.block_id] = block
                    extras.setdefault(block.block_id, []).append(extra)
    # vLLM's layout: one holder kept as the block, more as a dict (which may shrink to one)
    cache: CacheDict = {
        key: next(iter(h.values())) if len(h) == 1 and draw(st.booleans()) else h
        for key, h in held.items()
    }
    for block in blocks[1:]:
        if draw(st.booleans()):
            queue.remove(block)
            block.ref_cnt = draw(st.integers(1, 3))
    return {"blocks": blocks, "queue": queue, "null": null, "cache": cache, "extras": extras}


def _pick(draw: st.DrawFn, world: dict[str, Any]) -> list[Any]:
    blocks = world["blocks"]
    picked: list[Any] = draw(st.lists(st.sampled_from(blocks), max_size=8))
    if draw(st.integers(0, 5)) == 0:  # an odd item somewhere: the C loop stops there
        odd = draw(st.sampled_from(["weird", "foreign null"]))
        item = _Weird(99) if odd == "weird" else KVCacheBlock(98)
        item.is_null = odd != "weird"
        picked.insert(draw(st.integers(0, len(picked))), item)
    return picked


@st.composite
def _case(draw: st.DrawFn) -> tuple[dict[str, Any], str, list[Any], Any]:
    world = _world(draw)
    loop = draw(st.sampled_from(["take", "store", "release", "touch", "prefix", "evictable"]))
    picked = _pick(draw, world)
    extra = draw(st.lists(st.binary(min_size=1, max_size=1), min_size=0, max_size=10))
    return world, loop, picked, extra


def _apply(world: dict[str, Any], loop: str, picked: list[Any], extra: list[bytes]) -> object:
    cache, queue = world["cache"], world["queue"]
    if loop == "take":
        removed: list[bytes] = []
        pool_loops.take(cache, picked, removed, world["extras"])
        return removed
    if loop == "store":
        stored: list[int] = []
        promoted: list[bytes] = []
        span = (0, len(picked))
        pool_loops.store(
            cache, picked, extra, span, b"\0\0\0\0", 16, world["null"], None, stored,
            world["extras"], promoted,
        )  # fmt: skip
        return stored, promoted
    if loop == "release":
        plain, hashed = pool_loops.release(picked)
        return [b.block_id for b in plain], [b.block_id for b in hashed]
    if loop == "evictable":
        return pool_loops.count_evictable(picked)
    if loop == "touch":
        pool_loops.touch(queue, picked)
        return None
    found = pool_loops.longest_prefix(cache, extra, max(len(extra) - 1, 0), b"\0\0\0\0")
    return [b.block_id for b in found]


def _snapshot(world: dict[str, Any], outcome: object) -> object:
    blocks: list[KVCacheBlock] = world["blocks"]
    queue: FreeKVCacheBlockQueue = world["queue"]
    return (
        outcome,
        queue.num_free_blocks,
        [b.block_id for b in queue.get_all_free_blocks()],
        [(b.ref_cnt, b.block_hash, b.block_hash_num_tokens, b.is_queued) for b in blocks],
        {key: list(holders_by_id(h)) for key, h in world["cache"].items()},
        world["extras"],
    )


def _outcome(run: Callable[[], object]) -> object:
    try:
        return run()
    except Exception as err:  # the two paths must raise the same error
        return (type(err).__name__, str(err))


@needs_loops
@settings(max_examples=300)
@given(case=_case())
def test_each_loop_matches_the_reference_on_random_blocks(
    case: tuple[dict[str, Any], str, list[Any], Any],
) -> None:
    world, loop, picked, extra = case
    twin = copy.deepcopy((world, picked))
    fast = _snapshot(world, _outcome(lambda: _apply(world, loop, picked, extra)))
    pool_loops.set_accelerated(False)
    try:
        pure_world, pure_picked = twin
        pure = _snapshot(pure_world, _outcome(lambda: _apply(pure_world, loop, pure_picked, extra)))
    finally:
        pool_loops.set_accelerated(True)
    assert fast == pure


@needs_loops
def test_no_reference_is_leaked_or_lost() -> None:
    _run(_trace(1, 30, 32), replay_config(LAYOUT, _deployment(30, max_model_len=320)), 4)
    gc.collect()
    before = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    blocks = [KVCacheBlock(i) for i in range(4)]
    counts = [sys.getrefcount(b) for b in blocks]
    cache: CacheDict = {}
    for _ in range(50):
        pool_loops.store(cache, blocks, [b"a", b"b", b"c", b"d"], (0, 4), b"!", 16, blocks[0], None)
        pool_loops.longest_prefix(cache, [b"b", b"c"], 2, b"!")
        pool_loops.take(cache, blocks, None)
        pool_loops.release(blocks)
    assert cache == {}
    assert [sys.getrefcount(b) for b in blocks] == counts
    if before is not None:  # a debug build counts every reference
        assert sys.gettotalrefcount() - before < 100
