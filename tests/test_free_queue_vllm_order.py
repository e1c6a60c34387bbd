"""Side by side with vLLM's algorithm: the same order after every valid step.

The oracle is the benchmark's BASELINE (vLLM's FreeKVCacheBlockQueue algorithm
with fake head and tail, written anew), driven with the same random valid
operations as kvpure's queue.
"""

from __future__ import annotations

from bench.bench_free_queue import BaselineBlock, BaselineQueue
from hypothesis import given
from hypothesis import strategies as st

from kvpure import FreeKVCacheBlockQueue, KVCacheBlock

NUM_BLOCKS = 16

# (operation, a number used to pick n or blocks)
steps = st.lists(
    st.tuples(
        st.sampled_from(["popleft", "popleft_n", "remove", "append", "append_n", "prepend_n"]),
        st.integers(0, 1_000),
    ),
    max_size=60,
)


def _pick(pool: list[int], seed: int, count: int) -> list[int]:
    """``count`` ids from ``pool``, in an order fixed by ``seed``."""
    remaining = list(pool)
    chosen = []
    for k in range(count):
        chosen.append(remaining.pop((seed + 7 * k) % len(remaining)))
    return chosen


@given(steps)
def test_same_order_as_vllm_after_every_step(ops: list[tuple[str, int]]) -> None:
    ours_blocks = [KVCacheBlock(i) for i in range(NUM_BLOCKS)]
    their_blocks = [BaselineBlock(i) for i in range(NUM_BLOCKS)]
    ours = FreeKVCacheBlockQueue(ours_blocks)
    theirs = BaselineQueue(their_blocks)
    free = list(range(NUM_BLOCKS))  # ids in the queues, as vLLM orders them
    for op, seed in ops:
        outside = [i for i in range(NUM_BLOCKS) if i not in free]
        if op == "popleft" and free:
            assert ours.popleft().block_id == theirs.popleft().block_id
        elif op == "popleft_n":
            n = seed % (len(free) + 1)
            got = [b.block_id for b in ours.popleft_n(n)]
            assert got == [b.block_id for b in theirs.popleft_n(n)]
        elif op == "remove" and free:
            (victim,) = _pick(free, seed, 1)
            ours.remove(ours_blocks[victim])
            theirs.remove(their_blocks[victim])
        elif op == "append" and outside:
            (back,) = _pick(outside, seed, 1)
            ours.append(ours_blocks[back])
            theirs.append(their_blocks[back])
        elif op in ("append_n", "prepend_n"):
            batch = _pick(outside, seed, seed % (len(outside) + 1))
            if op == "append_n":
                ours.append_n([ours_blocks[i] for i in batch])
                theirs.append_n([their_blocks[i] for i in batch])
            else:
                ours.prepend_n([ours_blocks[i] for i in batch])
                prepend_vllm(theirs, [their_blocks[i] for i in batch])
        free = [b.block_id for b in theirs.get_all_free_blocks()]
        assert [b.block_id for b in ours.get_all_free_blocks()] == free
        assert ours.num_free_blocks == theirs.num_free_blocks == len(free)


def prepend_vllm(queue: BaselineQueue, blocks: list[BaselineBlock]) -> None:
    """vLLM's prepend_n (the benchmark has no need of it, so it lives here)."""
    if not blocks:
        return
    first = queue.fake_free_list_head.next_free_block
    assert first is not None
    prev = queue.fake_free_list_head
    for block in blocks:
        block.prev_free_block = prev
        prev.next_free_block = block
        prev = block
    prev.next_free_block = first
    first.prev_free_block = prev
    queue.num_free_blocks += len(blocks)
