"""Token encoders for the fast prompt hasher: a whole prompt's tokens at once, or a few.

The reference canonical-CBOR encoder is :mod:`kvpure.hashing.cbor`; these encode only
token ids that are plain ints in ``[0, 2**32)`` and leave everything else to it.
:func:`encode_token_blocks` encodes every token of a prompt as CBOR array items in a
handful of C-level passes and returns them grouped by block. :func:`cbor_token_run` does
the same for a few tokens, one by one, without the whole-prompt setup.
"""

from __future__ import annotations

import functools
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter

from kvpure.hashing.cbor import cbor_head

__all__ = [
    "CBOR_TOKEN_TABLE_SIZE",
    "all_plain_ints",
    "cbor_token_items",
    "cbor_token_run",
    "cbor_token_table",
    "encode_token_blocks",
]


_UINT_BELOW_256 = tuple(cbor_head(0, value) for value in range(256))

_PACK_HEAD_U16 = struct.Struct(">BH").pack
_PACK_HEAD_U32 = struct.Struct(">BI").pack


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
    count = len(token_ids)
    if count < 2 or tuple(map(type, token_ids)).count(int) != count or min(token_ids) < 0:
        return cbor_token_run(token_ids)  # one by one; it refuses what it cannot encode
    try:
        return b"".join(itemgetter(*token_ids)(cbor_token_table()))
    except IndexError:  # an id past the table
        return cbor_token_run(token_ids)


# ---------------------------------------------------------------------------
# CBOR token encodings for a whole prompt, in a handful of C-level passes.
#
# The ids become 4-byte ints (``array``: this also rejects ids out of range), cut into four
# byte planes. A per-token class flag (0: < 24, 1: one byte, 3: two, 7: four) is the OR of
# translated planes (bitwise OR of the planes read as big ints). Each token then becomes six
# 16-bit lanes: the CBOR head byte, four value bytes (big-endian), a separator. Lanes that the
# encoding leaves out hold U+0100; the separator lane of a block's last token holds U+0101.
# Decoding as UTF-16, splitting at U+0101 and encoding each piece as latin-1 while ignoring
# what latin-1 cannot hold (U+0100) leaves each block's token bytes.
# ---------------------------------------------------------------------------


def _translation(fn: Callable[[int], int]) -> bytes:
    return bytes(fn(value) for value in range(256))


_AT_LEAST_24 = _translation(lambda b: 1 if b >= 24 else 0)
_NONZERO_3 = _translation(lambda b: 3 if b else 0)
_NONZERO_7 = _translation(lambda b: 7 if b else 0)
_CBOR_LEAD = _translation(lambda f: {1: 0x18, 3: 0x19, 7: 0x1A}.get(f, 0))
_DROP_IF_0 = _translation(lambda f: 1 if f == 0 else 0)
_DROP_IF_1 = _translation(lambda f: 1 if f <= 1 else 0)
_DROP_UNLESS_7 = _translation(lambda f: 0 if f == 7 else 1)


def _bitwise_or(planes: Sequence[bytes]) -> bytes:
    total = 0
    for plane in planes:
        total |= int.from_bytes(plane, "little")
    return total.to_bytes(len(planes[0]), "little")


def all_plain_ints(values: Sequence[object]) -> bool:
    """Whether every value is exactly an int (not a bool or another int subclass)."""
    return tuple(map(type, values)).count(int) == len(values)


def encode_token_blocks(token_ids: Sequence[int], block_size: int) -> list[bytes] | None:
    """Each block's tokens as CBOR array items (no array head), or None.

    None when a token is not a plain int in ``[0, 2**32)``: the caller then uses the
    reference encoder.
    """
    count = len(token_ids)
    if count == 0 or not all_plain_ints(token_ids):
        return None
    try:
        words = array("I", token_ids)
    except OverflowError:
        return None
    if words.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte C ints
        return None
    if sys.byteorder != "little":  # pragma: no cover
        words.byteswap()
    raw = words.tobytes()
    b0, b1, b2, b3 = raw[0::4], raw[1::4], raw[2::4], raw[3::4]
    flags = _bitwise_or(
        (
            b0.translate(_AT_LEAST_24),
            b1.translate(_NONZERO_3),
            b2.translate(_NONZERO_7),
            b3.translate(_NONZERO_7),
        )
    )
    lanes = bytearray(12 * count)
    lanes[0::12] = flags.translate(_CBOR_LEAD)  # the head byte, then the value big-endian
    lanes[1::12] = flags.translate(_DROP_IF_0)
    drop_unless_7 = flags.translate(_DROP_UNLESS_7)
    lanes[2::12], lanes[3::12] = b3, drop_unless_7
    lanes[4::12], lanes[5::12] = b2, drop_unless_7
    lanes[6::12], lanes[7::12] = b1, flags.translate(_DROP_IF_1)
    lanes[8::12] = b0
    lanes[10::12] = (bytes(block_size - 1) + b"\x01") * (count // block_size)
    lanes[11::12] = b"\x01" * count
    blocks = lanes.decode("utf-16-le").split("\u0101")
    blocks.pop()  # the empty text after the last separator
    return list(map(str.encode, blocks, repeat("latin-1"), repeat("ignore")))
