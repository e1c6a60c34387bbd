"""A canonical CBOR encoder for block-hash payloads, byte-identical to cbor2.

vLLM's ``sha256_cbor`` and ``xxhash_cbor`` hash ``cbor2.dumps(x, canonical=True)``
of the payload ``(parent_hash, token_ids, extra_keys)``. That payload holds
only None, bools, ints, bytes, str and tuples/lists, so kvpure encodes those
itself (RFC 8949 shortest-form heads) and keeps cbor2 out of its runtime
dependencies:

- None is ``f6``; False/True are ``f4``/``f5``.
- An int ``n`` with ``0 <= n < 2**64`` is major type 0; with ``-2**64 <= n < 0``
  major type 1 carrying ``-1 - n``. Beyond that it is a bignum as cbor2 writes
  it: tag 2 (``c2``) or tag 3 (``c3``, carrying ``-1 - n``) over the minimal
  big-endian bytes.
- bytes/bytearray are major type 2, str is major type 3 over its UTF-8 bytes,
  tuples and lists are arrays (major type 4).
"""

from __future__ import annotations

from kvpure.errors import CborEncodeError

_UINT64_LIMIT = 1 << 64


def _head(major: int, value: int, out: bytearray) -> None:
    """Append the shortest head for ``major`` with argument ``value`` (< 2**64)."""
    tag = major << 5
    if value < 24:
        out.append(tag | value)
    elif value < 0x100:
        out.append(tag | 24)
        out.append(value)
    elif value < 0x10000:
        out.append(tag | 25)
        out += value.to_bytes(2, "big")
    elif value < 0x100000000:
        out.append(tag | 26)
        out += value.to_bytes(4, "big")
    else:
        out.append(tag | 27)
        out += value.to_bytes(8, "big")


def _encode_int(value: int, out: bytearray) -> None:
    if 0 <= value < _UINT64_LIMIT:
        _head(0, value, out)
    elif -_UINT64_LIMIT <= value < 0:
        _head(1, -1 - value, out)
    else:
        negative = value < 0
        magnitude = -1 - value if negative else value
        payload = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
        _head(6, 3 if negative else 2, out)
        _head(2, len(payload), out)
        out += payload


def _encode(value: object, out: bytearray) -> None:
    if value is None:
        out.append(0xF6)
    elif value is True:
        out.append(0xF5)
    elif value is False:
        out.append(0xF4)
    elif isinstance(value, int):
        _encode_int(value, out)
    elif isinstance(value, bytes | bytearray):
        _head(2, len(value), out)
        out += value
    elif isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise CborEncodeError(type_name="str", reason=f"not valid UTF-8: {err}") from err
        _head(3, len(data), out)
        out += data
    elif isinstance(value, tuple | list):
        _head(4, len(value), out)
        for item in value:
            _encode(item, out)
    else:
        raise CborEncodeError(
            type_name=type(value).__name__,
            reason="block-hash payloads hold only None, bool, int, bytes, str, tuple and list",
        )


def canonical_cbor_dumps(value: object) -> bytes:
    """``cbor2.dumps(value, canonical=True)`` for block-hash payload values."""
    out = bytearray()
    _encode(value, out)
    return bytes(out)
