"""The imperative shell: KV-cache blocks and their O(1) free block queue.

:class:`KVCacheBlock` is a block's metadata and a node of an intrusive doubly
linked list; :class:`FreeKVCacheBlockQueue` threads the free blocks through
those links: O(1) per block, no allocation but the lists it returns. The order
is vLLM's: the given order at first, ``popleft`` from the front (next to
evict), ``append``/``append_n`` at the back, ``prepend_n([a, b])`` puts ``a``
first. Unlike vLLM, misuse (popping too many, removing an unqueued block,
adding a queued one, a block of another queue) is caught by one slot read and
raises a typed error that leaves the queue and its blocks as they were.

The batch operations (``popleft_n``, ``append_n``, ``prepend_n`` and the
constructor) run in a small C helper (``kvpure._queue_links``) where it is
built: it reads and writes the same slots as the Python statements, does the
whole operation or nothing, and hands every input it does not handle (a
non-block, a queued block, a repeat) to the pure-Python method, which stays
the reference and raises the typed error. :func:`set_accelerated` switches
it off (the CLI does under ``KVPURE_NO_EXTENSION=1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any, Final

from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    FreeBlockQueueMisuseError,
    InvalidFieldError,
    KVPureTypeError,
    NoFreeBlocksError,
    NotABlockError,
    NotEnoughFreeBlocksError,
)
from kvpure.kv_cache_block import KVCacheBlock, KVCacheBlockCopy

__all__ = [
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "KVCacheBlockCopy",
    "accelerated",
    "set_accelerated",
]

# The owner slot of a queue's sentinel: no queue operation accepts the sentinel.
_SENTINEL_OWNER: Final = object()


def _load_links() -> ModuleType | None:
    try:
        from kvpure import _queue_links
    except ImportError:  # not built: the pure-Python methods run
        return None
    slots = vars(KVCacheBlock)
    _queue_links.configure(
        KVCacheBlock, slots["prev_free_block"], slots["next_free_block"], slots["_queue"]
    )
    return _queue_links


_BUILT: Final = _load_links()
_links: ModuleType | None = _BUILT


def accelerated() -> bool:
    """Whether the batch operations run through the C helper (built and not switched off)."""
    return _links is not None


def set_accelerated(enabled: bool) -> bool:
    """Switch the C helper on or off for this process; returns whether it is now in use."""
    global _links  # the one process-wide switch
    _links = _BUILT if enabled else None
    return _links is not None


def _new_sentinel() -> KVCacheBlock:
    root = KVCacheBlock.__new__(KVCacheBlock)
    root.block_id = -1
    root.ref_cnt = 0
    root._hash_entry = None
    root.prev_free_block = root
    root.next_free_block = root
    root._queue = _SENTINEL_OWNER
    return root


class FreeKVCacheBlockQueue:
    """The free blocks, in eviction order, as an intrusive doubly linked list.

    One sentinel closes the list into a ring: its ``next_free_block`` is the
    front and its ``prev_free_block`` the back. Every queued block has both
    links and records this queue in its owner slot; a block outside any queue
    has neither.
    """

    __slots__ = ("_num_free_blocks", "_root")

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        root = _new_sentinel()
        self._root = root
        self._num_free_blocks = 0
        self._link_batch("FreeKVCacheBlockQueue", root, root, blocks)

    @property
    def num_free_blocks(self) -> int:
        """How many blocks are in the queue."""
        return self._num_free_blocks

    @property
    def fake_free_list_head(self) -> KVCacheBlock:
        """The sentinel (block_id -1); its ``next_free_block`` is the front block.

        vLLM has a fake head and a fake tail; here both names give the one
        sentinel of the ring, so vLLM code that reads them keeps working.
        """
        return self._root

    @property
    def fake_free_list_tail(self) -> KVCacheBlock:
        """The sentinel (block_id -1); its ``prev_free_block`` is the back block."""
        return self._root

    def __repr__(self) -> str:
        return f"FreeKVCacheBlockQueue(num_free_blocks={self._num_free_blocks})"

    # -- taking blocks -------------------------------------------------------

    def popleft(self) -> KVCacheBlock:
        """Take the front block (the next to evict)."""
        root = self._root
        block = root.next_free_block
        if block is root:
            raise NoFreeBlocksError()
        following: KVCacheBlock = block.next_free_block  # type: ignore[union-attr,assignment]  # a queued block is linked
        root.next_free_block = following
        following.prev_free_block = root
        block.prev_free_block = block.next_free_block = block._queue = None  # type: ignore[union-attr]  # queued, see above
        self._num_free_blocks -= 1
        return block  # type: ignore[return-value]  # not the sentinel, so a real block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Take the ``n`` front blocks, front first."""
        if type(n) is not int:
            if isinstance(n, bool) or not isinstance(n, int):
                raise KVPureTypeError(
                    f"popleft_n: n must be an int, got {type(n).__name__} {n!r:.40}"
                )
            n = int(n)
        if n > self._num_free_blocks or n < 0:
            if n < 0:
                raise InvalidFieldError(field="n", value=n, reason="pop zero or more blocks")
            raise NotEnoughFreeBlocksError(num_requested=n, num_free_blocks=self._num_free_blocks)
        links = _links
        if links is not None:
            done: list[KVCacheBlock] | None = links.popleft_n(self._root, n)
            if done is not None:
                self._num_free_blocks -= n
                return done
        return self._popleft_n_pure(n)

    def _popleft_n_pure(self, n: int) -> list[KVCacheBlock]:
        """:meth:`popleft_n` in Python, ``0 <= n <= num_free_blocks`` checked (the reference)."""
        root = self._root
        taken = [root] * n
        block: KVCacheBlock = root.next_free_block  # type: ignore[assignment]  # the ring is closed
        for i in range(n):
            taken[i] = block
            following: KVCacheBlock = block.next_free_block  # type: ignore[assignment]  # queued
            block.prev_free_block = block.next_free_block = block._queue = None
            block = following
        root.next_free_block = block
        block.prev_free_block = root
        self._num_free_blocks -= n
        return taken

    def remove(self, block: KVCacheBlock) -> None:
        """Take ``block`` out of the queue, wherever it is."""
        try:  # free when nothing is raised: the slot read is vLLM's own cost
            if block._queue is not self:
                raise self._foreign("remove", block)
        except AttributeError:  # not a block (no owner slot)
            raise NotABlockError(operation="remove", item=block) from None
        before: KVCacheBlock = block.prev_free_block  # type: ignore[assignment]  # queued
        after: KVCacheBlock = block.next_free_block  # type: ignore[assignment]  # queued
        before.next_free_block = after
        after.prev_free_block = before
        block.prev_free_block = block.next_free_block = block._queue = None
        self._num_free_blocks -= 1

    # -- putting blocks back -------------------------------------------------

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the back (evicted last)."""
        try:  # free when nothing is raised: the slot read is vLLM's own cost
            if block._queue is not None:
                raise self._foreign("append", block)
        except AttributeError:  # not a block (no owner slot)
            raise NotABlockError(operation="append", item=block) from None
        root = self._root
        last: KVCacheBlock = root.prev_free_block  # type: ignore[assignment]  # the ring is closed
        block._queue = self
        block.prev_free_block = last
        block.next_free_block = root
        last.next_free_block = block
        root.prev_free_block = block
        self._num_free_blocks += 1

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Put ``blocks`` at the back, in the order given.

        Each block is checked (one slot read) as it is linked; at the first bad
        one the blocks linked so far are unlinked again before raising, so a
        failed batch leaves the queue and the blocks as they were.
        """
        root = self._root
        before: KVCacheBlock = root.prev_free_block  # type: ignore[assignment]  # the ring is closed
        self._link_batch("append_n", before, root, blocks)

    def prepend_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Put ``blocks`` at the front (evicted first), ``blocks[0]`` first.

        Checked and undone on failure as :meth:`append_n` is.
        """
        root = self._root
        after: KVCacheBlock = root.next_free_block  # type: ignore[assignment]  # the ring is closed
        self._link_batch("prepend_n", root, after, blocks)

    def _link_batch(
        self,
        operation: str,
        before: KVCacheBlock,
        after: KVCacheBlock,
        blocks: Iterable[KVCacheBlock],
    ) -> None:
        """Link ``blocks`` in order between the adjacent ``before`` and ``after``.

        Any iterable is taken; one that is not a list or tuple is read to the end
        first, so that an iterable failing half-way links nothing. A block
        already queued, or an item that is not a block, unlinks what this batch
        linked before raising.
        """
        if type(blocks) is not list and type(blocks) is not tuple:
            blocks = self._read_batch(operation, blocks)
        links = _links
        if links is not None and links.link(self, before, after, blocks):
            self._num_free_blocks += len(blocks)
            return
        last = before
        try:
            for block in blocks:
                if block._queue is not None:
                    raise self._reject_batch(operation, before, after, last, block)
                block._queue = self
                block.prev_free_block = last
                last.next_free_block = block
                last = block
        except AttributeError:  # an item without a block's slots
            self._unlink_partial(before, after, last)
            bad = next(item for item in blocks if not isinstance(item, KVCacheBlock))
            raise NotABlockError(operation=operation, item=bad) from None
        last.next_free_block = after
        after.prev_free_block = last
        self._num_free_blocks += len(blocks)

    @staticmethod
    def _read_batch(operation: str, blocks: object) -> tuple[Any, ...]:
        """Any iterable, read to its end; a non-iterable is a typed error.

        The items are not checked here (``Any``): the link loop or the C helper meets a
        non-block as it links and refuses it with :class:`NotABlockError`, undoing the batch.
        """
        if isinstance(blocks, KVCacheBlock) or not hasattr(blocks, "__iter__"):
            raise KVPureTypeError(
                f"{operation}: blocks must be an iterable of KVCacheBlock, "
                f"got {type(blocks).__name__}"
            )
        return tuple(blocks)

    def _unlink_partial(
        self, before: KVCacheBlock, after: KVCacheBlock, last: KVCacheBlock
    ) -> list[KVCacheBlock]:
        """Unlink the blocks a failed batch linked (``before`` ... ``last``); return them."""
        linked: list[KVCacheBlock] = []
        node = before
        while node is not last:
            node = node.next_free_block  # type: ignore[assignment]  # linked by this batch
            linked.append(node)
        for block in linked:
            block.prev_free_block = block.next_free_block = block._queue = None
        before.next_free_block = after
        after.prev_free_block = before
        return linked

    def _reject_batch(
        self,
        operation: str,
        before: KVCacheBlock,
        after: KVCacheBlock,
        last: KVCacheBlock,
        bad: KVCacheBlock,
    ) -> FreeBlockQueueMisuseError:
        """Undo a partly linked batch (``before`` ... ``last``) and say why ``bad`` failed."""
        linked = self._unlink_partial(before, after, last)
        if any(block is bad for block in linked):
            error: FreeBlockQueueMisuseError = BlockAlreadyQueuedError(
                operation=operation,
                block_id=bad.block_id,
                reason="it appears twice in the batch; pass each block once",
            )
        else:
            error = self._foreign(operation, bad)
        return error

    def _foreign(self, operation: str, block: KVCacheBlock) -> FreeBlockQueueMisuseError:
        """The typed error for a block that does not fit ``operation`` (error path only)."""
        owner = block._queue
        block_id = block.block_id
        if owner is _SENTINEL_OWNER:
            return BlockInOtherQueueError(
                operation=operation,
                block_id=block_id,
                reason="it is the sentinel of a free block queue, not a KV-cache block",
            )
        if owner is None:
            return BlockNotQueuedError(
                operation=operation,
                block_id=block_id,
                reason=f"it is not in the free block queue (ref_cnt={block.ref_cnt}); "
                "only free blocks can be removed",
            )
        if owner is not self:
            return BlockInOtherQueueError(
                operation=operation,
                block_id=block_id,
                reason="it is in a different free block queue; remove it from that queue first",
            )
        return BlockAlreadyQueuedError(
            operation=operation,
            block_id=block_id,
            reason="it already is in this free block queue; remove or pop it first",
        )

    # -- reading -------------------------------------------------------------

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every free block, front (next to evict) first."""
        root = self._root
        found: list[KVCacheBlock] = []
        block: KVCacheBlock = root.next_free_block  # type: ignore[assignment]  # the ring is closed
        while block is not root:
            found.append(block)
            block = block.next_free_block  # type: ignore[assignment]  # queued
        return found

    def free_block_ids(self) -> tuple[int, ...]:
        """The ids of :meth:`get_all_free_blocks`, in one walk (a replay's snapshot)."""
        root = self._root
        ids: list[int] = []
        append = ids.append
        block: KVCacheBlock = root.next_free_block  # type: ignore[assignment]  # the ring is closed
        while block is not root:
            append(block.block_id)
            block = block.next_free_block  # type: ignore[assignment]  # queued
        return tuple(ids)

    def iter_blocks_after(self, cursor: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        """Yield the free blocks after ``cursor`` (from the front when None), in order.

        As in vLLM, a cursor that is in no queue yields nothing. A cursor in a
        different queue raises :class:`BlockInOtherQueueError`, and one that is
        not a block :class:`NotABlockError`, at the call (not at the first step).
        """
        root = self._root
        if cursor is None:
            block = root.next_free_block
        elif not isinstance(cursor, KVCacheBlock):
            raise NotABlockError(operation="iter_blocks_after", item=cursor)
        else:
            owner = cursor._queue
            if owner is not self and owner is not None:
                raise self._foreign("iter_blocks_after", cursor)
            block = cursor.next_free_block
        return self._walk_from(block)

    def _walk_from(self, block: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        root = self._root
        while block is not None and block is not root:
            yield block
            block = block.next_free_block
