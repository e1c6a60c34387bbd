"""The free queue's C batch helper against the pure-Python methods it stands in for.

``kvpure._queue_links`` runs ``popleft_n`` and the batch links where it is
built; the pure-Python methods stay the reference. These tests run the
model-based state machine on the pure path too, compare both paths operation
by operation on random scripts, check that every input the helper does not
handle leaves things unchanged and reaches the typed error, and that no
reference is leaked or lost.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis.stateful import run_state_machine_as_test

import kvpure.free_queue as free_queue
from kvpure.errors import BlockAlreadyQueuedError, BlockInOtherQueueError
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock
from tests.test_free_queue_model import QueueMachine

BUILT = free_queue._BUILT is not None
needs_helper = pytest.mark.skipif(not BUILT, reason="kvpure._queue_links is not built")


@pytest.fixture
def pure_path() -> Iterator[None]:
    free_queue.set_accelerated(False)
    try:
        yield
    finally:
        free_queue.set_accelerated(True)


def test_the_switch_says_which_path_runs() -> None:
    assert free_queue.set_accelerated(False) is False
    assert not free_queue.accelerated()
    assert free_queue.set_accelerated(True) is BUILT
    assert free_queue.accelerated() is BUILT


def test_state_machine_on_the_pure_path(pure_path: None) -> None:
    run_state_machine_as_test(QueueMachine)


def _state(queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock]) -> object:
    def link(block: KVCacheBlock | None) -> int | None:
        return None if block is None else block.block_id

    return (
        queue.num_free_blocks,
        [b.block_id for b in queue.get_all_free_blocks()],
        [(link(b.prev_free_block), link(b.next_free_block), b.is_queued) for b in blocks],
    )


def _script(seed: int, accelerated: bool) -> list[object]:
    """One random script of batch operations; the state after each step."""
    free_queue.set_accelerated(accelerated)
    try:
        rng = random.Random(seed)
        blocks = [KVCacheBlock(i) for i in range(40)]
        queue = FreeKVCacheBlockQueue(blocks[:30])
        held = blocks[30:]
        states: list[object] = [_state(queue, blocks)]
        for _ in range(60):
            step = rng.randrange(4)
            if step == 0:
                n = rng.randrange(queue.num_free_blocks + 1)
                taken = queue.popleft_n(n)
                held.extend(taken)
                states.append([b.block_id for b in taken])
            elif held:
                k = rng.randrange(len(held) + 1)
                batch, held = held[:k], held[k:]
                rng.shuffle(batch)
                if step == 1:
                    queue.append_n(batch)
                elif step == 2:
                    queue.prepend_n(tuple(batch))
                else:
                    queue.append_n(iter(batch))
            states.append(_state(queue, blocks))
        return states
    finally:
        free_queue.set_accelerated(True)


@needs_helper
@pytest.mark.parametrize("seed", range(12))
def test_helper_and_pure_path_agree_step_by_step(seed: int) -> None:
    assert _script(seed, accelerated=True) == _script(seed, accelerated=False)


@needs_helper
def test_a_block_twice_in_a_batch_changes_nothing_and_is_named() -> None:
    blocks = [KVCacheBlock(i) for i in range(4)]
    queue = FreeKVCacheBlockQueue(blocks[:2])
    before = _state(queue, blocks)
    with pytest.raises(BlockAlreadyQueuedError):
        queue.append_n([blocks[2], blocks[3], blocks[2]])
    assert _state(queue, blocks) == before


@needs_helper
def test_a_block_of_another_queue_changes_nothing() -> None:
    blocks = [KVCacheBlock(i) for i in range(4)]
    queue = FreeKVCacheBlockQueue(blocks[:2])
    FreeKVCacheBlockQueue(blocks[3:])
    before = _state(queue, blocks)
    with pytest.raises(BlockInOtherQueueError):
        queue.prepend_n([blocks[2], blocks[3]])
    assert _state(queue, blocks) == before


_CLEAN_PROCESS_CHECKS = """
import sys
import kvpure.free_queue as free_queue
from kvpure.errors import KVPureTypeError, NotABlockError
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock

def state(queue, blocks):
    return (queue.num_free_blocks, [b.block_id for b in queue.get_all_free_blocks()],
            [(b.prev_free_block, b.next_free_block, b.is_queued) for b in blocks])

for accelerated in (True, False):
    free_queue.set_accelerated(accelerated)
    blocks = [KVCacheBlock(i) for i in range(4)]
    queue = FreeKVCacheBlockQueue(blocks[:2])
    for bad in (3, None, "block", object()):
        before = state(queue, blocks)
        try:
            queue.append_n([blocks[2], bad, blocks[3]])
        except NotABlockError:
            pass
        assert state(queue, blocks) == before, bad
    for bad in (True, 1.0, "1", None):
        try:
            queue.popleft_n(bad)
        except KVPureTypeError:
            pass
        else:
            raise SystemExit(f"popleft_n({bad!r}) accepted")
        assert queue.num_free_blocks == 2

    blocks = [KVCacheBlock(i) for i in range(300)]
    queue = FreeKVCacheBlockQueue(blocks)
    counts = [sys.getrefcount(b) for b in blocks]
    root_count = sys.getrefcount(queue.fake_free_list_head)
    for _ in range(3):
        taken = queue.popleft_n(300)  # past the helper's small buffer
        queue.append_n(taken)
        del taken
        small = queue.popleft_n(5)
        queue.prepend_n(small[::-1])
        del small
    assert [sys.getrefcount(b) for b in blocks] == counts, "a block reference leaked or was lost"
    assert sys.getrefcount(queue.fake_free_list_head) == root_count, "the sentinel's count moved"
print("ok")
"""


def test_non_blocks_bad_counts_and_reference_counts_in_a_clean_process() -> None:
    """Without the suite's beartype hook (which checks before kvpure does and keeps
    references of its own): non-blocks change nothing and are NotABlockError, a bool or
    float count is KVPureTypeError, and no reference is leaked or lost, on both paths."""
    done = subprocess.run(
        [sys.executable, "-c", _CLEAN_PROCESS_CHECKS],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


class _SubBlock(KVCacheBlock):
    __slots__ = ()


@needs_helper
def test_a_block_subclass_takes_the_pure_path_with_the_same_result() -> None:
    blocks = [KVCacheBlock(0), _SubBlock(1), KVCacheBlock(2)]
    queue = FreeKVCacheBlockQueue(blocks)
    assert [b.block_id for b in queue.popleft_n(3)] == [0, 1, 2]
    queue.append_n(blocks[::-1])
    assert [b.block_id for b in queue.get_all_free_blocks()] == [2, 1, 0]
