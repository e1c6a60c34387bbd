"""Block hashes, group-id keys and vLLM's external (KV-event) form of a hash.

A block hash is the raw digest bytes of one full block (32 bytes for the
sha256 algorithms, 16 for xxhash). The block pool keys a cached block by the
hash with its KV-cache group id appended as 4 big-endian unsigned bytes, the
same bytes vLLM builds, so keys computed here can be compared with vLLM's.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from typing import NewType

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_bool, check_int
from kvpure.hashing.errors import GroupIdOutOfRangeError

BlockHash = NewType("BlockHash", bytes)
"""The digest of one full block, chained over the whole prefix before it."""

BlockHashWithGroupId = NewType("BlockHashWithGroupId", bytes)
"""A block hash followed by its 4-byte big-endian KV-cache group id."""

ExternalBlockHash = bytes | int
"""How vLLM publishes a block hash in KV events: raw bytes or a 64-bit int."""

GROUP_ID_NUM_BYTES = 4
_MAX_GROUP_ID = (1 << (8 * GROUP_ID_NUM_BYTES)) - 1
_LOW_64_BITS = (1 << 64) - 1
_WORD = array("Q")


def make_block_hash_with_group_id(block_hash: bytes, group_id: int) -> BlockHashWithGroupId:
    """Append ``group_id`` as 4 big-endian unsigned bytes to ``block_hash``."""
    if type(block_hash) is not bytes and not isinstance(block_hash, bytes):
        raise FieldTypeError(field="block_hash", value=block_hash, reason="must be bytes")
    if type(group_id) is not int:
        check_int("group_id", group_id, minimum=0, maximum=_MAX_GROUP_ID)
    if not 0 <= group_id <= _MAX_GROUP_ID:
        raise GroupIdOutOfRangeError(group_id=group_id)
    return BlockHashWithGroupId(block_hash + group_id.to_bytes(GROUP_ID_NUM_BYTES, "big"))


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes):
        raise FieldTypeError(
            field="key", value=key, reason="must be bytes (a block hash with its group id)"
        )
    if len(key) < GROUP_ID_NUM_BYTES:
        raise InvalidFieldError(
            field="key",
            value=key,
            reason=f"a block hash with group id has at least {GROUP_ID_NUM_BYTES} bytes",
        )


def get_block_hash(key: bytes) -> BlockHash:
    """The block hash part of a ``BlockHashWithGroupId`` (all but the last 4 bytes)."""
    _check_key(key)
    return BlockHash(key[:-GROUP_ID_NUM_BYTES])


def get_group_id(key: bytes) -> int:
    """The group id of a ``BlockHashWithGroupId`` (its last 4 bytes, big-endian)."""
    _check_key(key)
    return int.from_bytes(key[-GROUP_ID_NUM_BYTES:], "big", signed=False)


def maybe_convert_block_hash(
    block_hash: bytes, *, use_int_block_hashes: bool = True
) -> ExternalBlockHash:
    """The form vLLM puts in KV events (``BlockStored``, ``BlockRemoved``).

    With ``use_int_block_hashes`` (vLLM's ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``,
    on by default) this is the low 64 bits of the digest read big-endian, as an
    unsigned int; otherwise the raw bytes. The choice is a parameter here: kvpure
    never reads the environment.
    """
    if not isinstance(block_hash, bytes):
        raise FieldTypeError(field="block_hash", value=block_hash, reason="must be bytes")
    check_bool("use_int_block_hashes", use_int_block_hashes)
    return block_hash_converter(use_int_block_hashes=use_int_block_hashes)(block_hash)


def _low_64_bits(block_hash: bytes) -> int:
    return int.from_bytes(block_hash, "big") & _LOW_64_BITS


def _as_given(block_hash: bytes) -> ExternalBlockHash:
    return block_hash


def low_64_bits_of_each(block_hashes: Sequence[bytes]) -> list[int]:
    """``[maybe_convert_block_hash(h) for h in block_hashes]`` (the int form), in bulk.

    Where every hash has the same length, a multiple of 8 bytes, the hashes are joined
    and read as native 64-bit words in C; the last word of each, byte-swapped to
    big-endian, is its low 64 bits. Otherwise one by one.
    """
    if not block_hashes:
        return []
    size = len(block_hashes[0])
    if size % 8 or size == 0 or _WORD.itemsize != 8 or len(set(map(len, block_hashes))) != 1:
        return [_low_64_bits(h) for h in block_hashes]
    words = array("Q", b"".join(block_hashes))
    if sys.byteorder == "little":
        words.byteswap()
    step = size // 8
    return words[step - 1 :: step].tolist()


def block_hash_converter(
    *, use_int_block_hashes: bool = True
) -> Callable[[bytes], ExternalBlockHash]:
    """:func:`maybe_convert_block_hash` with its choice made once (for loops over blocks)."""
    return _low_64_bits if use_int_block_hashes else _as_given
