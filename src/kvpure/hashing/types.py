"""Block hashes, group-id keys and vLLM's external (KV-event) form of a hash.

A block hash is the raw digest bytes of one full block (32 bytes for the
sha256 algorithms, 16 for xxhash). The block pool keys a cached block by the
hash with its KV-cache group id appended as 4 big-endian unsigned bytes, the
same bytes vLLM builds, so keys computed here can be compared with vLLM's.
"""

from __future__ import annotations

from typing import NewType

from kvpure.errors import InvalidFieldError
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


def make_block_hash_with_group_id(block_hash: bytes, group_id: int) -> BlockHashWithGroupId:
    """Append ``group_id`` as 4 big-endian unsigned bytes to ``block_hash``."""
    if not 0 <= group_id <= _MAX_GROUP_ID:
        raise GroupIdOutOfRangeError(group_id=group_id)
    return BlockHashWithGroupId(block_hash + group_id.to_bytes(GROUP_ID_NUM_BYTES, "big"))


def _check_key(key: bytes) -> None:
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
    if not use_int_block_hashes:
        return block_hash
    return int.from_bytes(block_hash, "big") & _LOW_64_BITS
