"""CBOR payload tails: everything of a block's payload that follows the parent digest.

A CBOR payload is ``[parent, [tokens...], extra_keys]``: an array head, the
parent's byte string, the token array, the extra keys. Only the parent changes
along the chain, so the fast path builds every block's *tail* (token array and
extra keys) up front, in as few C-level passes as it can, and the chain loop
only joins ``head + parent + tail``. cbor2 (vLLM's own encoder), where
installed, encodes big blocks' arrays and plain extra keys; kvpure's encoder
does everything else and raises kvpure's error for what CBOR cannot write.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from itertools import repeat

from kvpure.hashing.cbor import canonical_cbor_dumps as cbor_dumps
from kvpure.hashing.cbor import canonical_cbor_dumps_memo as cbor_memo
from kvpure.hashing.cbor import cbor_head
from kvpure.hashing.fast_encoding import cbor_token_items, encode_token_blocks

__all__ = [
    "CBOR2_MIN_BLOCK_SIZE",
    "PAYLOAD_HEADS",
    "array_head",
    "cbor_head_of_payload",
    "cbor_tails",
    "extra_keys_cbor",
    "token_array",
]


def _cbor2_canonical_dumps() -> tuple[Callable[[object], bytes] | None, type[Exception]]:
    """vLLM's own CBOR encoder, where installed (the dev extra installs it), else None; and
    the base class of the errors it raises for what it cannot encode."""
    try:
        import cbor2
    except ImportError:  # cbor2 is optional
        return None, Exception
    dumps: Callable[[object], bytes] = functools.partial(cbor2.dumps, canonical=True)
    return dumps, cbor2.CBOREncodeError


_CBOR2_DUMPS, _CBOR2_ERROR = _cbor2_canonical_dumps()


def _extra_parts(extras: tuple[object, ...], memo: dict[int, bytes]) -> list[bytes]:
    """Each block's encoded extra keys, encoding each distinct extra-keys value once.

    Distinct means: another object, or a tuple of other objects (by identity, which is
    sound while ``extras`` holds them all; equality is not: ``(1,) == (True,)``).
    """
    parts: list[bytes] = []
    append = parts.append
    by_items: dict[object, bytes] = {}
    previous: object = None
    previous_part = b"\xf6"
    for extra in extras:
        if extra is None:
            append(b"\xf6")
            continue
        if extra is not previous:
            key: object = tuple(map(id, extra)) if type(extra) is tuple else id(extra)
            part = by_items.get(key)
            if part is None:
                part = by_items[key] = _encode_extra(extra, memo)
            previous, previous_part = extra, part
        append(previous_part)
    return parts


def _encode_extra(extra: object, memo: dict[int, bytes]) -> bytes:
    """One extra-keys value's CBOR: a plain one (:func:`_is_plain_key`) by
    :data:`_PLAIN_KEYS_DUMPS`; any other by kvpure's encoder, which raises kvpure's error
    for what it cannot encode."""
    if _is_plain_key(extra):
        return _PLAIN_KEYS_DUMPS(extra)
    return cbor_memo(extra, memo)


_PLAIN_ATOMS = frozenset({str, int, bytes})


def _is_plain_key(value: object) -> bool:
    """Whether ``value`` is built of exact str, int and bytes in exact tuples only.

    For such values equality implies the same CBOR bytes (not so in general:
    ``(1,) == (True,) == (1.0,)``), so they may key a cache by value.
    """
    if type(value) is not tuple:
        return type(value) in _PLAIN_ATOMS
    for item in value:  # one loop, no call per item: this runs once per distinct key
        kind = type(item)
        if kind is tuple:
            if not (set(map(type, item)) <= _PLAIN_ATOMS or _is_plain_key(item)):
                return False
        elif kind not in _PLAIN_ATOMS:
            return False
    return True


_PLAIN_KEYS_DUMPS: Callable[[object], bytes] = _CBOR2_DUMPS or cbor_dumps
"""The encoder of :func:`_is_plain_key` values: cbor2 (C) where installed, else kvpure's;
for those values the two write the same bytes (a property test checks)."""

_plain_keys_cbor = functools.lru_cache(maxsize=1024)(_PLAIN_KEYS_DUMPS)
"""A pure memo of :data:`_PLAIN_KEYS_DUMPS`, called only for :func:`_is_plain_key` values."""

_PLAIN_KEYS_BY_ID: dict[int, tuple[object, bytes]] = {}
"""The encodings of the plain extra keys last seen, by the identity of the object (which
each entry holds, so that its id is not reused while the entry lives): callers hand the
same extra-keys object block after block. A pure memo; cleared when it holds 256."""


def extra_keys_cbor(extra: object) -> bytes:
    """One block's encoded extra keys; the usual ones (LoRA, salt) from a bounded memo."""
    if extra is None:
        return b"\xf6"
    seen = _PLAIN_KEYS_BY_ID.get(id(extra))
    if seen is not None and seen[0] is extra:
        return seen[1]
    if not _is_plain_key(extra):
        return cbor_dumps(extra)
    part = _plain_keys_cbor(extra)
    if len(_PLAIN_KEYS_BY_ID) >= 256:
        _PLAIN_KEYS_BY_ID.clear()
    _PLAIN_KEYS_BY_ID[id(extra)] = (extra, part)
    return part


#: From this block size on, cbor2's C encoder (where installed) encodes a block's token
#: array faster than kvpure's whole-prompt encoder; below it, kvpure's is faster.
CBOR2_MIN_BLOCK_SIZE = 64


def _cbor2_tails(
    token_ids: Sequence[int], block_size: int, extras: tuple[object, ...]
) -> list[bytes] | None:
    """Each block's payload tail (token array, extra keys), the token arrays by cbor2.

    Where every extra-keys value is plain (:func:`_is_plain_key`), one cbor2 call per
    block encodes ``(tokens, extra)`` and the pair's array head (its first byte) is
    dropped; else the extra keys are encoded by :func:`_extra_parts`. None where cbor2 is
    not installed or cannot encode a token (the caller then falls back to kvpure's
    encoders, which raise kvpure's error).
    """
    dumps = _CBOR2_DUMPS
    if dumps is None:
        return None
    starts = range(0, len(token_ids), block_size)
    blocks = (tuple(token_ids[i : i + block_size]) for i in starts)
    try:
        if _all_plain_or_none(extras):
            return [pair[1:] for pair in map(dumps, zip(blocks, extras, strict=True))]
        arrays = list(map(dumps, blocks))
    except _CBOR2_ERROR:
        return None
    return list(map(b"".join, zip(arrays, _extra_parts(extras, {}), strict=True)))


def _all_plain_or_none(extras: tuple[object, ...]) -> bool:
    """Whether every extra-keys value is None or plain, each distinct object checked once."""
    plain: set[int] = set()  # ids of the objects found plain (``extras`` holds them all)
    for extra in extras:
        if extra is not None and id(extra) not in plain:
            if not _is_plain_key(extra):
                return False
            plain.add(id(extra))
    return True


def token_array(tokens: tuple[int, ...]) -> bytes | None:
    """One block's token array (head and items), or None if a token is out of the domain.

    cbor2 encodes it where installed and the block is big; else the token table does.
    """
    size = len(tokens)
    if size >= CBOR2_MIN_BLOCK_SIZE and _CBOR2_DUMPS is not None:
        try:
            return _CBOR2_DUMPS(tokens)
        except _CBOR2_ERROR:
            return None
    items = cbor_token_items(tokens)
    return None if items is None else array_head(size) + items


def cbor_tails(
    token_ids: Sequence[int],
    block_size: int,
    extras: tuple[object, ...],
    *,
    use_cbor2: bool | None = None,
) -> list[bytes] | None:
    """Per block: array head, token items, extra keys; None if a token is out of domain.

    ``use_cbor2`` (default: the blocks are big) encodes the token arrays with cbor2, vLLM's
    own encoder, which takes every token value as it comes, where it is installed.
    """
    num_tokens = len(extras) * block_size
    used = token_ids if len(token_ids) == num_tokens else token_ids[:num_tokens]
    if use_cbor2 is None:
        use_cbor2 = block_size >= CBOR2_MIN_BLOCK_SIZE
    tails = _cbor2_tails(used, block_size, extras) if use_cbor2 else None
    if tails is not None:
        return tails
    token_parts = encode_token_blocks(used, block_size)
    if token_parts is None:
        return None
    extra_parts = _extra_parts(extras, {})
    grouped = zip(repeat(array_head(block_size)), token_parts, extra_parts)
    return list(map(b"".join, grouped))


PAYLOAD_HEADS = tuple(b"\x83" + cbor_head(2, size) for size in range(256))
_ARRAY_HEADS = tuple(cbor_head(4, size) for size in range(1024))


def array_head(size: int) -> bytes:
    """The CBOR head of an array of ``size`` items."""
    return _ARRAY_HEADS[size] if size < 1024 else cbor_head(4, size)


def cbor_head_of_payload(parent: bytes) -> bytes:
    """The payload's array head and the head of the parent's byte string."""
    size = len(parent)
    return PAYLOAD_HEADS[size] if size < 256 else b"\x83" + cbor_head(2, size)
