"""Block hashes viewed at a coarser block size, for KV-cache groups of different sizes.

A hash computed at ``hash_block_size`` already chains over the whole prefix,
so the coarse block ``i`` of a ``target_block_size`` group (a multiple of the
hash block size, ``scale_factor`` times it) is identified by the fine hash at
its end: fine hash ``(i + 1) * scale_factor - 1``. The view computes that on
access and copies nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from kvpure.errors import FieldIndexError, FieldTypeError
from kvpure.field_checks import check_int
from kvpure.hashing.errors import BlockSizeMismatchError
from kvpure.hashing.types import BlockHash

_MAX_BLOCK_SIZE = 2**32
"""Tokens per block, at most (vLLM's block sizes are small powers of two)."""


def _check_size(field: str, value: int) -> None:
    check_int(field, value, minimum=1, maximum=_MAX_BLOCK_SIZE)


def _check_hashes(block_hashes: object) -> None:
    """A sequence of bytes: its type, and its first and last items (O(1))."""
    if not isinstance(block_hashes, Sequence) or isinstance(block_hashes, str | bytes | bytearray):
        raise FieldTypeError(
            field="block_hashes",
            value=block_hashes,
            reason="must be a sequence of block hashes (bytes), e.g. a list or PVector",
        )
    if block_hashes and not isinstance(block_hashes, BlockHashListWithBlockSize):
        for index in (0, len(block_hashes) - 1):
            if not isinstance(block_hashes[index], bytes):
                raise FieldTypeError(
                    field=f"block_hashes[{index}]",
                    value=block_hashes[index],
                    reason="a block hash is bytes",
                )


class BlockHashListWithBlockSize(Sequence[BlockHash]):
    """A lazy, read-only view of fine-grained block hashes at ``target_block_size``."""

    __slots__ = ("_block_hashes", "_hash_block_size", "_scale_factor", "_target_block_size")

    def __init__(
        self, block_hashes: Sequence[BlockHash], hash_block_size: int, target_block_size: int
    ) -> None:
        _check_hashes(block_hashes)
        _check_size("hash_block_size", hash_block_size)
        _check_size("target_block_size", target_block_size)
        if target_block_size % hash_block_size:
            raise BlockSizeMismatchError(
                hash_block_size=hash_block_size,
                block_size=target_block_size,
                reason="the target block size must be a multiple of the hash block size",
            )
        self._block_hashes = block_hashes
        self._hash_block_size = hash_block_size
        self._target_block_size = target_block_size
        self._scale_factor = target_block_size // hash_block_size

    @property
    def block_hashes(self) -> Sequence[BlockHash]:
        """The fine-grained hashes this view reads."""
        return self._block_hashes

    @property
    def hash_block_size(self) -> int:
        """Tokens per fine-grained hash."""
        return self._hash_block_size

    @property
    def target_block_size(self) -> int:
        """Tokens per block of this view."""
        return self._target_block_size

    @property
    def scale_factor(self) -> int:
        """Fine-grained hashes per block of this view."""
        return self._scale_factor

    def __len__(self) -> int:
        return len(self._block_hashes) // self._scale_factor

    @overload
    def __getitem__(self, idx: int) -> BlockHash: ...

    @overload
    def __getitem__(self, idx: slice) -> tuple[BlockHash, ...]: ...

    def __getitem__(self, idx: object) -> BlockHash | tuple[BlockHash, ...]:
        if type(idx) is int:
            if -len(self) <= idx < len(self):
                return self._value_at(idx)
            raise FieldIndexError(
                field="idx", value=idx, reason=f"out of range for {len(self)} blocks"
            )
        if isinstance(idx, slice):
            start, stop, step = idx.indices(len(self))
            return tuple(self._value_at(i) for i in range(start, stop, step))
        raise FieldTypeError(field="idx", value=idx, reason="an index is an int or a slice")

    def __iter__(self) -> Iterator[BlockHash]:
        for i in range(len(self)):
            yield self._value_at(i)

    def _value_at(self, idx: int) -> BlockHash:
        # vLLM's formula, negative indices included.
        return self._block_hashes[(idx + 1) * self._scale_factor - 1]

    def __repr__(self) -> str:
        return (
            f"BlockHashListWithBlockSize(len={len(self)}, hash_block_size="
            f"{self._hash_block_size}, target_block_size={self._target_block_size})"
        )


BlockHashList = Sequence[BlockHash]
"""Raw block hashes (a PVector, list or tuple) or a :class:`BlockHashListWithBlockSize`."""


def resolve_block_hashes(
    block_hashes: BlockHashList,
    hash_block_size: int,
    block_size: int,
    *,
    supports_fine_grained_hash_lookup: bool = False,
    alignment_tokens: int | None = None,
) -> BlockHashList:
    """The hashes a group of ``block_size`` tokens per block looks up, by vLLM's rules.

    - ``block_size == hash_block_size``: the hashes as given.
    - Already a view: returned as is, if its scale factor matches.
    - Fine-grained lookup (``alignment_tokens`` below ``block_size`` and dividing
      it): the raw hashes, for partial hits.
    - Otherwise a :class:`BlockHashListWithBlockSize` (``block_size`` must be a
      multiple of ``hash_block_size``).

    Where vLLM asserts, this raises :class:`~kvpure.errors.BlockSizeMismatchError`.
    """
    _check_size("hash_block_size", hash_block_size)
    _check_size("block_size", block_size)
    if block_size == hash_block_size:
        return block_hashes
    if isinstance(block_hashes, BlockHashListWithBlockSize):
        expected = block_size // hash_block_size
        if block_hashes.scale_factor != expected:
            raise BlockSizeMismatchError(
                hash_block_size=hash_block_size,
                block_size=block_size,
                reason=(
                    f"the given view has scale factor {block_hashes.scale_factor}, "
                    f"this block size needs {expected}"
                ),
            )
        return block_hashes
    if (
        supports_fine_grained_hash_lookup
        and alignment_tokens is not None
        and alignment_tokens < block_size
        and alignment_tokens > 0
        and block_size % alignment_tokens == 0
    ):
        return block_hashes
    if block_size % hash_block_size:
        raise BlockSizeMismatchError(
            hash_block_size=hash_block_size,
            block_size=block_size,
            reason="the block size must be a multiple of the hash block size",
        )
    return BlockHashListWithBlockSize(block_hashes, hash_block_size, block_size)
