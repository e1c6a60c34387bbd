"""The imperative shell: KV-cache blocks and their O(1) free block queue.

:class:`KVCacheBlock` is a block's metadata and a node of an intrusive doubly
linked list; :class:`FreeKVCacheBlockQueue` threads the free blocks through
those links: O(1) per block, no allocation but the lists it returns. The order
is vLLM's: the given order at first, ``popleft`` from the front (next to
evict), ``append``/``append_n`` at the back, ``prepend_n([a, b])`` puts ``a``
first. Unlike vLLM, misuse (popping too many, removing an unqueued block,
adding a queued one, a block of another queue) is caught by one slot read and
raises a typed error that leaves the queue and its blocks as they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockHashAlreadySetError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    FreeBlockQueueMisuseError,
    InvalidFieldError,
    NoFreeBlocksError,
    NotABlockError,
    NotEnoughFreeBlocksError,
)

__all__ = ["FreeKVCacheBlockQueue", "KVCacheBlock", "KVCacheBlockCopy"]


class _NullTag:
    """Marks the null block in a block's hash slot (the null block is never cached)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<null block>"


_NULL: Final = _NullTag()

# The owner slot of a queue's sentinel: no queue operation accepts the sentinel.
_SENTINEL_OWNER: Final = object()


class KVCacheBlock:
    """A KV-cache block: its id, reference count, block hash and free-list links.

    Equality and hashing are by identity (two blocks with the same id are two
    blocks). ``prev_free_block``/``next_free_block`` are owned by the
    :class:`FreeKVCacheBlockQueue` the block is in, and are None while the block
    is not in a queue; never write them.

    The hash slot holds ``None`` (no hash), a ``(block_hash, num_tokens)``
    pair, or the null tag: the null block never carries a hash, so one slot
    stores both, and a block costs six slots.
    """

    # Hot links first, next to the object header (one cache line with the refcount).
    __slots__ = (  # noqa: RUF023  # order is layout: the hot slots first
        "prev_free_block",
        "next_free_block",
        "_queue",
        "block_id",
        "ref_cnt",
        "_hash_entry",
    )

    block_id: int
    ref_cnt: int
    _hash_entry: tuple[bytes, int | None] | _NullTag | None
    prev_free_block: KVCacheBlock | None
    next_free_block: KVCacheBlock | None
    _queue: object

    def __init__(self, block_id: int, ref_cnt: int = 0) -> None:
        if block_id < 0:
            raise InvalidFieldError(field="block_id", value=block_id, reason="a block id is >= 0")
        self.block_id = block_id
        self.ref_cnt = ref_cnt
        self._hash_entry = None
        self.prev_free_block = None
        self.next_free_block = None
        self._queue = None

    @property
    def block_hash(self) -> bytes | None:
        """The block's hash key (block hash + group id), or None when it has none."""
        entry = self._hash_entry
        return entry[0] if type(entry) is tuple else None

    @property
    def block_hash_num_tokens(self) -> int | None:
        """How many prefix tokens the block hash covers, or None."""
        entry = self._hash_entry
        return entry[1] if type(entry) is tuple else None

    def set_block_hash(self, block_hash: bytes, num_tokens: int | None = None) -> None:
        """Give the block its hash; a block holds one hash until ``reset_hash()``."""
        entry = self._hash_entry
        if entry is not None:
            reason = (
                "the null block is never cached and can not take a block hash"
                if entry is _NULL
                else "the block already has a block hash; call reset_hash() before setting another"
            )
            raise BlockHashAlreadySetError(block_id=self.block_id, reason=reason)
        if num_tokens is not None and num_tokens < 0:
            raise InvalidFieldError(
                field="num_tokens", value=num_tokens, reason="a token count is >= 0"
            )
        self._hash_entry = (block_hash, num_tokens)

    def reset_hash(self) -> None:
        """Drop the block hash (when the block is evicted). The null flag stays."""
        if self._hash_entry is not _NULL:
            self._hash_entry = None

    @property
    def is_null(self) -> bool:
        """Whether this is the pool's null block (never cached, never freed)."""
        return self._hash_entry is _NULL

    @is_null.setter
    def is_null(self, value: bool) -> None:
        entry = self._hash_entry
        if value:
            if type(entry) is tuple:
                raise BlockHashAlreadySetError(
                    block_id=self.block_id,
                    reason="a block with a block hash can not become the null block; "
                    "call reset_hash() first",
                )
            self._hash_entry = _NULL
        elif entry is _NULL:
            self._hash_entry = None

    @property
    def is_queued(self) -> bool:
        """Whether the block is in a free block queue."""
        return self._queue is not None

    def __repr__(self) -> str:
        prev_block = self.prev_free_block
        next_block = self.next_free_block
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, "
            f"block_hash={self.block_hash!r}, "
            f"block_hash_num_tokens={self.block_hash_num_tokens}, "
            f"is_null={self.is_null}, "
            f"prev_free_block={None if prev_block is None else prev_block.block_id}, "
            f"next_free_block={None if next_block is None else next_block.block_id})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheBlockCopy:
    """Copy the contents of block ``src_block_id`` into block ``dst_block_id``."""

    src_block_id: int
    dst_block_id: int

    def __post_init__(self) -> None:
        for name in ("src_block_id", "dst_block_id"):
            value = getattr(self, name)
            if value < 0:
                raise InvalidFieldError(field=name, value=value, reason="a block id is >= 0")


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
        root.next_free_block = root.prev_free_block = root
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
        if n > self._num_free_blocks or n < 0:
            if n < 0:
                raise InvalidFieldError(field="n", value=n, reason="pop zero or more blocks")
            raise NotEnoughFreeBlocksError(num_requested=n, num_free_blocks=self._num_free_blocks)
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
        if block._queue is not self:
            raise self._foreign("remove", block)
        before: KVCacheBlock = block.prev_free_block  # type: ignore[assignment]  # queued
        after: KVCacheBlock = block.next_free_block  # type: ignore[assignment]  # queued
        before.next_free_block = after
        after.prev_free_block = before
        block.prev_free_block = block.next_free_block = block._queue = None
        self._num_free_blocks -= 1

    # -- putting blocks back -------------------------------------------------

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the back (evicted last)."""
        if block._queue is not None:
            raise self._foreign("append", block)
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
            blocks = tuple(blocks)
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

    def iter_blocks_after(self, cursor: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        """Yield the free blocks after ``cursor`` (from the front when None), in order.

        As in vLLM, a cursor that is in no queue yields nothing. A cursor in a
        different queue raises :class:`BlockInOtherQueueError`.
        """
        root = self._root
        if cursor is None:
            block = root.next_free_block
        else:
            owner = cursor._queue
            if owner is not self and owner is not None:
                raise self._foreign("iter_blocks_after", cursor)
            block = cursor.next_free_block
        while block is not None and block is not root:
            yield block
            block = block.next_free_block
