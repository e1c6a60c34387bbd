"""Token encoders for the fast prompt hasher: a whole prompt's tokens at once, or a few.

The reference canonical-CBOR encoder is :mod:`kvpure.hashing.cbor`; these encode only
token ids that are exact ints in a range and leave everything else to it (they return
None). :func:`encode_token_blocks` encodes every token of a prompt as CBOR array items in
a handful of C-level passes and returns them grouped by block. :func:`cbor_token_items`
encodes one block's tokens by table lookup.

Both first check the ids with :func:`exact_int31_records`: ``marshal`` (C) writes an
exact int in ``[-2**31, 2**31)`` as ``b"i"`` and 4 little-endian bytes and anything else
(a bool, an int subclass, a bigger int, another object) otherwise or not at all, so one
call both checks every id and lays out its bytes for the passes that follow.
"""

from __future__ import annotations

import functools
import marshal
import struct
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from typing import cast

from kvpure.hashing.cbor import cbor_head

__all__ = [
    "CBOR_TOKEN_TABLE_SIZE",
    "cbor_token_items",
    "cbor_token_run",
    "cbor_token_table",
    "encode_token_blocks",
    "exact_int31_records",
]


_UINT_BELOW_256 = tuple(cbor_head(0, value) for value in range(256))

_PACK_HEAD_U16 = struct.Struct(">BH").pack
_PACK_HEAD_U32 = struct.Struct(">BI").pack

_MARSHAL_INT = ord("i")  # marshal's TYPE_INT: 4 bytes follow, little-endian, signed


def exact_int31_records(token_ids: Sequence[int]) -> bytes | None:
    """``marshal.dumps(token_ids, 2)`` if every id is an exact int in ``[0, 2**31)``, else None.

    ``token_ids`` must be a list or a tuple (anything else gives None). The result is a
    5-byte head and then one 5-byte record per id: ``b"i"`` and the id's 4 bytes,
    little-endian. Why that proves the ids' type: marshal writes ``b"i"`` and exactly 4
    bytes for an exact int in 32-bit range and nothing else (a bool is one byte, a bigger
    int is ``b"l"`` and its digits, an int subclass cannot be marshalled); if every 5th
    byte from the head is ``b"i"`` and the length is 5 per id, the first record that was
    not an int would have started with ``b"i"``, so there is none. Version 2 writes no
    back-references. The top bit of each id's last byte is its sign.
    """
    count = len(token_ids)
    try:
        # marshal refuses what is not a list or tuple (ValueError), as it refuses odd ids
        records = marshal.dumps(cast("list[int]", token_ids), 2)
    except ValueError:  # an object marshal cannot write (an int subclass, ...)
        return None
    if (
        len(records) != 5 + 5 * count
        or records[5::5].count(_MARSHAL_INT) != count
        or not records[9::5].isascii()  # a negative id
    ):
        return None
    return records


def cbor_token_run(token_ids: Sequence[int]) -> bytes | None:
    """The CBOR items of a few tokens, one by one; None if one is not an int in [0, 2**32)."""
    parts: list[bytes] = []
    append = parts.append
    for value in token_ids:
        if type(value) is not int or value < 0:
            return None
        if value < 256:
            append(_UINT_BELOW_256[value])
        elif value < 0x10000:
            append(_PACK_HEAD_U16(0x19, value))
        elif value < 0x100000000:
            append(_PACK_HEAD_U32(0x1A, value))
        else:
            return None
    return b"".join(parts)


CBOR_TOKEN_TABLE_SIZE = 1 << 18
"""Token ids below this (every vocabulary up to Gemma 3's 262,144) are looked up."""


@functools.cache
def cbor_token_table() -> tuple[bytes, ...]:
    """The CBOR item of every token id below :data:`CBOR_TOKEN_TABLE_SIZE`, by id.

    Built on first use (about 40 ms, 12 MB) and then kept for the process: a pure memo,
    the same table for every caller, never changed.
    """
    items = list(_UINT_BELOW_256)
    items += map(_PACK_HEAD_U16, repeat(0x19), range(256, 0x10000))
    items += map(_PACK_HEAD_U32, repeat(0x1A), range(0x10000, CBOR_TOKEN_TABLE_SIZE))
    return tuple(items)


def cbor_token_items(token_ids: Sequence[int]) -> bytes | None:
    """The CBOR items of a block's tokens; None if one is not an int in [0, 2**32)."""
    if len(token_ids) < 2 or exact_int31_records(token_ids) is None:
        return cbor_token_run(token_ids)  # one by one; it refuses what it cannot encode
    try:
        return b"".join(itemgetter(*token_ids)(cbor_token_table()))
    except IndexError:  # an id past the table
        return cbor_token_run(token_ids)


# ---------------------------------------------------------------------------
# CBOR token encodings for a whole prompt, in a handful of C-level passes.
#
# marshal lays out each id's 4 bytes (little-endian); they are cut into four byte planes.
# A per-token class (0: < 24, 1: one value byte, 3: two, 7: four) is the OR of translated
# planes (the planes read as big ints). Each token then becomes five 16-bit lanes: the
# CBOR head byte and the four value bytes, big-endian; a lane that the token's encoding
# leaves out has its high byte set (U+0100 and up). Decoding the lanes as UTF-16 and
# encoding the text as latin-1, ignoring what latin-1 cannot hold, leaves every token's
# CBOR item, back to back. Each block's length is the sum of its tokens' item lengths (a
# byte plane too), summed per block by one multiplication: multiplying the plane, read as
# a big int, by 0x0101...01 (g ones) puts in each byte the sum of it and the g - 1 bytes
# before it (no carries while g * 5 < 256).
# ---------------------------------------------------------------------------


def _translation(fn: Callable[[int], int]) -> bytes:
    return bytes(fn(value) for value in range(256))


_AT_LEAST_24 = _translation(lambda b: 1 if b >= 24 else 0)
_NONZERO_3 = _translation(lambda b: 3 if b else 0)
_NONZERO_7 = _translation(lambda b: 7 if b else 0)
_CBOR_LEAD = _translation(lambda f: {1: 0x18, 3: 0x19, 7: 0x1A}.get(f, 0))
_DROP_IF_0 = _translation(lambda f: 1 if f == 0 else 0)
_DROP_IF_BELOW_3 = _translation(lambda f: 1 if f <= 1 else 0)
_DROP_UNLESS_7 = _translation(lambda f: 0 if f == 7 else 1)
_ITEM_LENGTH = _translation(lambda f: {0: 1, 1: 2, 3: 3, 7: 5}.get(f, 0))

_MAX_GROUP = 51  # 51 items of at most 5 bytes: a byte holds their total length


def _group_size(block_size: int) -> int:
    """The biggest divisor of ``block_size`` whose lengths one byte can sum."""
    return max(g for g in range(1, min(block_size, _MAX_GROUP) + 1) if block_size % g == 0)


def _block_lengths(lengths: bytes, block_size: int) -> list[int]:
    """The sum of each ``block_size`` consecutive bytes of ``lengths`` (items of <= 5)."""
    count = len(lengths)
    group = _group_size(block_size)
    ones = int.from_bytes(b"\x01" * group, "little")
    sums = (int.from_bytes(lengths, "little") * ones).to_bytes(count + group, "little")
    group_sums = sums[group - 1 : count : group]
    per_block = block_size // group
    if per_block == 1:
        return list(group_sums)
    return list(map(sum, zip(*[iter(group_sums)] * per_block, strict=True)))


_CHUNK_TOKENS = 4096  # a chunk's buffers (some 100 kB) stay in the CPU's cache


def encode_token_blocks(token_ids: Sequence[int], block_size: int) -> list[bytes] | None:
    """Each block's tokens as CBOR array items (no array head), or None.

    ``token_ids`` holds whole blocks. None when it is empty, or is not a list or a tuple,
    or a token is not an exact int in ``[0, 2**31)``: the caller then uses the reference
    encoder. Long prompts are encoded a few thousand tokens at a time.
    """
    count = len(token_ids)
    if count == 0 or block_size < 1 or count % block_size:
        return None
    chunk = max(block_size, _CHUNK_TOKENS // block_size * block_size)
    if count <= chunk:
        return _encode_chunk(token_ids, block_size)
    blocks: list[bytes] = []
    for start in range(0, count, chunk):
        part = _encode_chunk(token_ids[start : start + chunk], block_size)
        if part is None:
            return None
        blocks += part
    return blocks


def _encode_chunk(token_ids: Sequence[int], block_size: int) -> list[bytes] | None:
    """:func:`encode_token_blocks` of whole blocks, all at once."""
    count = len(token_ids)
    records = exact_int31_records(token_ids)
    if records is None:
        return None
    b0, b1, b2, b3 = records[6::5], records[7::5], records[8::5], records[9::5]
    classes = (
        int.from_bytes(b0.translate(_AT_LEAST_24), "little")
        | int.from_bytes(b1.translate(_NONZERO_3), "little")
        | int.from_bytes(b2.translate(_NONZERO_7), "little")
    )
    if b3.count(0) != count:  # ids of 2**24 and more (no vocabulary has them)
        classes |= int.from_bytes(b3.translate(_NONZERO_7), "little")
    flags = classes.to_bytes(count, "little")
    lanes = bytearray(10 * count)
    lanes[0::10] = flags.translate(_CBOR_LEAD)  # the head byte, then the value big-endian
    lanes[1::10] = flags.translate(_DROP_IF_0)  # below 24 the value is the head
    drop_unless_7 = flags.translate(_DROP_UNLESS_7)
    lanes[2::10], lanes[3::10] = b3, drop_unless_7
    lanes[4::10], lanes[5::10] = b2, drop_unless_7
    lanes[6::10], lanes[7::10] = b1, flags.translate(_DROP_IF_BELOW_3)
    lanes[8::10] = b0
    items = lanes.decode("utf-16-le").encode("latin-1", "ignore")
    offsets = list(accumulate(_block_lengths(flags.translate(_ITEM_LENGTH), block_size)))
    return list(map(items.__getitem__, map(slice, [0, *offsets[:-1]], offsets)))
