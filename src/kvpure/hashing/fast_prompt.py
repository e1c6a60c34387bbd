"""Fast chain hashing of a prompt's token blocks, byte-identical to vLLM's per-block method.

vLLM hashes block ``i`` as ``H(serialise((parent_i, tuple(tokens_i), extra_keys[i])))`` where
``parent_i`` is the digest of block ``i - 1``. Almost all of its time goes to serialising
each payload in a Python loop. Here the payloads are built for the whole prompt at once:

- every token is looked up in a table of its encoding (canonical CBOR or pickle protocol 5:
  both encode an int independently of its neighbours), and the per-block pieces are joined
  in C (``zip`` over one iterator groups the encodings by block);
- each distinct extra-keys tuple is encoded once (pickle: in a context with the same memo
  numbering as the real payload, so memo references inside it come out the same);
- only the chain itself (``H(prefix + parent + tail)``) runs as a Python loop.

Anything outside that domain (tokens that are not plain ints or are negative or >= 2**18,
a parent that pickle would reference from inside the extra keys, pickles that need more
than one frame) goes to the reference serialisation (``pickle.dumps`` or
:func:`cbor_dumps`), never to a different hash.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from itertools import repeat

import xxhash

from kvpure.errors import InvalidFieldError

__all__ = [
    "HASH_ALGORITHMS",
    "block_payloads",
    "cbor_dumps",
    "hash_token_blocks",
    "reference_payload",
]

#: vLLM's prefix-caching hash algorithms, and whether each serialises with CBOR.
HASH_ALGORITHMS: dict[str, bool] = {
    "sha256": False,
    "sha256_cbor": True,
    "xxhash": False,
    "xxhash_cbor": True,
}

_DIGEST_BYTES = {"sha256": 32, "sha256_cbor": 32, "xxhash": 16, "xxhash_cbor": 16}
_INT_ONLY = frozenset({int})
_PICKLE_MAX_BODY = 65_000  # the C pickler opens a second frame at 64 KiB
_PICKLE_PLAIN = (str, bytes, int, float, bool, type(None))

# ---------------------------------------------------------------------------
# Canonical CBOR (the reference encoder for the *_cbor algorithms)
# ---------------------------------------------------------------------------


def _cbor_head(major: int, value: int) -> bytes:
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


def cbor_dumps(obj: object) -> bytes:
    """Encode ``obj`` as ``cbor2.dumps(obj, canonical=True)`` does.

    Supports None, bool, int (bignums included), float, bytes, bytearray, str, tuple and
    list: every kind of value vLLM puts in a block-hash payload. Raises
    :class:`~kvpure.errors.InvalidFieldError` for anything else.
    """
    if obj is None:
        return b"\xf6"
    if type(obj) is bool:
        return b"\xf5" if obj else b"\xf4"
    if type(obj) is int:
        if 0 <= obj < 1 << 64:
            return _cbor_head(0, obj)
        if -(1 << 64) <= obj < 0:
            return _cbor_head(1, -1 - obj)
        lead, magnitude = (b"\xc2", obj) if obj > 0 else (b"\xc3", -1 - obj)
        digits = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")
        return lead + _cbor_head(2, len(digits)) + digits
    if type(obj) is bytes or type(obj) is bytearray:
        return _cbor_head(2, len(obj)) + obj
    if type(obj) is str:
        text = obj.encode("utf-8")
        return _cbor_head(3, len(text)) + text
    if type(obj) is tuple or type(obj) is list:
        return _cbor_head(4, len(obj)) + b"".join([cbor_dumps(item) for item in obj])
    if type(obj) is float:
        return _cbor_float(obj)
    raise InvalidFieldError(
        field="extra_keys",
        value=obj,
        reason=f"a CBOR block-hash payload can hold None, bool, int, float, bytes, str, "
        f"tuple or list, not {type(obj).__name__}",
    )


def _cbor_memo(obj: object, memo: dict[int, bytes]) -> bytes:
    """:func:`cbor_dumps`, remembering each object's encoding by identity (for one call)."""
    encoded = memo.get(id(obj))
    if encoded is None:
        if type(obj) is tuple or type(obj) is list:
            items: Sequence[object] = obj
            encoded = _cbor_head(4, len(items)) + b"".join([_cbor_memo(i, memo) for i in items])
        else:
            encoded = cbor_dumps(obj)
        memo[id(obj)] = encoded
    return encoded


# ---------------------------------------------------------------------------
# Token encodings for a whole prompt, in a handful of C-level passes.
#
# The ids become 4-byte ints (``array``: this also rejects ids out of range), cut into four
# byte planes. A per-token class flag (0: < 24, 1: one byte, 3: two, 7: four) is the OR of
# translated planes (bitwise OR of the planes read as big ints). Each token then becomes six
# 16-bit lanes: opcode or CBOR head byte, four value bytes, separator. Lanes that the
# encoding leaves out hold U+0100; the separator lane of a block's last token holds U+0101.
# Decoding as UTF-16, splitting at U+0101 and encoding each piece as latin-1 while ignoring
# what latin-1 cannot hold (U+0100) leaves each block's token bytes.
# ---------------------------------------------------------------------------


def _translation(fn: Callable[[int], int]) -> bytes:
    return bytes(fn(value) for value in range(256))


_ALL_ONE = _translation(lambda b: 1)
_AT_LEAST_24 = _translation(lambda b: 1 if b >= 24 else 0)
_NONZERO_3 = _translation(lambda b: 3 if b else 0)
_NONZERO_7 = _translation(lambda b: 7 if b else 0)
_CBOR_LEAD = _translation(lambda f: {1: 0x18, 3: 0x19, 7: 0x1A}.get(f, 0))
_PICKLE_OPCODE = _translation(lambda f: {1: 0x4B, 3: 0x4D, 7: 0x4A}.get(f, 0))  # K, M, J
_DROP_IF_0 = _translation(lambda f: 1 if f == 0 else 0)
_DROP_IF_1 = _translation(lambda f: 1 if f <= 1 else 0)
_DROP_UNLESS_7 = _translation(lambda f: 0 if f == 7 else 1)


def _bitwise_or(planes: Sequence[bytes]) -> bytes:
    total = 0
    for plane in planes:
        total |= int.from_bytes(plane, "little")
    return total.to_bytes(len(planes[0]), "little")


def _block_token_bytes(cbor: bool, token_ids: Sequence[int], block_size: int) -> list[bytes] | None:
    """Each block's token encodings (CBOR array items / pickle tuple items), or None.

    None when a token is not a plain int or is out of the 4-byte range (CBOR: 0 <= id <
    2**32; pickle: BININT's -2**31 <= id < 2**31): the caller then uses the reference.
    """
    count = len(token_ids)
    if count == 0 or set(map(type, token_ids)) != _INT_ONLY:
        return None
    try:
        words = array("I" if cbor else "i", token_ids)
    except OverflowError:
        return None
    if words.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte C ints
        return None
    if sys.byteorder != "little":  # pragma: no cover
        words.byteswap()
    raw = words.tobytes()
    b0, b1, b2, b3 = raw[0::4], raw[1::4], raw[2::4], raw[3::4]
    low = b0.translate(_AT_LEAST_24 if cbor else _ALL_ONE)
    flags = _bitwise_or(
        (low, b1.translate(_NONZERO_3), b2.translate(_NONZERO_7), b3.translate(_NONZERO_7))
    )
    lanes = bytearray(12 * count)
    value_lanes: tuple[tuple[bytes, bytes | None], ...]
    if cbor:  # head byte, then the value big-endian
        lanes[0::12] = flags.translate(_CBOR_LEAD)
        lanes[1::12] = flags.translate(_DROP_IF_0)
        value_lanes = ((b3, _DROP_UNLESS_7), (b2, _DROP_UNLESS_7), (b1, _DROP_IF_1), (b0, None))
    else:  # opcode, then the value little-endian
        lanes[0::12] = flags.translate(_PICKLE_OPCODE)
        value_lanes = ((b0, None), (b1, _DROP_IF_1), (b2, _DROP_UNLESS_7), (b3, _DROP_UNLESS_7))
    for lane, (plane, drop) in enumerate(value_lanes, start=1):
        lanes[2 * lane :: 12] = plane
        if drop is not None:
            lanes[2 * lane + 1 :: 12] = flags.translate(drop)
    lanes[10::12] = (bytes(block_size - 1) + b"\x01") * (count // block_size)
    lanes[11::12] = b"\x01" * count
    blocks = lanes.decode("utf-16-le").split("\u0101")
    blocks.pop()  # the empty text after the last separator
    return list(map(str.encode, blocks, repeat("latin-1"), repeat("ignore")))


# ---------------------------------------------------------------------------
# Payload tails: everything of block i's payload that follows the parent digest
# ---------------------------------------------------------------------------


def _cbor_tails(
    token_ids: Sequence[int], block_size: int, extras: tuple[object, ...]
) -> list[bytes] | None:
    """Per block: array head, token encodings, extra keys (the payload after the parent)."""
    token_parts = _block_token_bytes(True, token_ids, block_size)
    if token_parts is None:
        return None
    memo: dict[int, bytes] = {}
    by_items: dict[tuple[int, ...], bytes] = {}
    extra_parts: list[bytes] = []
    for extra in extras:
        if extra is None:
            extra_parts.append(b"\xf6")
        elif type(extra) is tuple:
            key = tuple(map(id, extra))
            part = by_items.get(key)
            if part is None:
                part = by_items[key] = _cbor_memo(extra, memo)
            extra_parts.append(part)
        else:
            extra_parts.append(cbor_dumps(extra))
    grouped = zip(repeat(_cbor_head(4, block_size)), token_parts, extra_parts)
    return list(map(b"".join, grouped))


def _pickle_extra_segment(
    extra: object, without: int, probe: tuple[bytes, tuple[int, ...]]
) -> bytes:
    """The opcodes pickle writes for ``extra`` as the third item of a block payload.

    Pickled after a bytes and a tuple, as in the real payload, so memo references inside
    ``extra`` get the same numbers.
    """
    return pickle.dumps((*probe, extra), protocol=5)[without:-3]


def _pickle_tails(
    token_ids: Sequence[int], block_size: int, extras: tuple[object, ...]
) -> list[bytes] | None:
    """Per block: MEMOIZE of the parent, the token tuple, the extra keys, TUPLE3, STOP."""
    token_parts = _block_token_bytes(False, token_ids, block_size)
    if token_parts is None:
        return None
    if block_size >= 4:
        opening, closing = b"\x94(", b"t\x94"
    else:
        opening, closing = b"\x94", bytes((0x84 + block_size,)) + b"\x94"
    probe = (bytes(bytearray(b"kv")), tuple([0]))  # fresh objects: nothing in extras is them
    without = len(pickle.dumps((*probe, None), protocol=5)) - 4
    by_items: dict[object, bytes] = {}
    extra_parts: list[bytes] = []
    for extra in extras:
        if extra is None:
            extra_parts.append(closing + b"N\x87\x94.")
            continue
        key: object = tuple(map(id, extra)) if type(extra) is tuple else id(extra)
        part = by_items.get(key)
        if part is None:
            segment = _pickle_extra_segment(extra, without, probe)
            part = by_items[key] = closing + segment + b"\x87\x94."
        extra_parts.append(part)
    grouped = zip(repeat(opening), token_parts, extra_parts)
    tails = list(map(b"".join, grouped))
    if max(map(len, tails)) > _PICKLE_MAX_BODY:
        return None
    return tails


def _pickle_head(parent_bytes: int, tail_bytes: int) -> bytes:
    """PROTO 5, FRAME (length of the rest), SHORT_BINBYTES opcode and length of the parent."""
    body = 2 + parent_bytes + tail_bytes
    return b"\x80\x05\x95" + body.to_bytes(8, "little") + bytes((0x43, parent_bytes))


def _reaches(obj: object, forbidden: frozenset[int]) -> bool:
    """Whether pickling ``obj`` may meet one of the ``forbidden`` objects (by identity)."""
    if id(obj) in forbidden:
        return True
    if type(obj) is tuple or type(obj) is list:
        return any(_reaches(item, forbidden) for item in obj)
    return type(obj) not in _PICKLE_PLAIN


def _fast_head_ok(cbor: bool, parent: bytes, extra: object, forbidden: frozenset[int]) -> bool:
    """Whether a block with this parent can use the prebuilt tail (else: reference)."""
    if type(parent) is not bytes:
        return False
    if cbor:
        return True
    return len(parent) < 256 and (extra is None or not _reaches(extra, forbidden))


def _head(cbor: bool, parent_bytes: int, tail_bytes: int) -> bytes:
    if cbor:
        return b"\x83" + _cbor_head(2, parent_bytes)
    return _pickle_head(parent_bytes, tail_bytes)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def reference_payload(
    algo_name: str, parent: bytes, block_token_ids: Sequence[int], extra: object
) -> bytes:
    """The bytes vLLM hashes for one block: its serialisation of ``(parent, tokens, extra)``."""
    payload = (parent, tuple(block_token_ids), extra)
    if _check_algo(algo_name):
        return cbor_dumps(payload)
    return pickle.dumps(payload, protocol=5)


def _check_algo(algo_name: str) -> bool:
    cbor = HASH_ALGORITHMS.get(algo_name)
    if cbor is None:
        raise InvalidFieldError(
            field="algo_name",
            value=algo_name,
            reason=f"expected one of {', '.join(sorted(HASH_ALGORITHMS))}",
        )
    return cbor


def _check_sizes(token_ids: Sequence[int], block_size: int, num_blocks: int) -> int:
    if block_size < 1:
        raise InvalidFieldError(
            field="block_size", value=block_size, reason="a block holds at least 1 token"
        )
    num_tokens = num_blocks * block_size
    if len(token_ids) < num_tokens:
        raise InvalidFieldError(
            field="token_ids",
            value=len(token_ids),
            reason=f"{num_blocks} blocks of {block_size} tokens need {num_tokens} token ids",
        )
    return num_tokens


def _tails(
    cbor: bool, token_ids: Sequence[int], block_size: int, extras: tuple[object, ...]
) -> list[bytes] | None:
    num_tokens = len(extras) * block_size
    used = token_ids if len(token_ids) == num_tokens else token_ids[:num_tokens]
    if cbor:
        return _cbor_tails(used, block_size, extras)
    return _pickle_tails(used, block_size, extras)


def block_payloads(
    algo_name: str,
    parents: Sequence[bytes],
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: Sequence[tuple[object, ...] | None],
) -> list[bytes]:
    """The serialised payload of every block, block ``i`` with parent ``parents[i]``.

    Built by the same fast path as :func:`hash_token_blocks` (so tests can compare bytes,
    not just digests); each equals ``reference_payload(algo_name, parents[i], tokens_i,
    extra_keys[i])``.
    """
    cbor = _check_algo(algo_name)
    extras = tuple(extra_keys)
    _check_sizes(token_ids, block_size, len(extras))
    if len(parents) != len(extras):
        raise InvalidFieldError(
            field="parents", value=len(parents), reason=f"expected one per block ({len(extras)})"
        )
    tails = _tails(cbor, token_ids, block_size, extras)
    whole = frozenset({id(token_ids)}) if len(extras) == 1 else frozenset()
    out = []
    for index, (parent, extra) in enumerate(zip(parents, extras, strict=True)):
        if tails is not None and _fast_head_ok(cbor, parent, extra, whole | {id(parent)}):
            tail = tails[index]
            out.append(_head(cbor, len(parent), len(tail)) + parent + tail)
        else:
            start = index * block_size
            out.append(
                reference_payload(algo_name, parent, token_ids[start : start + block_size], extra)
            )
    return out


def _digest_fn(algo_name: str) -> Callable[[bytes], bytes]:
    if algo_name.startswith("sha256"):
        return lambda data: hashlib.sha256(data).digest()
    return xxhash.xxh3_128_digest


def hash_token_blocks(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: Sequence[tuple[object, ...] | None],
) -> list[bytes]:
    """Chain-hash ``len(extra_keys)`` full blocks of ``token_ids``, as vLLM does.

    Block ``i`` covers ``token_ids[i * block_size : (i + 1) * block_size]``; its digest is
    ``H(serialise((parent_i, tuple(tokens_i), extra_keys[i])))`` with ``parent_0 =
    parent`` and ``parent_i`` the digest of block ``i - 1``. ``algo_name`` is one of
    :data:`HASH_ALGORITHMS`. The result is byte-identical to hashing block by block.
    """
    cbor = _check_algo(algo_name)
    extras = tuple(extra_keys)
    _check_sizes(token_ids, block_size, len(extras))
    if not extras:
        return []
    tails = _tails(cbor, token_ids, block_size, extras) if len(extras) > 1 or cbor else None
    if tails is None:
        return _reference_chain(algo_name, parent, token_ids, block_size, extras)
    digest = _digest_fn(algo_name)
    whole = frozenset({id(token_ids), id(parent)}) if len(extras) == 1 else frozenset({id(parent)})
    if _fast_head_ok(cbor, parent, extras[0], whole):
        parent = digest(_head(cbor, len(parent), len(tails[0])) + parent + tails[0])
    else:
        parent = digest(reference_payload(algo_name, parent, token_ids[:block_size], extras[0]))
    return _chain(algo_name, cbor, parent, tails)


def _chain(algo_name: str, cbor: bool, first: bytes, tails: list[bytes]) -> list[bytes]:
    """Digests of blocks 1.. given block 0's digest ``first`` and every block's tail."""
    parent = first
    out = [first]
    append = out.append
    size = _DIGEST_BYTES[algo_name]
    rest = iter(tails)
    next(rest)
    if cbor:
        prefix = b"\x83" + _cbor_head(2, size)
        if algo_name == "sha256_cbor":
            sha256 = hashlib.sha256
            for tail in rest:
                parent = sha256(prefix + parent + tail).digest()
                append(parent)
        else:
            xxh = xxhash.xxh3_128_digest
            for tail in rest:
                parent = xxh(prefix + parent + tail)
                append(parent)
        return out
    heads_by_len = {n: _pickle_head(size, n) for n in set(map(len, tails))}
    heads = map(heads_by_len.__getitem__, map(len, tails))
    next(heads)
    if algo_name == "sha256":
        sha256 = hashlib.sha256
        for head, tail in zip(heads, rest, strict=True):
            parent = sha256(head + parent + tail).digest()
            append(parent)
    else:
        xxh = xxhash.xxh3_128_digest
        for head, tail in zip(heads, rest, strict=True):
            parent = xxh(head + parent + tail)
            append(parent)
    return out


def _reference_chain(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extras: tuple[object, ...],
) -> list[bytes]:
    """The per-block method: serialise each payload with the reference encoder, hash."""
    digest = _digest_fn(algo_name)
    out = []
    for index, extra in enumerate(extras):
        start = index * block_size
        block = token_ids[start : start + block_size]
        parent = digest(reference_payload(algo_name, parent, block, extra))
        out.append(parent)
    return out
