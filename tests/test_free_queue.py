"""KVCacheBlock, KVCacheBlockCopy and the free block queue: goldens and unit tests."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from beartype.roar import BeartypeCallHintParamViolation

from kvpure import FreeKVCacheBlockQueue, InvalidFieldError, KVCacheBlock, KVPureError
from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockHashAlreadySetError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    NoFreeBlocksError,
    NotEnoughFreeBlocksError,
)
from kvpure.free_queue import KVCacheBlockCopy
from tests.conftest import GOLDEN_026, GOLDEN_033

# -- the golden trace -----------------------------------------------------------

IDS = r"\[([\d, ]*)\]"


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _replay(trace: list[dict[str, object]]) -> None:
    """Parse each op string of vLLM's trace, apply it, compare order and count."""
    init = re.fullmatch(r"init\((\d+)\.\.(\d+)\)", str(trace[0]["op"]))
    assert init is not None
    blocks = {i: KVCacheBlock(i) for i in range(int(init[1]), int(init[2]) + 1)}
    queue = FreeKVCacheBlockQueue(list(blocks.values()))
    for step in trace:
        op = str(step["op"])
        if op.startswith("init("):
            pass
        elif match := re.fullmatch(r"popleft -> (\d+)", op):
            assert queue.popleft().block_id == int(match[1])
        elif match := re.fullmatch(r"popleft_n\((\d+)\) -> " + IDS, op):
            got = queue.popleft_n(int(match[1]))
            assert [b.block_id for b in got] == _ids(match[2])
        elif match := re.fullmatch(r"remove\((\d+)\)", op):
            queue.remove(blocks[int(match[1])])
        elif match := re.fullmatch(r"append\((\d+)\)", op):
            queue.append(blocks[int(match[1])])
        elif match := re.fullmatch(r"(append_n|prepend_n)\(" + IDS + r"\)", op):
            batch = [blocks[i] for i in _ids(match[2])]
            (queue.append_n if match[1] == "append_n" else queue.prepend_n)(batch)
        elif op == "popleft on empty":
            queue.popleft_n(queue.num_free_blocks)
            with pytest.raises(NoFreeBlocksError) as caught:
                queue.popleft()
            assert str(caught.value) == step["error"]
            assert isinstance(caught.value, ValueError)
            continue
        else:
            pytest.fail(f"unknown op in the golden trace: {op!r}")
        assert [b.block_id for b in queue.get_all_free_blocks()] == step["order"], op
        assert queue.num_free_blocks == step["num_free_blocks"], op


@pytest.mark.parametrize("golden", [GOLDEN_026, GOLDEN_033], ids=["0.26.0", "0.33.0"])
def test_golden_free_queue_trace(golden: Path) -> None:
    trace = json.loads((golden / "block_pool_traces.json").read_text())["free_queue"]
    assert len(trace) == 8
    _replay(trace)


# -- KVCacheBlock ----------------------------------------------------------------


def test_new_block_fields() -> None:
    block = KVCacheBlock(7)
    assert (block.block_id, block.ref_cnt) == (7, 0)
    assert block.block_hash is None
    assert block.block_hash_num_tokens is None
    assert not block.is_null
    assert not block.is_queued
    assert block.prev_free_block is None
    assert block.next_free_block is None


def _hash_state(block: KVCacheBlock) -> tuple[bytes | None, int | None]:
    return block.block_hash, block.block_hash_num_tokens


def test_block_hash_is_set_once_then_reset() -> None:
    block = KVCacheBlock(3)
    block.set_block_hash(b"\x01" * 32, 48)
    assert block.block_hash == b"\x01" * 32
    assert block.block_hash_num_tokens == 48
    with pytest.raises(BlockHashAlreadySetError) as caught:
        block.set_block_hash(b"\x02" * 32, 64)
    assert isinstance(caught.value, ValueError)
    assert caught.value.block_id == 3
    assert "reset_hash()" in str(caught.value)
    assert _hash_state(block) == (b"\x01" * 32, 48)  # unchanged
    block.reset_hash()
    assert _hash_state(block) == (None, None)
    block.set_block_hash(b"\x02" * 32)
    assert _hash_state(block) == (b"\x02" * 32, None)


def test_null_block_flag_survives_reset_and_takes_no_hash() -> None:
    block = KVCacheBlock(0)
    block.is_null = True
    assert block.is_null
    block.reset_hash()
    assert block.is_null
    assert block.block_hash is None
    with pytest.raises(BlockHashAlreadySetError, match="null block"):
        block.set_block_hash(b"h")
    block.is_null = False
    assert not block.is_null
    block.set_block_hash(b"h", 16)
    with pytest.raises(BlockHashAlreadySetError):
        block.is_null = True
    assert not block.is_null
    assert block.block_hash == b"h"


def test_block_equality_is_identity() -> None:
    a, b = KVCacheBlock(1), KVCacheBlock(1)
    assert a == a
    assert a != b
    assert len({a, b, a}) == 2
    assert hash(a) == object.__hash__(a)


def test_block_has_slots_only() -> None:
    block = KVCacheBlock(1)
    assert not hasattr(block, "__dict__")
    with pytest.raises(AttributeError):
        block.not_a_field = 1  # type: ignore[attr-defined]  # the point: slots reject it


def test_repr_is_constant_time_on_a_long_chain() -> None:
    blocks = [KVCacheBlock(i) for i in range(1_000_000)]
    FreeKVCacheBlockQueue(blocks)
    text = repr(blocks[500_000])
    assert text == (
        "KVCacheBlock(block_id=500000, ref_cnt=0, block_hash=None, "
        "block_hash_num_tokens=None, is_null=False, "
        "prev_free_block=499999, next_free_block=500001)"
    )
    assert len(text) < 200


def test_repr_of_a_lone_block() -> None:
    block = KVCacheBlock(2, ref_cnt=1)
    block.set_block_hash(b"ab", 16)
    assert repr(block) == (
        "KVCacheBlock(block_id=2, ref_cnt=1, block_hash=b'ab', "
        "block_hash_num_tokens=16, is_null=False, "
        "prev_free_block=None, next_free_block=None)"
    )


def test_block_rejects_negative_id() -> None:
    with pytest.raises(InvalidFieldError) as caught:
        KVCacheBlock(-1)
    assert caught.value.field == "block_id"


def test_block_copy_is_a_frozen_value() -> None:
    copy = KVCacheBlockCopy(src_block_id=3, dst_block_id=9)
    assert copy == KVCacheBlockCopy(src_block_id=3, dst_block_id=9)
    assert hash(copy) == hash(KVCacheBlockCopy(src_block_id=3, dst_block_id=9))
    with pytest.raises(AttributeError):
        copy.src_block_id = 4  # type: ignore[misc]  # the point: it is frozen
    with pytest.raises(InvalidFieldError):
        KVCacheBlockCopy(src_block_id=-1, dst_block_id=0)
    assert pickle.loads(pickle.dumps(copy)) == copy


def test_beartype_rejects_bad_argument_types() -> None:
    with pytest.raises(BeartypeCallHintParamViolation):
        KVCacheBlock("3")  # type: ignore[arg-type]  # the point: a wrong type
    queue = FreeKVCacheBlockQueue([KVCacheBlock(0)])
    with pytest.raises(BeartypeCallHintParamViolation):
        queue.append(3)  # type: ignore[arg-type]  # the point: a wrong type
    with pytest.raises(BeartypeCallHintParamViolation):
        queue.popleft_n("1")  # type: ignore[arg-type]  # the point: a wrong type
    with pytest.raises(BeartypeCallHintParamViolation):
        KVCacheBlock(1).set_block_hash("not bytes")  # type: ignore[arg-type]  # wrong type


# -- the queue ---------------------------------------------------------------------


def _queue(n: int) -> tuple[list[KVCacheBlock], FreeKVCacheBlockQueue]:
    blocks = [KVCacheBlock(i) for i in range(n)]
    return blocks, FreeKVCacheBlockQueue(blocks)


def _ids_of(queue: FreeKVCacheBlockQueue) -> list[int]:
    return [b.block_id for b in queue.get_all_free_blocks()]


def test_initial_order_is_the_given_order() -> None:
    blocks = [KVCacheBlock(i) for i in (5, 2, 9)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert _ids_of(queue) == [5, 2, 9]
    assert queue.num_free_blocks == 3


def test_empty_queue() -> None:
    queue = FreeKVCacheBlockQueue([])
    assert queue.num_free_blocks == 0
    assert queue.get_all_free_blocks() == []
    assert queue.popleft_n(0) == []
    with pytest.raises(NoFreeBlocksError):
        queue.popleft()
    block = KVCacheBlock(4)
    queue.append(block)
    assert queue.popleft() is block


def test_prepend_n_keeps_the_batch_order_in_front() -> None:
    _blocks, queue = _queue(4)
    taken = queue.popleft_n(2)  # [0, 1]; queue is [2, 3]
    queue.prepend_n([taken[1], taken[0]])
    assert _ids_of(queue) == [1, 0, 2, 3]


def test_pool_free_order_puts_the_chain_tail_first() -> None:
    """The reference's pool scenario: 1-4 allocated, 1-3 cached, freed reversed."""
    _blocks, queue = _queue(10)
    queue.popleft()  # the null block, 0
    allocated = queue.popleft_n(4)
    reversed_blocks = allocated[::-1]
    queue.prepend_n([b for b in reversed_blocks if b.block_id == 4])  # no hash
    queue.append_n([b for b in reversed_blocks if b.block_id != 4])  # cached
    assert _ids_of(queue) == [4, 5, 6, 7, 8, 9, 3, 2, 1]


def test_popleft_n_errors_leave_queue_alone() -> None:
    _blocks, queue = _queue(3)
    with pytest.raises(NotEnoughFreeBlocksError) as caught:
        queue.popleft_n(4)
    assert isinstance(caught.value, ValueError)
    assert (caught.value.num_requested, caught.value.num_free_blocks) == (4, 3)
    assert "only 3 free blocks" in str(caught.value)
    with pytest.raises(InvalidFieldError):
        queue.popleft_n(-1)
    assert _ids_of(queue) == [0, 1, 2]


def test_remove_errors() -> None:
    blocks, queue = _queue(3)
    _, other = _queue(2)
    other_block = other.get_all_free_blocks()[0]
    lone = KVCacheBlock(10)
    with pytest.raises(BlockNotQueuedError, match=r"remove\(\) called on block 10") as caught:
        queue.remove(lone)
    assert isinstance(caught.value, RuntimeError)
    with pytest.raises(BlockInOtherQueueError):
        queue.remove(other_block)
    sentinel = blocks[0].prev_free_block
    assert sentinel is not None
    with pytest.raises(BlockInOtherQueueError, match="sentinel"):
        queue.remove(sentinel)
    with pytest.raises(BlockInOtherQueueError, match="sentinel"):
        queue.append(sentinel)
    assert _ids_of(queue) == [0, 1, 2]
    assert [b.block_id for b in other.get_all_free_blocks()] == [0, 1]


@pytest.mark.parametrize("method", ["append_n", "prepend_n"])
def test_batch_with_a_duplicate_changes_nothing(method: str) -> None:
    blocks, queue = _queue(6)
    taken = queue.popleft_n(3)
    add: Callable[[list[KVCacheBlock]], None] = getattr(queue, method)
    with pytest.raises(BlockAlreadyQueuedError, match="twice") as caught:
        add([taken[0], taken[1], taken[0]])
    assert caught.value.block_id == 0
    assert _ids_of(queue) == [3, 4, 5]
    assert all(not b.is_queued and b.prev_free_block is None for b in taken)
    with pytest.raises(BlockAlreadyQueuedError, match="already is in this"):
        add([taken[2], blocks[4]])
    assert _ids_of(queue) == [3, 4, 5]
    add(taken)
    assert queue.num_free_blocks == 6


def test_constructor_rejects_duplicates() -> None:
    block = KVCacheBlock(1)
    with pytest.raises(BlockAlreadyQueuedError, match="twice"):
        FreeKVCacheBlockQueue([KVCacheBlock(0), block, block])
    assert not block.is_queued
    assert block.prev_free_block is None


def test_iter_blocks_after() -> None:
    blocks, queue = _queue(5)
    assert [b.block_id for b in queue.iter_blocks_after(None)] == [0, 1, 2, 3, 4]
    assert [b.block_id for b in queue.iter_blocks_after(blocks[2])] == [3, 4]
    assert list(queue.iter_blocks_after(blocks[4])) == []


# -- errors pickle ------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        NoFreeBlocksError(),
        NotEnoughFreeBlocksError(num_requested=5, num_free_blocks=2),
        BlockNotQueuedError(operation="remove", block_id=3, reason="not queued"),
        BlockAlreadyQueuedError(operation="append", block_id=4, reason="queued"),
        BlockInOtherQueueError(operation="remove", block_id=5, reason="other"),
        BlockHashAlreadySetError(block_id=6, reason="has a hash"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_pickle(error: KVPureError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.__dict__ == error.__dict__


def test_vllm_sentinel_names() -> None:
    blocks, queue = _queue(3)
    head, tail = queue.fake_free_list_head, queue.fake_free_list_tail
    assert head.block_id == tail.block_id == -1
    assert head.next_free_block is blocks[0]
    assert tail.prev_free_block is blocks[2]
    assert blocks[0].prev_free_block is head
    assert blocks[2].next_free_block is tail
    empty = FreeKVCacheBlockQueue([])
    assert empty.fake_free_list_head.next_free_block is empty.fake_free_list_tail
