"""Free-queue edges that the goldens do not reach: the sentinel, popleft_n(0), and misuse.

vLLM's ``FreeKVCacheBlockQueue`` (vllm/v1/core/kv_cache_utils.py, 0.26.0) builds its
fake head and tail as ``KVCacheBlock(block_id=-1)`` (ref count 0, no hash) and
returns ``[]`` from ``popleft_n(0)`` without touching the queue. Misuse is kvpure's
own: each error names the operation and the reason, and leaves the queue and every
block as they were (the README's promise), which is checked link by link here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kvpure import FreeKVCacheBlockQueue, KVCacheBlock
from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    NotABlockError,
)


def _queue(n: int) -> tuple[FreeKVCacheBlockQueue, list[KVCacheBlock]]:
    blocks = [KVCacheBlock(i) for i in range(n)]
    return FreeKVCacheBlockQueue(blocks), blocks


def _walk_back(queue: FreeKVCacheBlockQueue) -> list[int]:
    """Block ids from the back to the front, by the ``prev_free_block`` links."""
    root = queue.fake_free_list_tail
    ids: list[int] = []
    block = root.prev_free_block
    while block is not None and block is not root:
        ids.append(block.block_id)
        block = block.prev_free_block
    return ids


def _assert_intact(queue: FreeKVCacheBlockQueue, ids: list[int]) -> None:
    assert [b.block_id for b in queue.get_all_free_blocks()] == ids
    assert _walk_back(queue) == ids[::-1]
    assert queue.num_free_blocks == len(ids)


def test_the_sentinel_is_vllms_fake_head() -> None:
    queue, _ = _queue(2)
    head = queue.fake_free_list_head
    assert head is queue.fake_free_list_tail
    assert (head.block_id, head.ref_cnt, head.block_hash) == (-1, 0, None)
    empty = FreeKVCacheBlockQueue([])
    root = empty.fake_free_list_head
    assert root.next_free_block is root
    assert root.prev_free_block is root
    assert empty.get_all_free_blocks() == []


def test_popleft_n_zero_takes_nothing() -> None:
    queue, _ = _queue(3)
    assert queue.popleft_n(0) == []
    _assert_intact(queue, [0, 1, 2])
    empty = FreeKVCacheBlockQueue([])
    assert empty.popleft_n(0) == []


def test_repr_counts_the_free_blocks() -> None:
    queue, _ = _queue(3)
    queue.popleft()
    assert repr(queue) == "FreeKVCacheBlockQueue(num_free_blocks=2)"


@pytest.mark.parametrize("operation", ["append_n", "prepend_n"])
def test_a_non_block_in_a_generator_batch_leaves_everything_as_it_was(operation: str) -> None:
    queue, blocks = _queue(4)
    queue.remove(blocks[1])
    queue.remove(blocks[2])
    fresh = [blocks[1], blocks[2]]

    def batch() -> Iterator[object]:
        yield from fresh
        yield "not a block"

    with pytest.raises(NotABlockError) as caught:
        getattr(queue, operation)(batch())
    assert caught.value.operation == operation
    assert caught.value.item == "not a block"
    assert operation in str(caught.value)
    _assert_intact(queue, [0, 3])
    for block in fresh:
        assert (block.prev_free_block, block.next_free_block, block.is_queued) == (
            None,
            None,
            False,
        )
    queue.append_n(fresh)
    _assert_intact(queue, [0, 3, 1, 2])


def test_a_generator_in_the_constructor_names_the_constructor() -> None:
    blocks = [KVCacheBlock(0)]

    def items() -> Iterator[object]:
        yield blocks[0]
        yield 7

    with pytest.raises(NotABlockError) as caught:
        FreeKVCacheBlockQueue(items())  # type: ignore[arg-type]  # the misuse under test
    assert caught.value.operation == "FreeKVCacheBlockQueue"
    assert not blocks[0].is_queued
    FreeKVCacheBlockQueue(blocks)


@pytest.mark.parametrize("operation", ["append_n", "prepend_n"])
def test_a_block_twice_in_a_batch_is_refused_and_undone(operation: str) -> None:
    queue, blocks = _queue(3)
    queue.remove(blocks[0])
    with pytest.raises(BlockAlreadyQueuedError) as caught:
        getattr(queue, operation)([blocks[0], blocks[0]])
    assert caught.value.operation == operation
    assert caught.value.reason == "it appears twice in the batch; pass each block once"
    _assert_intact(queue, [1, 2])
    assert not blocks[0].is_queued


def test_each_misuse_says_why() -> None:
    queue, blocks = _queue(2)
    other, other_blocks = _queue(1)
    with pytest.raises(BlockInOtherQueueError) as sentinel:
        queue.remove(other.fake_free_list_head)
    assert sentinel.value.reason == "it is the sentinel of a free block queue, not a KV-cache block"
    popped = queue.popleft()
    with pytest.raises(BlockNotQueuedError) as unqueued:
        queue.remove(popped)
    assert unqueued.value.reason == (
        f"it is not in the free block queue (ref_cnt={popped.ref_cnt}); "
        "only free blocks can be removed"
    )
    with pytest.raises(BlockInOtherQueueError) as foreign:
        queue.remove(other_blocks[0])
    assert foreign.value.reason == (
        "it is in a different free block queue; remove it from that queue first"
    )
    with pytest.raises(BlockAlreadyQueuedError) as twice:
        queue.append(blocks[1])
    assert twice.value.reason == "it already is in this free block queue; remove or pop it first"
    _assert_intact(queue, [1])
    _assert_intact(other, [0])
