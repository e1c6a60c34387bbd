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

import functools
import hashlib
import pickle
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter

import xxhash

from kvpure.errors import InvalidFieldError, UnknownHashAlgorithmError
from kvpure.hashing.fast_encoding import (
    all_plain_ints,
    cbor_dumps,
    cbor_head,
    cbor_memo,
    cbor_token_run,
    encode_token_blocks,
)

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
_PICKLE_DUMPS = functools.partial(pickle.dumps, protocol=5)
_CUT_HEADER_AND_STOP = itemgetter(slice(11, -1))
_FEW_TOKENS = 48  # up to this many tokens, one by one beats the whole-prompt encoder
_FEW_PICKLE_BLOCKS = 2  # and up to this many blocks with pickle (pickle.dumps is C)
_PICKLE_MAX_BODY = 65_000  # the C pickler opens a second frame at 64 KiB
_PICKLE_PLAIN = (str, bytes, int, float, bool, type(None))

# ---------------------------------------------------------------------------
# Payload tails: everything of block i's payload that follows the parent digest
# ---------------------------------------------------------------------------


def _extra_parts(
    extras: tuple[object, ...], none_part: bytes, encode: Callable[[object], bytes]
) -> list[bytes]:
    """Each block's encoded extra keys, encoding each distinct extra-keys value once.

    Distinct means: another object, or a tuple of other objects (by identity, which is
    sound while ``extras`` holds them all; equality is not: ``(1,) == (True,)``).
    """
    parts: list[bytes] = []
    append = parts.append
    by_items: dict[object, bytes] = {}
    previous: object = None
    previous_part = none_part
    for extra in extras:
        if extra is None:
            append(none_part)
            continue
        if extra is not previous:
            key: object = tuple(map(id, extra)) if type(extra) is tuple else id(extra)
            part = by_items.get(key)
            if part is None:
                part = by_items[key] = encode(extra)
            previous, previous_part = extra, part
        append(previous_part)
    return parts


def _cbor_tails(
    token_ids: Sequence[int], block_size: int, extras: tuple[object, ...]
) -> list[bytes] | None:
    """Per block: array head, token encodings, extra keys (the payload after the parent)."""
    token_parts = encode_token_blocks(token_ids, block_size)
    if token_parts is None:
        return None
    memo: dict[int, bytes] = {}
    extra_parts = _extra_parts(extras, b"\xf6", lambda extra: cbor_memo(extra, memo))
    grouped = zip(repeat(cbor_head(4, block_size)), token_parts, extra_parts)
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
    """Per block: MEMOIZE of the parent, the token tuple, the extra keys, TUPLE3, STOP.

    The token tuples are pickled by the C pickler (all blocks in one ``map``); ints are
    never memoized, so each block's tuple opcodes are the same as inside the payload.
    """
    if not token_ids or not all_plain_ints(token_ids):
        return None
    block_tuples = zip(*[iter(token_ids)] * block_size, strict=False)  # exactly full blocks
    # PROTO, FRAME and STOP cut off; what is left is MARK, items, TUPLE, MEMOIZE (or items,
    # TUPLE1/2/3, MEMOIZE for blocks of up to 3 tokens)
    token_parts = map(_CUT_HEADER_AND_STOP, map(_PICKLE_DUMPS, block_tuples))
    probe = (bytes(bytearray(b"kv")), tuple([0]))  # fresh objects: nothing in extras is them
    without = len(pickle.dumps((*probe, None), protocol=5)) - 4
    extra_parts = _extra_parts(
        extras,
        b"N\x87\x94.",
        lambda extra: _pickle_extra_segment(extra, without, probe) + b"\x87\x94.",
    )
    tails = list(map(b"".join, zip(repeat(b"\x94"), token_parts, extra_parts)))
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
        return b"\x83" + cbor_head(2, parent_bytes)
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
        raise UnknownHashAlgorithmError(name=algo_name, valid_names=tuple(HASH_ALGORITHMS))
    return cbor


def _as_list(token_ids: Sequence[int]) -> Sequence[int]:
    """A list or tuple as it is; anything else (a PVector) copied once into a list."""
    return token_ids if type(token_ids) is list or type(token_ids) is tuple else list(token_ids)


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
    whole = frozenset({id(token_ids)}) if len(extras) == 1 else frozenset()
    token_ids = _as_list(token_ids)
    tails = _tails(cbor, token_ids, block_size, extras)
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


def _sha256_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_DIGEST_FNS: dict[str, Callable[[bytes], bytes]] = {
    "sha256": _sha256_digest,
    "sha256_cbor": _sha256_digest,
    "xxhash": xxhash.xxh3_128_digest,
    "xxhash_cbor": xxhash.xxh3_128_digest,
}


def _digest_fn(algo_name: str) -> Callable[[bytes], bytes]:
    return _DIGEST_FNS[algo_name]


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
    known = HASH_ALGORITHMS.get(algo_name)
    num_blocks = len(extra_keys)
    num_tokens = num_blocks * block_size
    if known is None or block_size < 1 or len(token_ids) < num_tokens:
        _check_algo(algo_name)  # these raise the typed errors
        _check_sizes(token_ids, block_size, num_blocks)
    cbor = bool(known)
    if num_tokens <= _FEW_TOKENS or (not cbor and num_blocks <= _FEW_PICKLE_BLOCKS):
        # decoding: one block at a time, without the whole-prompt setup
        return _hash_one_by_one(algo_name, cbor, parent, token_ids, block_size, extra_keys)
    extras = tuple(extra_keys)  # holds every extra-keys object while caches key them by id
    whole = frozenset({id(token_ids), id(parent)}) if len(extras) == 1 else frozenset({id(parent)})
    token_ids = _as_list(token_ids)
    tails = _tails(cbor, token_ids, block_size, extras)
    if tails is None:
        return _hash_one_by_one(algo_name, cbor, parent, token_ids, block_size, extras)
    digest = _digest_fn(algo_name)
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
        prefix = b"\x83" + cbor_head(2, size)
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


def _hash_one_by_one(
    algo_name: str,
    cbor: bool,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extras: Sequence[object],
) -> list[bytes]:
    """Block by block: pickle.dumps (in C) per payload, or CBOR with the tokens one by one."""
    digest = _DIGEST_FNS[algo_name]
    out = []
    start = 0
    if not cbor:
        dumps = pickle.dumps
        for extra in extras:
            parent = digest(dumps((parent, tuple(token_ids[start : start + block_size]), extra), 5))
            out.append(parent)
            start += block_size
        return out
    array_head = cbor_head(4, block_size)
    for extra in extras:
        block = token_ids[start : start + block_size]
        if type(parent) is bytes and (run := cbor_token_run(block)) is not None:
            payload = b"\x83" + cbor_head(2, len(parent)) + parent + array_head + run
            payload += cbor_dumps(extra)
        else:
            payload = cbor_dumps((parent, tuple(block), extra))
        parent = digest(payload)
        out.append(parent)
        start += block_size
    return out
