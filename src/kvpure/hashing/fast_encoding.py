"""Encoders for the fast prompt hasher: canonical CBOR, and a whole prompt's tokens at once.

:func:`cbor_dumps` is a reference canonical-CBOR encoder (``cbor2.dumps(x, canonical=True)``
for the kinds of values vLLM hashes). :func:`encode_token_blocks` encodes every token of a
prompt as CBOR array items in a handful of C-level passes and returns them grouped by
block. :func:`cbor_token_run` does the same for a few tokens,
one by one, without the whole-prompt setup.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

from kvpure.errors import CborEncodeError

__all__ = [
    "all_plain_ints",
    "cbor_dumps",
    "cbor_head",
    "cbor_memo",
    "cbor_token_run",
    "encode_token_blocks",
]


# ---------------------------------------------------------------------------
# Canonical CBOR (the reference encoder for the *_cbor algorithms)
# ---------------------------------------------------------------------------


def cbor_head(major: int, value: int) -> bytes:
    """The shortest CBOR head of ``major`` type carrying ``value`` (0 <= value < 2**64)."""
    tag = major << 5
    if value < 24:
        return bytes((tag | value,))
    if value < 0x100:
        return bytes((tag | 24, value))
    if value < 0x10000:
        return bytes((tag | 25,)) + value.to_bytes(2, "big")
    if value < 0x100000000:
        return bytes((tag | 26,)) + value.to_bytes(4, "big")
    return bytes((tag | 27,)) + value.to_bytes(8, "big")


_UINT_BELOW_256 = tuple(cbor_head(0, value) for value in range(256))
_TEXT_HEADS = tuple(cbor_head(3, length) for length in range(256))
_BYTES_HEADS = tuple(cbor_head(2, length) for length in range(256))


def _cbor_int(value: int) -> bytes:
    if 0 <= value < 256:
        return _UINT_BELOW_256[value]
    if 0 <= value < 1 << 64:
        return cbor_head(0, value)
    if -(1 << 64) <= value < 0:
        return cbor_head(1, -1 - value)
    lead, magnitude = (b"\xc2", value) if value > 0 else (b"\xc3", -1 - value)
    digits = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
    return lead + cbor_head(2, len(digits)) + digits


def _cbor_text(value: str) -> bytes:
    data = value.encode("utf-8")
    size = len(data)
    return (_TEXT_HEADS[size] if size < 256 else cbor_head(3, size)) + data


def _cbor_bytes(value: bytes | bytearray) -> bytes:
    size = len(value)
    return (_BYTES_HEADS[size] if size < 256 else cbor_head(2, size)) + value


def _cbor_array(value: Sequence[object]) -> bytes:
    return cbor_head(4, len(value)) + b"".join([cbor_dumps(item) for item in value])


def _cbor_float(value: float) -> bytes:
    if math.isnan(value):
        return b"\xf9\x7e\x00"
    for fmt, lead in ((">e", b"\xf9"), (">f", b"\xfa")):
        try:
            packed = struct.pack(fmt, value)
        except OverflowError:
            continue
        if struct.unpack(fmt, packed)[0] == value:
            return lead + packed
    return b"\xfb" + struct.pack(">d", value)


def _cbor_none(_value: None) -> bytes:
    return b"\xf6"


def _cbor_bool(value: bool) -> bytes:
    return b"\xf5" if value else b"\xf4"


# Exact types only: a subclass (an IntEnum, a str subclass) is refused, never guessed at.
_CBOR_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    str: _cbor_text,
    int: _cbor_int,
    tuple: _cbor_array,
    list: _cbor_array,
    bytes: _cbor_bytes,
    bytearray: _cbor_bytes,
    type(None): _cbor_none,
    bool: _cbor_bool,
    float: _cbor_float,
}


def cbor_dumps(obj: object) -> bytes:
    """Encode ``obj`` as ``cbor2.dumps(obj, canonical=True)`` does.

    Supports None, bool, int (bignums included), float, bytes, bytearray, str, tuple and
    list: every kind of value vLLM puts in a block-hash payload. Raises
    :class:`~kvpure.errors.CborEncodeError` for anything else.
    """
    encoder = _CBOR_ENCODERS.get(type(obj))
    if encoder is None:
        raise CborEncodeError(
            type_name=type(obj).__name__,
            reason="block-hash payloads hold only None, bool, int, float, bytes, str, tuple "
            "and list (exactly these types, not subclasses)",
        )
    return encoder(obj)


def cbor_memo(obj: object, memo: dict[int, bytes]) -> bytes:
    """:func:`cbor_dumps`, remembering each object's encoding by identity.

    ``memo`` must only live while every object it has seen is alive (one call of the
    hasher, which holds the extra keys), since identities are reused after that.
    """
    encoded = memo.get(id(obj))
    if encoded is None:
        if type(obj) is tuple or type(obj) is list:
            items: Sequence[object] = obj
            encoded = cbor_head(4, len(items)) + b"".join([cbor_memo(i, memo) for i in items])
        else:
            encoded = cbor_dumps(obj)
        memo[id(obj)] = encoded
    return encoded


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
