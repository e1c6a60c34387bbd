"""A KV-cache block: its metadata and its links in the free block queue.

:class:`KVCacheBlock` is vLLM's block (id, reference count, block hash) and a
node of :class:`~kvpure.free_queue.FreeKVCacheBlockQueue`'s intrusive list;
:class:`KVCacheBlockCopy` is a frozen snapshot of one. ``kvpure.free_queue``
exports both, as the place a reader looks for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.errors import BlockHashAlreadySetError, InvalidFieldError, KVPureTypeError
from kvpure.field_checks import check_int
from kvpure.runtime_types import typed_init

__all__ = ["MAX_BLOCK_ID", "KVCacheBlock", "KVCacheBlockCopy"]


class _NullTag:
    """Marks the null block in a block's hash slot (the null block is never cached)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<null block>"

    def __reduce__(self) -> str:
        """Copied and pickled as the one tag (a copied pool's null block stays null)."""
        return "_NULL"


_NULL: Final = _NullTag()

MAX_BLOCK_ID: Final = 2**62
_MAX_COUNT: Final = 2**63 - 1  # reference and token counts: what vLLM's int64 holds
"""The largest block id accepted (pools are far smaller; an id must fit vLLM's int64 tensors)."""


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
        if type(block_id) is not int or type(ref_cnt) is not int:
            bad, value = (
                ("block_id", block_id) if type(block_id) is not int else ("ref_cnt", ref_cnt)
            )
            raise KVPureTypeError(
                f"KVCacheBlock {bad} must be an int, got {type(value).__name__} {value!r:.40}"
            )
        if not 0 <= block_id <= MAX_BLOCK_ID:
            raise InvalidFieldError(
                field="block_id", value=block_id, reason=f"a block id is in [0, {MAX_BLOCK_ID}]"
            )
        if not 0 <= ref_cnt <= _MAX_COUNT:
            raise InvalidFieldError(
                field="ref_cnt", value=ref_cnt, reason=f"a reference count is in [0, {_MAX_COUNT}]"
            )
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
        if type(block_hash) is not bytes:
            raise KVPureTypeError(
                f"set_block_hash: block_hash must be bytes (a block hash with its group id), "
                f"got {type(block_hash).__name__} {block_hash!r:.40}"
            )
        if num_tokens is not None and type(num_tokens) is not int:
            raise KVPureTypeError(
                f"set_block_hash: num_tokens must be an int or None, "
                f"got {type(num_tokens).__name__} {num_tokens!r:.40}"
            )
        entry = self._hash_entry
        if entry is not None:
            reason = (
                "the null block is never cached and can not take a block hash"
                if entry is _NULL
                else "the block already has a block hash; call reset_hash() before setting another"
            )
            raise BlockHashAlreadySetError(block_id=self.block_id, reason=reason)
        if num_tokens is not None and not 0 <= num_tokens <= _MAX_COUNT:
            raise InvalidFieldError(
                field="num_tokens",
                value=num_tokens,
                reason=f"a token count is in [0, {_MAX_COUNT}]",
            )
        self._hash_entry = (block_hash, num_tokens)

    def claim_hash(self, block_hash: bytes, num_tokens: int) -> bool:
        """Give the block ``block_hash`` (as :meth:`set_block_hash`) if it has no hash and is
        not the null block: True; else False, the block unchanged (the pool's per-block
        step, which has checked ``num_tokens``)."""
        if self._hash_entry is None:
            self._hash_entry = (block_hash, num_tokens)
            return True
        return False

    def pop_block_hash(self) -> bytes | None:
        """The block's hash key, dropped from the block as :meth:`reset_hash` does; None
        (the block unchanged) when it has none (the pool's eviction step, in one call)."""
        entry = self._hash_entry
        if type(entry) is tuple:
            self._hash_entry = None
            return entry[0]
        return None

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
        if type(value) is not bool:
            raise KVPureTypeError(
                f"KVCacheBlock is_null must be a bool, got {type(value).__name__} {value!r:.40}"
            )
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


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheBlockCopy:
    """Copy the contents of block ``src_block_id`` into block ``dst_block_id``."""

    src_block_id: int
    dst_block_id: int

    def __post_init__(self) -> None:
        for name in ("src_block_id", "dst_block_id"):
            check_int(name, getattr(self, name), minimum=0, maximum=MAX_BLOCK_ID)
