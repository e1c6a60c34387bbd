"""Fast chain hashing of a prompt's token blocks, byte-identical to vLLM's per-block method.

vLLM hashes block ``i`` as ``H(serialise((parent_i, tuple(tokens_i), extra_keys[i])))`` where
``parent_i`` is the digest of block ``i - 1``. Almost all of its time goes to serialising
each payload in a Python loop.

- CBOR (``sha256_cbor``, ``xxhash_cbor``): the payloads are built for the whole prompt at
  once. Every token's CBOR item depends on its value only, so all tokens are encoded in a
  few C-level passes (:func:`~kvpure.hashing.fast_encoding.encode_token_blocks`), each
  distinct extra-keys object is encoded once, and only the chain itself
  (``H(head + parent + tail)``) runs as a Python loop. Up to 48 tokens (decoding) the
  tokens are encoded one by one instead, without the whole-prompt setup.
- pickle (``sha256``, ``xxhash``): vLLM's serialiser is the C pickler already; a lean loop
  hands it each block's tuple (built in C by ``zip``) and hashes. This is the reference
  serialisation itself, so it is exact for every input by construction.

Anything outside the CBOR fast path's domain (ids that are not plain ints in
``[0, 2**32)``, a parent that is not ``bytes``) goes to the reference encoder
(:func:`~kvpure.hashing.cbor.canonical_cbor_dumps`), never to a different hash.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat

import xxhash

from kvpure.errors import InvalidFieldError, UnknownHashAlgorithmError
from kvpure.hashing.accelerator import hash_prompt_blocks
from kvpure.hashing.cbor import canonical_cbor_dumps as cbor_dumps
from kvpure.hashing.cbor import canonical_cbor_dumps_memo as cbor_memo
from kvpure.hashing.cbor import cbor_head
from kvpure.hashing.fast_encoding import cbor_token_items, encode_token_blocks


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


__all__ = [
    "HASH_ALGORITHMS",
    "OneBlockHasher",
    "block_payloads",
    "hash_token_blocks",
    "one_block_hasher",
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
_FEW_TOKENS = 48  # up to this many tokens, one by one beats the whole-prompt encoder
_FEW_PICKLE_BLOCKS = 4  # up to this many blocks, slicing beats setting up zip


_SHA256 = hashlib.sha256
_XXH3_128 = xxhash.xxh3_128_digest
_PICKLE_DUMPS = pickle.dumps


def _sha256_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()  # (hashlib's sha256 object has no one-call digest)


_DIGEST_FNS: dict[str, Callable[[bytes], bytes]] = {
    "sha256": _sha256_digest,
    "sha256_cbor": _sha256_digest,
    "xxhash": xxhash.xxh3_128_digest,
    "xxhash_cbor": xxhash.xxh3_128_digest,
}


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def _check_algo(algo_name: str) -> bool:
    cbor = HASH_ALGORITHMS.get(algo_name)
    if cbor is None:
        raise UnknownHashAlgorithmError(name=algo_name, valid_names=tuple(HASH_ALGORITHMS))
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


def _as_list(token_ids: Sequence[int]) -> Sequence[int]:
    """A list or tuple as it is; anything else (a PVector) copied once into a list."""
    return token_ids if type(token_ids) is list or type(token_ids) is tuple else list(token_ids)


# ---------------------------------------------------------------------------
# CBOR payload tails: everything of block i's payload that follows the parent digest
# ---------------------------------------------------------------------------


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


def _extra_keys_cbor(extra: object) -> bytes:
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


def _token_array(tokens: tuple[int, ...]) -> bytes | None:
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
    return None if items is None else _array_head(size) + items


def _cbor_tails(
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
    grouped = zip(repeat(_array_head(block_size)), token_parts, extra_parts)
    return list(map(b"".join, grouped))


_PAYLOAD_HEADS = tuple(b"\x83" + cbor_head(2, size) for size in range(256))
_ARRAY_HEADS = tuple(cbor_head(4, size) for size in range(1024))


def _array_head(size: int) -> bytes:
    """The CBOR head of an array of ``size`` items."""
    return _ARRAY_HEADS[size] if size < 1024 else cbor_head(4, size)


def _cbor_head_of_payload(parent: bytes) -> bytes:
    """The payload's array head and the head of the parent's byte string."""
    size = len(parent)
    return _PAYLOAD_HEADS[size] if size < 256 else b"\x83" + cbor_head(2, size)


OneBlockHasher = Callable[[bytes, Sequence[int]], bytes]
"""``f(parent, block_token_ids)``: one block's digest, its extra keys fixed."""


def one_block_hasher(
    algo_name: str, block_size: int, extra_keys: tuple[object, ...] | None
) -> OneBlockHasher:
    """A function that hashes one block of ``block_size`` tokens with ``extra_keys``.

    ``f(parent, tokens)`` is vLLM's ``hash_fn((parent, tuple(tokens), extra_keys))``, for
    every input. For CBOR the extra keys are encoded once, here (they must not change
    while ``f`` is used: kvpure's own extra keys are tuples of strings and ints); for
    pickle ``f`` is vLLM's expression itself. Decoding builds it once per request.
    """
    cbor = _check_algo(algo_name)
    digest = _DIGEST_FNS[algo_name]
    if not cbor:
        if algo_name == "sha256":  # no wrapper call around hashlib on this hot path

            def sha256_pickled(parent: bytes, tokens: Sequence[int]) -> bytes:
                return _SHA256(_PICKLE_DUMPS((parent, tuple(tokens), extra_keys), 5)).digest()

            return sha256_pickled

        def hash_pickled(parent: bytes, tokens: Sequence[int]) -> bytes:
            return digest(_PICKLE_DUMPS((parent, tuple(tokens), extra_keys), 5))

        return hash_pickled
    extra_part = cbor_dumps(extra_keys)
    heads = _PAYLOAD_HEADS
    sha = algo_name == "sha256_cbor"

    def hash_cbor(parent: bytes, tokens: Sequence[int]) -> bytes:
        block = tuple(tokens)
        array = _token_array(block) if len(block) == block_size else None
        if array is None or type(parent) is not bytes:
            return digest(cbor_dumps((parent, block, extra_keys)))
        size = len(parent)
        head = heads[size] if size < 256 else b"\x83" + cbor_head(2, size)
        payload = b"".join((head, parent, array, extra_part))
        return _SHA256(payload).digest() if sha else digest(payload)

    return hash_cbor


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


def block_payloads(
    algo_name: str,
    parents: Sequence[bytes],
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: Sequence[tuple[object, ...] | None],
) -> list[bytes]:
    """The serialised payload of every block, block ``i`` with parent ``parents[i]``.

    For CBOR built by the whole-prompt encoder of :func:`hash_token_blocks` (so tests can
    compare bytes, not just digests); for pickle by the C pickler. Each equals
    ``reference_payload(algo_name, parents[i], tokens_i, extra_keys[i])``.
    """
    cbor = _check_algo(algo_name)
    extras = tuple(extra_keys)
    _check_sizes(token_ids, block_size, len(extras))
    if len(parents) != len(extras):
        raise InvalidFieldError(
            field="parents", value=len(parents), reason=f"expected one per block ({len(extras)})"
        )
    token_ids = _as_list(token_ids)
    tails = _cbor_tails(token_ids, block_size, extras) if cbor and extras else None
    out = []
    for index, (parent, extra) in enumerate(zip(parents, extras, strict=True)):
        if tails is not None and type(parent) is bytes:
            out.append(_cbor_head_of_payload(parent) + parent + tails[index])
        else:
            start = index * block_size
            block = token_ids[start : start + block_size]
            out.append(reference_payload(algo_name, parent, block, extra))
    return out


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
    accelerated = hash_prompt_blocks(algo_name, parent, token_ids, block_size, extra_keys)
    if accelerated is not None:  # the C extension handled it (same bytes)
        return accelerated
    num_blocks = len(extra_keys)
    if num_blocks == 1 and 0 < block_size <= len(token_ids):  # decoding: nothing around it
        block = tuple(token_ids if len(token_ids) == block_size else token_ids[:block_size])
        if algo_name == "sha256":
            return [_SHA256(_PICKLE_DUMPS((parent, block, extra_keys[0]), 5)).digest()]
        if algo_name == "xxhash":
            return [_XXH3_128(_PICKLE_DUMPS((parent, block, extra_keys[0]), 5))]
        sha = algo_name == "sha256_cbor"
        if (sha or algo_name == "xxhash_cbor") and type(parent) is bytes:
            array = _token_array(block)
            if array is not None:
                extra = _extra_keys_cbor(extra_keys[0])
                payload = b"".join((_cbor_head_of_payload(parent), parent, array, extra))
                if sha:
                    return [_SHA256(payload).digest()]
                return [_XXH3_128(payload)]
    known = HASH_ALGORITHMS.get(algo_name)
    num_tokens = num_blocks * block_size
    if known is None or block_size < 1 or len(token_ids) < num_tokens:
        _check_algo(algo_name)  # these raise the typed errors
        _check_sizes(token_ids, block_size, num_blocks)
    if not known:
        return _pickle_chain(algo_name, parent, token_ids, block_size, extra_keys)
    if num_tokens <= _FEW_TOKENS:  # decoding: no whole-prompt setup
        return _cbor_one_by_one(algo_name, parent, token_ids, block_size, extra_keys)
    extras = tuple(extra_keys)  # holds every extra-keys object while caches key them by id
    token_ids = _as_list(token_ids)
    tails = _cbor_tails(token_ids, block_size, extras)
    if tails is None or type(parent) is not bytes:
        return _cbor_one_by_one(algo_name, parent, token_ids, block_size, extras)
    return _cbor_chain(algo_name, parent, tails)


def _cbor_chain(algo_name: str, parent: bytes, tails: list[bytes]) -> list[bytes]:
    """Digests of every block, given block 0's parent and every block's tail."""
    out: list[bytes] = []
    append = out.append
    first_head = _cbor_head_of_payload(parent)
    head = b"\x83" + cbor_head(2, _DIGEST_BYTES[algo_name])  # every later parent: a digest
    if algo_name == "sha256_cbor":
        sha256 = hashlib.sha256
        parent = sha256(first_head + parent + tails[0]).digest()
        append(parent)
        for tail in tails[1:]:
            parent = sha256(head + parent + tail).digest()
            append(parent)
    else:
        xxh = xxhash.xxh3_128_digest
        parent = xxh(first_head + parent + tails[0])
        append(parent)
        for tail in tails[1:]:
            parent = xxh(head + parent + tail)
            append(parent)
    return out


def _pickle_chain(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extras: Sequence[object],
) -> list[bytes]:
    """pickle.dumps (C) of each payload; the block tuples come from ``zip`` (C) too."""
    blocks: Iterable[tuple[int, ...]]
    if len(extras) <= _FEW_PICKLE_BLOCKS:  # as the reference does it (decoding)
        blocks = [
            tuple(token_ids[i * block_size : (i + 1) * block_size]) for i in range(len(extras))
        ]
    else:  # zip builds the tuples in C
        blocks = zip(*[iter(token_ids)] * block_size, strict=False)  # full blocks only
    dumps = pickle.dumps
    out: list[bytes] = []
    append = out.append
    if algo_name == "sha256":
        sha256 = hashlib.sha256
        for block, extra in zip(blocks, extras, strict=False):
            parent = sha256(dumps((parent, block, extra), 5)).digest()
            append(parent)
    else:
        xxh = xxhash.xxh3_128_digest
        for block, extra in zip(blocks, extras, strict=False):
            parent = xxh(dumps((parent, block, extra), 5))
            append(parent)
    return out


def _cbor_one_by_one(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extras: Sequence[object],
) -> list[bytes]:
    """Block by block, the tokens encoded one by one (few tokens, or out of the domain)."""
    digest = _DIGEST_FNS[algo_name]
    array_head = _array_head(block_size)
    out = []
    start = 0
    for extra in extras:
        block = token_ids[start : start + block_size]
        if type(parent) is bytes and (run := cbor_token_items(block)) is not None:
            payload = _cbor_head_of_payload(parent) + parent + array_head + run
            payload += _extra_keys_cbor(extra)
        else:
            payload = cbor_dumps((parent, tuple(block), extra))
        parent = digest(payload)
        out.append(parent)
        start += block_size
    return out
