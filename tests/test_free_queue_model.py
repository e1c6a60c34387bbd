"""The free block queue against a plain-list model, with every misuse.

A hypothesis state machine drives two queues over one set of blocks (so that
blocks of "another queue" exist) and mirrors each in a Python list. After each
step it walks the links both ways, checks the count and checks that blocks
outside a queue carry no links. Misuse steps assert the typed error and that
nothing changed.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvpure import FreeBlockQueueMisuseError, FreeKVCacheBlockQueue, KVCacheBlock
from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    NoFreeBlocksError,
    NotEnoughFreeBlocksError,
)

NUM_BLOCKS = 24

Snapshot = tuple[tuple[int, ...], ...]


def walk_forward(queue: FreeKVCacheBlockQueue) -> list[KVCacheBlock]:
    """The blocks from the front, following next links from the first block."""
    found = queue.get_all_free_blocks()
    if not found:
        return found
    walked = [found[0]]
    while len(walked) <= NUM_BLOCKS:
        following = walked[-1].next_free_block
        if following is None or following.block_id < 0:
            break
        walked.append(following)
    return walked


def walk_backward(queue: FreeKVCacheBlockQueue) -> list[KVCacheBlock]:
    """The blocks from the back, following prev links, reversed."""
    found = queue.get_all_free_blocks()
    if not found:
        return found
    walked = [found[-1]]
    while len(walked) <= NUM_BLOCKS:
        before = walked[-1].prev_free_block
        if before is None or before.block_id < 0:
            break
        walked.append(before)
    walked.reverse()
    return walked


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = [KVCacheBlock(i) for i in range(NUM_BLOCKS)]
        # queue 0 starts with the even blocks, queue 1 with the first three odd ones
        self.models: list[list[KVCacheBlock]] = [
            self.blocks[0::2],
            self.blocks[1:7:2],
        ]
        self.queues = [FreeKVCacheBlockQueue(list(model)) for model in self.models]

    # -- helpers ---------------------------------------------------------------

    def _owner(self, block: KVCacheBlock) -> int | None:
        for index, model in enumerate(self.models):
            if any(item is block for item in model):
                return index
        return None

    def _outside(self) -> list[KVCacheBlock]:
        return [b for b in self.blocks if self._owner(b) is None]

    def _snapshot(self) -> Snapshot:
        rows = [tuple(b.block_id for b in q.get_all_free_blocks()) for q in self.queues]
        rows += [(q.num_free_blocks,) for q in self.queues]
        for b in self.blocks:
            prev_id = -2 if b.prev_free_block is None else b.prev_free_block.block_id
            next_id = -2 if b.next_free_block is None else b.next_free_block.block_id
            rows.append((prev_id, next_id, int(b.is_queued)))
        return tuple(rows)

    # -- valid operations --------------------------------------------------------

    @rule(which=st.integers(0, 1))
    def popleft(self, which: int) -> None:
        queue, model = self.queues[which], self.models[which]
        if not model:
            before = self._snapshot()
            with pytest.raises(NoFreeBlocksError, match=r"^No free blocks available$"):
                queue.popleft()
            assert self._snapshot() == before
            return
        assert queue.popleft() is model.pop(0)

    @rule(which=st.integers(0, 1), data=st.data())
    def popleft_n(self, which: int, data: st.DataObject) -> None:
        queue, model = self.queues[which], self.models[which]
        n = data.draw(st.integers(0, len(model)))
        taken = queue.popleft_n(n)
        expected = model[:n]
        del model[:n]
        assert len(taken) == len(expected)
        assert all(a is b for a, b in zip(taken, expected, strict=True))

    @rule(which=st.integers(0, 1), data=st.data())
    def remove(self, which: int, data: st.DataObject) -> None:
        model = self.models[which]
        if not model:
            return
        block = data.draw(st.sampled_from(model))
        self.queues[which].remove(block)
        model.remove(block)

    @rule(which=st.integers(0, 1), data=st.data())
    def append(self, which: int, data: st.DataObject) -> None:
        outside = self._outside()
        if not outside:
            return
        block = data.draw(st.sampled_from(outside))
        self.queues[which].append(block)
        self.models[which].append(block)

    @rule(which=st.integers(0, 1), data=st.data(), front=st.booleans())
    def add_n(self, which: int, data: st.DataObject, front: bool) -> None:
        outside = self._outside()
        shuffled = data.draw(st.permutations(outside))
        batch = shuffled[: data.draw(st.integers(0, len(shuffled)))]
        model = self.models[which]
        if front:
            self.queues[which].prepend_n(batch)
            model[:0] = batch
        else:
            self.queues[which].append_n(batch)
            model.extend(batch)

    @rule(which=st.integers(0, 1), data=st.data())
    def iter_blocks_after(self, which: int, data: st.DataObject) -> None:
        model = self.models[which]
        choices: list[KVCacheBlock | None] = [None, *model]
        cursor = data.draw(st.sampled_from(choices))
        start = 0 if cursor is None else next(i for i, b in enumerate(model) if b is cursor) + 1
        got = list(self.queues[which].iter_blocks_after(cursor))
        assert [b.block_id for b in got] == [b.block_id for b in model[start:]]

    @rule(which=st.integers(0, 1), data=st.data())
    def iter_after_unqueued_cursor(self, which: int, data: st.DataObject) -> None:
        outside = self._outside()
        if outside:
            cursor = data.draw(st.sampled_from(outside))
            assert list(self.queues[which].iter_blocks_after(cursor)) == []  # as vLLM

    # -- misuse: typed error and nothing changed ----------------------------------

    @rule(which=st.integers(0, 1), extra=st.integers(1, 3))
    def misuse_popleft_n_too_many(self, which: int, extra: int) -> None:
        before = self._snapshot()
        n = len(self.models[which]) + extra
        with pytest.raises(NotEnoughFreeBlocksError) as caught:
            self.queues[which].popleft_n(n)
        assert caught.value.num_requested == n
        assert caught.value.num_free_blocks == len(self.models[which])
        assert self._snapshot() == before

    @rule(which=st.integers(0, 1), data=st.data())
    def misuse_remove(self, which: int, data: st.DataObject) -> None:
        block = data.draw(st.sampled_from(self.blocks))
        owner = self._owner(block)
        if owner == which:
            return
        expected = BlockNotQueuedError if owner is None else BlockInOtherQueueError
        before = self._snapshot()
        with pytest.raises(expected) as caught:
            self.queues[which].remove(block)
        assert isinstance(caught.value, RuntimeError)
        assert caught.value.block_id == block.block_id
        assert self._snapshot() == before

    @rule(which=st.integers(0, 1), data=st.data())
    def misuse_append_queued(self, which: int, data: st.DataObject) -> None:
        queued = [b for b in self.blocks if self._owner(b) is not None]
        if not queued:
            return
        block = data.draw(st.sampled_from(queued))
        expected = (
            BlockAlreadyQueuedError if self._owner(block) == which else BlockInOtherQueueError
        )
        before = self._snapshot()
        with pytest.raises(expected):
            self.queues[which].append(block)
        assert self._snapshot() == before

    @rule(which=st.integers(0, 1), data=st.data(), front=st.booleans(), dup=st.booleans())
    def misuse_add_n(self, which: int, data: st.DataObject, front: bool, dup: bool) -> None:
        """A batch of good blocks with one bad block (queued, or a duplicate) somewhere."""
        outside = self._outside()
        good = data.draw(st.permutations(outside))[: data.draw(st.integers(0, len(outside)))]
        if dup:
            if not good:
                return
            bad = data.draw(st.sampled_from(good))
            expected: type[FreeBlockQueueMisuseError] = BlockAlreadyQueuedError
        else:
            queued = [b for b in self.blocks if self._owner(b) is not None]
            if not queued:
                return
            bad = data.draw(st.sampled_from(queued))
            expected = (
                BlockAlreadyQueuedError if self._owner(bad) == which else BlockInOtherQueueError
            )
        at = data.draw(st.integers(0, len(good)))
        batch = [*good[:at], bad, *good[at:]]
        before = self._snapshot()
        operation = self.queues[which].prepend_n if front else self.queues[which].append_n
        with pytest.raises(expected) as caught:
            operation(batch)
        assert caught.value.block_id == bad.block_id
        assert self._snapshot() == before

    @rule(data=st.data())
    def misuse_new_queue_with_queued_block(self, data: st.DataObject) -> None:
        queued = [b for b in self.blocks if self._owner(b) is not None]
        if not queued:
            return
        bad = data.draw(st.sampled_from(queued))
        before = self._snapshot()
        with pytest.raises(BlockInOtherQueueError):
            FreeKVCacheBlockQueue([*self._outside(), bad])
        assert self._snapshot() == before

    @precondition(lambda self: bool(self.models[0]))
    @rule()
    def misuse_iter_cursor_of_other_queue(self) -> None:
        cursor = self.models[0][0]
        with pytest.raises(BlockInOtherQueueError):
            list(self.queues[1].iter_blocks_after(cursor))

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def same_as_model(self) -> None:
        for queue, model in zip(self.queues, self.models, strict=True):
            ids = [b.block_id for b in model]
            assert queue.num_free_blocks == len(model)
            assert [b.block_id for b in queue.get_all_free_blocks()] == ids
            assert [b.block_id for b in walk_forward(queue)] == ids
            assert [b.block_id for b in walk_backward(queue)] == ids
            assert [b.block_id for b in queue.iter_blocks_after(None)] == ids

    @invariant()
    def links_and_flags(self) -> None:
        for block in self.blocks:
            owner = self._owner(block)
            assert block.is_queued == (owner is not None)
            if owner is None:
                assert block.prev_free_block is None
                assert block.next_free_block is None
            else:
                assert block.prev_free_block is not None
                assert block.next_free_block is not None
                assert block.prev_free_block.next_free_block is block
                assert block.next_free_block.prev_free_block is block


TestQueueMachine = QueueMachine.TestCase
