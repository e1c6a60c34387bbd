"""kvpure's one canonical CBOR encoder for block-hash payloads, byte-identical to cbor2.

vLLM's ``sha256_cbor`` and ``xxhash_cbor`` hash ``cbor2.dumps(x, canonical=True)``
of the payload ``(parent_hash, token_ids, extra_keys)``. That payload holds
only None, bools, ints, floats, bytes, str and tuples/lists, so kvpure encodes
those itself (RFC 8949 shortest-form heads) and keeps cbor2 out of its runtime
dependencies:

- None is ``f6``; False/True are ``f4``/``f5``.
- An int ``n`` with ``0 <= n < 2**64`` is major type 0; with ``-2**64 <= n < 0``
  major type 1 carrying ``-1 - n``. Beyond that it is a bignum as cbor2 writes
  it: tag 2 (``c2``) or tag 3 (``c3``, carrying ``-1 - n``) over the minimal
  big-endian bytes.
- bytes/bytearray are major type 2, str is major type 3 over its UTF-8 bytes,
  tuples and lists are arrays (major type 4).
- A float is the shortest of half, single and double precision that keeps its
  value (NaN ``f97e00``), as cbor2's canonical mode writes it.
- Subclasses (an IntEnum, a str subclass, a namedtuple) are encoded as their base
  type, as cbor2 does; bool is checked before int.

:func:`canonical_cbor_dumps` is the reference; :func:`canonical_cbor_dumps_memo`
is the same encoding remembering each object's bytes by identity (the fast
prompt hasher encodes each distinct extra-keys object once with it).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

from kvpure.hashing.errors import CborEncodeError

__all__ = ["canonical_cbor_dumps", "canonical_cbor_dumps_memo", "cbor_head"]

_UINT64_LIMIT = 1 << 64


def cbor_head(major: int, value: int) -> bytes:
    """The shortest head of ``major`` type carrying ``value`` (``0 <= value < 2**64``)."""
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


def _encode_int(value: int) -> bytes:
    if 0 <= value < 256:
        return _UINT_BELOW_256[value]
    if 0 <= value < _UINT64_LIMIT:
        return cbor_head(0, value)
    if -_UINT64_LIMIT <= value < 0:
        return cbor_head(1, -1 - value)
    lead, magnitude = (b"\xc2", value) if value > 0 else (b"\xc3", -1 - value)
    digits = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
    return lead + cbor_head(2, len(digits)) + digits


def _encode_text(value: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise CborEncodeError(type_name="str", reason=f"not valid UTF-8: {err}") from err
    return cbor_head(3, len(data)) + data


def _encode_bytes(value: bytes | bytearray) -> bytes:
    return cbor_head(2, len(value)) + value


def _encode_float(value: float) -> bytes:
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


def _encode_none(_value: None) -> bytes:
    return b"\xf6"


def _encode_bool(value: bool) -> bytes:
    return b"\xf5" if value else b"\xf4"


def _encode_array(value: tuple[object, ...] | list[object]) -> bytes:
    return cbor_head(4, len(value)) + b"".join([canonical_cbor_dumps(item) for item in value])


# The base types in the order a subclass is matched (bool before int).
_ENCODERS: tuple[tuple[type, Callable[[Any], bytes]], ...] = (
    (type(None), _encode_none),
    (bool, _encode_bool),
    (int, _encode_int),
    (str, _encode_text),
    (bytes, _encode_bytes),
    (bytearray, _encode_bytes),
    (tuple, _encode_array),
    (list, _encode_array),
    (float, _encode_float),
)
_EXACT: dict[type, Callable[[Any], bytes]] = dict(_ENCODERS)


def _encoder_of(value: object) -> Callable[[Any], bytes]:
    encoder = _EXACT.get(type(value))
    if encoder is not None:
        return encoder
    for base, base_encoder in _ENCODERS:
        if isinstance(value, base):
            return base_encoder
    raise CborEncodeError(
        type_name=type(value).__name__,
        reason="block-hash payloads hold only None, bool, int, float, bytes, str, tuple and list",
    )


def canonical_cbor_dumps(value: object) -> bytes:
    """``cbor2.dumps(value, canonical=True)`` for block-hash payload values."""
    return _encoder_of(value)(value)


def canonical_cbor_dumps_memo(value: object, memo: dict[int, bytes]) -> bytes:
    """:func:`canonical_cbor_dumps`, remembering each object's encoding by identity.

    ``memo`` must live only while every object it has seen is alive (one call of the
    hasher, which holds the extra keys), since identities are reused after that.
    """
    encoded = memo.get(id(value))
    if encoded is None:
        if isinstance(value, tuple | list):
            parts = [canonical_cbor_dumps_memo(item, memo) for item in value]
            encoded = cbor_head(4, len(parts)) + b"".join(parts)
        else:
            encoded = canonical_cbor_dumps(value)
        memo[id(value)] = encoded
    return encoded
