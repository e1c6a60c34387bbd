"""Benchmark: kvpure's free block queue against vLLM's own (the BASELINE).

BASELINE: vLLM's ``KVCacheBlock`` and ``FreeKVCacheBlockQueue``, imported
from an installed vLLM, else compiled unchanged from a vLLM release's own
source file (``bench_free_queue_vllm.py``: $KVPURE_VLLM_SOURCE, default
/work/vllm/0.26.0), else the copy below, written anew: vLLM's own algorithm. Blocks are
``@dataclass(slots=True)`` objects with intrusive ``prev_free_block`` /
``next_free_block`` links, and the queue has a fake head and a fake tail
sentinel block (block_id -1). Its checks are vLLM's (None checks and asserts);
it does not detect double appends or blocks of another queue.

kvpure: ``kvpure.free_queue`` (a one-sentinel ring, an owner slot per block,
every misuse detected), with its C batch helper (``kvpure._queue_links``)
where built, and again on its pure-Python path (the "pure" column).

Each line prints the kvpure figure, the baseline figure and kvpure/baseline:
for operations that is the time ratio (ops/s are printed; ratio = baseline
ops/s / kvpure ops/s, <= 1.0 means kvpure is at least as fast), for builds the
time or the traced memory. Times are the process's CPU time (so other jobs on
a shared machine count less), with the garbage collector off in timed sections
as ``timeit`` does; each figure is the best of 7 rounds (2 for 10M
blocks), the two implementations taking turns so both see the same load.

Run: ``python -m bench.bench_free_queue`` (``--quick`` for a smaller run).
"""

from __future__ import annotations

import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import kvpure.free_queue as free_queue
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock

if __package__ in (None, ""):  # run as a script (make bench): the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_free_queue_vllm import load_vllm_queues  # after the path fix

# ---------------------------------------------------------------------------
# BASELINE: vLLM's block and queue algorithm (0.26.0), written anew
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class BaselineBlock:
    """vLLM's KVCacheBlock layout: seven fields, links owned by the queue."""

    block_id: int
    ref_cnt: int = 0
    _block_hash: bytes | None = None
    _block_hash_num_tokens: int | None = None
    prev_free_block: BaselineBlock | None = None
    next_free_block: BaselineBlock | None = None
    is_null: bool = False


class BaselineQueue:
    """vLLM's FreeKVCacheBlockQueue algorithm: fake head and tail, same checks."""

    def __init__(self, blocks: list[BaselineBlock]) -> None:
        self.num_free_blocks = len(blocks)
        for i in range(self.num_free_blocks):
            if i > 0:
                blocks[i].prev_free_block = blocks[i - 1]
            if i < self.num_free_blocks - 1:
                blocks[i].next_free_block = blocks[i + 1]
        self.fake_free_list_head = BaselineBlock(block_id=-1)
        self.fake_free_list_tail = BaselineBlock(block_id=-1)
        if self.num_free_blocks > 0:
            self.fake_free_list_head.next_free_block = blocks[0]
            blocks[0].prev_free_block = self.fake_free_list_head
            self.fake_free_list_tail.prev_free_block = blocks[-1]
            blocks[-1].next_free_block = self.fake_free_list_tail
        else:
            self.fake_free_list_head.next_free_block = self.fake_free_list_tail
            self.fake_free_list_tail.prev_free_block = self.fake_free_list_head

    def popleft(self) -> BaselineBlock:
        if (
            self.fake_free_list_head.next_free_block is self.fake_free_list_tail
            or self.fake_free_list_head.next_free_block is None
        ):
            assert self.num_free_blocks == 0
            raise ValueError("No free blocks available")
        first: BaselineBlock = self.fake_free_list_head.next_free_block
        if first.next_free_block is None:
            raise RuntimeError("Invalid block found in popleft()")
        self.fake_free_list_head.next_free_block = first.next_free_block
        first.next_free_block.prev_free_block = self.fake_free_list_head
        first.prev_free_block = first.next_free_block = None
        self.num_free_blocks -= 1
        return first

    def popleft_n(self, n: int) -> list[BaselineBlock]:
        if n == 0:
            return []
        assert self.num_free_blocks >= n
        self.num_free_blocks -= n
        curr = self.fake_free_list_head.next_free_block
        ret = []
        for _ in range(n):
            assert curr is not None
            ret.append(curr)
            last = curr
            curr = curr.next_free_block
            last.prev_free_block = None
            last.next_free_block = None
        if curr is not None:
            self.fake_free_list_head.next_free_block = curr
            curr.prev_free_block = self.fake_free_list_head
        return ret

    def remove(self, block: BaselineBlock) -> None:
        if block.prev_free_block is None or block.next_free_block is None:
            raise RuntimeError(f"remove() called on an invalid block: {block.block_id}")
        block.prev_free_block.next_free_block = block.next_free_block
        block.next_free_block.prev_free_block = block.prev_free_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: BaselineBlock) -> None:
        if self.fake_free_list_tail.prev_free_block is None:
            raise RuntimeError("prev_free_block of fake_free_list_tail should always exist")
        last: BaselineBlock = self.fake_free_list_tail.prev_free_block
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = block
        self.num_free_blocks += 1

    def append_n(self, blocks: list[BaselineBlock]) -> None:
        if len(blocks) == 0:
            return
        last = self.fake_free_list_tail.prev_free_block
        assert last is not None
        for block in blocks:
            block.prev_free_block = last
            last.next_free_block = block
            last = block
        last.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = last
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[BaselineBlock]:
        ret = []
        curr = self.fake_free_list_head.next_free_block
        assert curr is not None
        while curr.next_free_block is not None:
            ret.append(curr)
            curr = curr.next_free_block
        return ret


# ---------------------------------------------------------------------------
# The runs: the same script drives both implementations
# ---------------------------------------------------------------------------

QUEUE_BLOCKS = 1_000_000
BATCH = 64
ROUNDS = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class Impl:
    name: str
    block: Callable[[int], Any]
    queue: Callable[[list[Any]], Any]
    accelerated: bool = True


def _baseline() -> tuple[str, Impl]:
    return _baselines()[0]


def _baselines() -> list[tuple[str, Impl]]:
    """vLLM 0.26's classes (imported or compiled from source), then 0.34's where present;
    the copy above when neither is found."""
    found = load_vllm_queues()
    if not found:
        label = "vLLM's algorithm written anew on dataclass(slots) blocks (vLLM not found)"
        return [(label, Impl(name="baseline", block=BaselineBlock, queue=BaselineQueue))]
    return [
        (
            label,
            Impl(
                name="baseline" if i == 0 else f"vLLM {label.split()[1]}", block=block, queue=queue
            ),
        )
        for i, (label, block, queue) in enumerate(found)
    ]


KVPURE = Impl(name="kvpure", block=KVCacheBlock, queue=FreeKVCacheBlockQueue)
KVPURE_PURE = Impl(
    name="kvpure-pure", block=KVCacheBlock, queue=FreeKVCacheBlockQueue, accelerated=False
)


def _timed(run: Callable[[], object]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        run()
        return time.process_time() - start
    finally:
        gc.enable()


def _fresh(impl: Impl, n: int) -> tuple[list[Any], Any]:
    blocks = [impl.block(i) for i in range(n)]
    return blocks, impl.queue(blocks)


def bench_ops(impl: Impl, n: int, best: dict[str, float]) -> None:
    """One round of every operation; keeps the best seconds per operation in ``best``."""
    free_queue.set_accelerated(impl.accelerated)
    try:
        _bench_ops(impl, n, best)
    finally:
        free_queue.set_accelerated(True)


def _bench_ops(impl: Impl, n: int, best: dict[str, float]) -> None:
    rng = random.Random(0)
    middle = rng.sample(range(n // 4, 3 * n // 4), n // 10)

    def note(name: str, seconds: float, count: int) -> None:
        per_op = seconds / count
        best[name] = min(best.get(name, per_op), per_op)

    blocks, queue = _fresh(impl, n)
    popleft = queue.popleft
    taken: list[Any] = []

    def pop_all() -> None:
        keep = taken.append
        for _ in range(n):
            keep(popleft())

    note("popleft", _timed(pop_all), n)
    append = queue.append

    def append_all() -> None:
        for block in taken:
            append(block)

    note("append", _timed(append_all), n)
    remove = queue.remove
    victims = [blocks[i] for i in middle]

    def remove_middle() -> None:
        for block in victims:
            remove(block)

    note("remove (middle)", _timed(remove_middle), len(victims))
    queue.append_n(victims)
    popleft_n = queue.popleft_n
    calls = n // BATCH
    batches: list[list[Any]] = []

    def pop_batches() -> None:
        keep = batches.append
        for _ in range(calls):
            keep(popleft_n(BATCH))

    note(f"popleft_n({BATCH})", _timed(pop_batches), calls)
    append_n = queue.append_n

    def append_batches() -> None:
        for batch in batches:
            append_n(batch)

    note(f"append_n({BATCH})", _timed(append_batches), calls)
    if len(queue.get_all_free_blocks()) != n:
        raise SystemExit(f"{impl.name}: the queue lost blocks")


def _keep_fresh(holder: list[tuple[list[Any], Any]], impl: Impl, n: int) -> None:
    holder.append(_fresh(impl, n))


def build_seconds(impl: Impl, n: int) -> float:
    """Seconds to build n blocks and their queue (one round)."""
    holder: list[tuple[list[Any], Any]] = []
    seconds = _timed(partial(_keep_fresh, holder, impl, n))
    holder.clear()
    gc.collect()
    return seconds


def build_bytes(impl: Impl, n: int) -> int:
    """The bytes (tracemalloc) that n blocks and their queue hold once built."""
    gc.collect()
    tracemalloc.start()
    try:
        built = _fresh(impl, n)
        held_bytes, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del built
    gc.collect()
    return held_bytes


def _rows(baseline: Impl, others: tuple[Impl, ...] = ()) -> Iterator[tuple[str, str, str, float]]:
    """The table's rows against ``baseline``; the operations also against ``others``
    (vLLM 0.34's classes), as "vs <name>" rows."""
    quick = "--quick" in sys.argv
    n = QUEUE_BLOCKS // 10 if quick else QUEUE_BLOCKS
    ours: dict[str, float] = {}
    pure: dict[str, float] = {}
    theirs: dict[str, float] = {}
    more: list[dict[str, float]] = [{} for _ in others]
    for _ in range(ROUNDS):  # interleaved, so all see the same machine load
        bench_ops(KVPURE, n, ours)
        bench_ops(KVPURE_PURE, n, pure)
        bench_ops(baseline, n, theirs)
        for other, best in zip(others, more, strict=True):
            bench_ops(other, n, best)
    for name, seconds in ours.items():
        yield (
            f"{name} on {n:,} blocks (ops/s)",
            f"{1 / seconds:,.0f}",
            f"{1 / theirs[name]:,.0f}",
            seconds / theirs[name],
        )
        yield (
            "  the same, pure-Python path (ops/s)",
            f"{1 / pure[name]:,.0f}",
            f"{1 / theirs[name]:,.0f}",
            pure[name] / theirs[name],
        )
        for other, best in zip(others, more, strict=True):
            yield (
                f"  the same vs {other.name} (ops/s)",
                f"{1 / seconds:,.0f}",
                f"{1 / best[name]:,.0f}",
                seconds / best[name],
            )
            yield (
                f"  pure-Python path vs {other.name} (ops/s)",
                f"{1 / pure[name]:,.0f}",
                f"{1 / best[name]:,.0f}",
                pure[name] / best[name],
            )
    for size, rounds in ((n, ROUNDS), (10 * n, 2)):
        our_s = their_s = float("inf")
        for _ in range(rounds):  # interleaved too
            our_s = min(our_s, build_seconds(KVPURE, size))
            their_s = min(their_s, build_seconds(baseline, size))
        our_bytes = build_bytes(KVPURE, size)
        their_bytes = build_bytes(baseline, size)
        yield (
            f"build {size:,} blocks + queue (s)",
            f"{our_s:.3f}",
            f"{their_s:.3f}",
            our_s / their_s,
        )
        yield (
            f"build {size:,} blocks + queue (MiB traced)",
            f"{our_bytes / 2**20:,.1f}",
            f"{their_bytes / 2**20:,.1f}",
            our_bytes / their_bytes,
        )


def main() -> None:
    found = _baselines()
    label, baseline = found[0]
    print(f"Python {sys.version.split()[0]}; BASELINE = {label}")
    for other_label, other in found[1:]:
        print(f"also ({other.name}): {other_label}")
    print(f"kvpure's C batch helper: {'built' if free_queue.accelerated() else 'not built'}")
    header = f"| {'measure':<42} | {'kvpure':>12} | {'baseline':>12} | {'kvpure/baseline':>15} |"
    print(header)
    print("|" + "|".join("-" * (len(cell) + 0) for cell in header.split("|")[1:-1]) + "|")
    for row, ours, theirs, ratio in _rows(baseline, tuple(other for _, other in found[1:])):
        print(f"| {row:<42} | {ours:>12} | {theirs:>12} | {ratio:>15.2f} |", flush=True)


if __name__ == "__main__":
    main()
