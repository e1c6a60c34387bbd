"""The replay's fast paths give the values of the slow ones they replace.

Each fast helper is compared with the constructor or function it stands for (which the
cache goldens and the vLLM oracle traces check against vLLM 0.26.0 in
test_cache_golden.py and test_cache_oracle.py).
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import CacheStateError, TraceFieldError
from kvpure.cache.events import (
    MEDIUM_GPU,
    BlockRemoved,
    BlockStored,
    block_removed_on_gpu,
    blocks_removed_on_gpu,
)
from kvpure.cache.request import CacheRequest
from kvpure.cache.trace import StepRecord, allocated_step
from kvpure.cache.trace_json import parse_trace
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock
from kvpure.hashing import VLLM_0_26, HashRequest, HashScheme, maybe_convert_block_hash
from kvpure.hashing.types import low_64_bits_of_each
from tests.conftest import GOLDEN_026


@given(st.one_of(st.integers(0, 2**64 - 1), st.binary(max_size=32)), st.integers(0, 2**32 - 1))
def test_block_removed_on_gpu_is_the_constructors_value(value: int | bytes, group: int) -> None:
    fast = block_removed_on_gpu(value, group)
    slow = BlockRemoved(block_hashes=(value,), medium=MEDIUM_GPU, group_idx=group)
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert repr(fast) == repr(slow)
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.group_idx = 1  # type: ignore[misc]  # frozen, as the constructor's value


def test_with_spec_metadata_keeps_an_already_annotated_event() -> None:
    event = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium=MEDIUM_GPU,
        lora_name=None,
    )
    annotated = event.with_spec_metadata("full_attention", None)
    assert annotated == dataclasses.replace(event, kv_cache_spec_kind="full_attention")
    assert annotated.with_spec_metadata("full_attention", None) is annotated
    windowed = annotated.with_spec_metadata("sliding_window", 64)
    assert (windowed.kv_cache_spec_kind, windowed.kv_cache_spec_sliding_window) == (
        "sliding_window",
        64,
    )


@given(
    st.sampled_from([8, 16, 32, 64, 7, 12, 0]).flatmap(
        lambda size: st.lists(st.binary(min_size=size, max_size=size), max_size=20)
    )
)
def test_low_64_bits_of_each_is_maybe_convert_block_hash(hashes: list[bytes]) -> None:
    assert low_64_bits_of_each(hashes) == [maybe_convert_block_hash(h) for h in hashes]


def test_low_64_bits_of_each_with_mixed_lengths() -> None:
    hashes = [bytes(range(32)), bytes(range(16)), b"\xff" * 8]
    assert low_64_bits_of_each(hashes) == [maybe_convert_block_hash(h) for h in hashes]


def test_claim_hash_sets_only_a_hashless_block() -> None:
    block = KVCacheBlock(3)
    assert block.claim_hash(b"key", 16)
    assert (block.block_hash, block.block_hash_num_tokens) == (b"key", 16)
    assert not block.claim_hash(b"other", 32)
    assert (block.block_hash, block.block_hash_num_tokens) == (b"key", 16)
    null = KVCacheBlock(0)
    null.is_null = True
    assert not null.claim_hash(b"key", 16)
    assert null.is_null
    assert null.block_hash is None


def _pool_and_request(num_tokens: int) -> tuple[BlockPool, CacheRequest]:
    pool = BlockPool(
        num_gpu_blocks=8, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True
    )
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=4, seed="0", profile=VLLM_0_26
    )
    request = CacheRequest(
        request_id="r",
        hash_request=HashRequest(prompt_token_ids=tuple(range(num_tokens))),
        scheme=scheme,
    )
    return pool, request


def test_cache_full_blocks_skips_the_null_block_and_refuses_a_cached_one() -> None:
    pool, request = _pool_and_request(12)
    blocks = [pool.null_block, *pool.get_new_blocks(2)]
    pool.cache_full_blocks(request, blocks, 0, 3, 4, 0)
    assert pool.null_block.block_hash is None
    assert [b.block_hash for b in blocks[1:]] == [
        request.block_hashes[1] + b"\x00\x00\x00\x00",
        request.block_hashes[2] + b"\x00\x00\x00\x00",
    ]
    stored = pool.take_events()
    assert len(stored) == 1
    assert isinstance(stored[0], BlockStored)
    assert stored[0].block_hashes == tuple(
        maybe_convert_block_hash(h) for h in request.block_hashes[1:3]
    )
    with pytest.raises(CacheStateError):
        pool.cache_full_blocks(request, blocks, 1, 3, 4, 0)


def test_evicting_on_allocation_removes_the_hash_with_its_event() -> None:
    pool, request = _pool_and_request(4)
    (block,) = pool.get_new_blocks(1)
    pool.cache_full_blocks(request, [block], 0, 1, 4, 2)
    pool.take_events()
    pool.free_blocks([block])
    taken = pool.get_new_blocks(pool.get_num_free_blocks())
    assert block in taken
    assert block.block_hash is None
    assert pool.num_cached_hashes == 0
    assert pool.take_events() == [
        BlockRemoved(
            block_hashes=(maybe_convert_block_hash(request.block_hashes[0]),),
            medium=MEDIUM_GPU,
            group_idx=2,
        )
    ]


@pytest.mark.parametrize("bad", [True, -1, 1.0, "7", 2**80 * -1])
def test_trace_token_ids_still_refuse_non_ints(bad: object) -> None:
    golden = json.loads((GOLDEN_026 / "cache_replay" / "eviction_lru.json").read_text())
    trace = golden["trace"]
    arrive = next(op for op in trace["ops"] if op["op"] == "arrive")
    parse_trace(trace)  # as it is: accepted
    arrive["prompt_token_ids"][1] = bad
    with pytest.raises(TraceFieldError, match=r"prompt_token_ids\[1\]"):
        parse_trace(trace)


@given(st.lists(st.tuples(st.sampled_from(["pop", "append", "remove"]), st.integers(0, 9))))
def test_free_block_ids_is_get_all_free_blocks_ids(ops: list[tuple[str, int]]) -> None:
    blocks = [KVCacheBlock(i) for i in range(10)]
    queue = FreeKVCacheBlockQueue(blocks)
    for op, index in ops:
        block = blocks[index]
        if op == "pop" and queue.num_free_blocks:
            queue.popleft()
        elif op == "append" and not block.is_queued:
            queue.append(block)
        elif op == "remove" and block.is_queued:
            queue.remove(block)
        assert queue.free_block_ids() == tuple(b.block_id for b in queue.get_all_free_blocks())


def test_blocks_removed_on_gpu_is_the_constructors_values() -> None:
    pairs: list[tuple[int | bytes, int]] = [(5, 0), (b"\x01" * 16, 3), (2**64 - 1, 2**32 - 1)]
    assert blocks_removed_on_gpu(pairs) == [
        BlockRemoved(block_hashes=(h,), medium=MEDIUM_GPU, group_idx=g) for h, g in pairs
    ]


def test_pop_block_hash_is_block_hash_then_reset_hash() -> None:
    block = KVCacheBlock(1)
    assert block.pop_block_hash() is None
    block.set_block_hash(b"key", 4)
    assert block.pop_block_hash() == b"key"
    assert block.block_hash is None
    null = KVCacheBlock(0)
    null.is_null = True
    assert null.pop_block_hash() is None
    assert null.is_null


@pytest.mark.parametrize("use_int", [True, False])
def test_eviction_events_in_both_hash_forms(use_int: bool) -> None:
    pool = BlockPool(
        num_gpu_blocks=6,
        enable_caching=True,
        hash_block_size=4,
        enable_kv_cache_events=True,
        use_int_block_hashes=use_int,
    )
    _, request = _pool_and_request(12)
    blocks = pool.get_new_blocks(3)
    pool.cache_full_blocks(request, blocks, 0, 3, 4, 0)
    pool.take_events()
    pool.free_blocks(list(reversed(blocks)))
    pool.get_new_blocks(pool.get_num_free_blocks())
    expected = [
        BlockRemoved(
            block_hashes=(maybe_convert_block_hash(h, use_int_block_hashes=use_int),),
            medium=MEDIUM_GPU,
            group_idx=0,
        )
        for h in reversed(request.block_hashes[:3])
    ]
    assert pool.take_events() == expected


def test_allocated_step_is_the_constructors_value() -> None:
    ids = ((1, 2), ())
    fast = allocated_step(3, ids)
    assert fast == StepRecord(num_new_tokens=3, allocated=True, new_block_ids=ids)
    assert repr(fast) == repr(StepRecord(num_new_tokens=3, allocated=True, new_block_ids=ids))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.allocated = False  # type: ignore[misc]  # frozen, as the constructor's value
