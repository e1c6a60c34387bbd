"""Every free-queue batch operation takes any iterable and either completes or leaves
the queue and every block exactly as they were."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock


def _ids(queue: FreeKVCacheBlockQueue) -> list[int]:
    return [block.block_id for block in queue.get_all_free_blocks()]


def _blocks(n: int, start: int = 0) -> list[KVCacheBlock]:
    return [KVCacheBlock(i) for i in range(start, start + n)]


def test_generators_are_taken_in_order() -> None:
    queue = FreeKVCacheBlockQueue(block for block in _blocks(3))
    queue.append_n(block for block in _blocks(2, 10))
    queue.prepend_n(block for block in _blocks(2, 20))
    assert _ids(queue) == [20, 21, 0, 1, 2, 10, 11]
    assert queue.num_free_blocks == 7


class _Boom(Exception):
    pass


def _failing(blocks: list[KVCacheBlock]) -> Iterator[KVCacheBlock]:
    yield from blocks
    raise _Boom


@pytest.mark.parametrize("operation", ["append_n", "prepend_n"])
def test_an_iterable_failing_half_way_changes_nothing(operation: str) -> None:
    queue = FreeKVCacheBlockQueue(_blocks(5))
    extra = _blocks(3, 8)
    with pytest.raises(_Boom):
        getattr(queue, operation)(_failing(extra))
    assert _ids(queue) == [0, 1, 2, 3, 4]
    assert queue.num_free_blocks == 5
    assert not any(block.is_queued for block in extra)
    other = FreeKVCacheBlockQueue([])
    other.append_n(extra)  # the blocks are free to join another queue
    assert _ids(other) == [8, 9, 10]


def test_a_constructor_failing_half_way_leaves_blocks_free() -> None:
    blocks = _blocks(3)
    with pytest.raises(_Boom):
        FreeKVCacheBlockQueue(_failing(blocks))
    assert not any(block.is_queued for block in blocks)
    assert _ids(FreeKVCacheBlockQueue(blocks)) == [0, 1, 2]


def test_a_queued_block_in_a_generator_undoes_the_batch() -> None:
    queue = FreeKVCacheBlockQueue(_blocks(3))
    queued = queue.get_all_free_blocks()[1]
    extra = _blocks(2, 10)
    with pytest.raises(Exception, match="block 1") as info:
        queue.append_n(block for block in [*extra, queued])
    assert info.type.__name__ == "BlockAlreadyQueuedError"
    assert _ids(queue) == [0, 1, 2]
    assert queue.num_free_blocks == 3
    assert not any(block.is_queued for block in extra)


def test_a_non_block_is_a_typed_error_in_a_users_process() -> None:
    # a subprocess: the behaviour users get, without the suite's beartype hook
    code = (
        "from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock\n"
        "from kvpure.errors import NotABlockError\n"
        "q = FreeKVCacheBlockQueue([KVCacheBlock(0)])\n"
        "extra = [KVCacheBlock(5), KVCacheBlock(6)]\n"
        "for op in (q.append_n, q.prepend_n):\n"
        "    try:\n"
        "        op([*extra, 3])\n"
        "    except NotABlockError as err:\n"
        "        assert isinstance(err, TypeError) and err.item == 3\n"
        "    ids = [b.block_id for b in q.get_all_free_blocks()]\n"
        "    assert ids == [0] and q.num_free_blocks == 1, ids\n"
        "    assert not any(b.is_queued for b in extra)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr
