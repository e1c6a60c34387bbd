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

import hashlib
import pickle
from collections.abc import Iterable, Sequence

import xxhash

from kvpure.errors import InvalidFieldError
from kvpure.hashing.accelerator import (
    compiled_hash_blocks,
    compiled_hash_lookahead_blocks,
    compiled_hash_uniform_blocks,
)
from kvpure.hashing.algorithms import HashAlgorithm
from kvpure.hashing.cbor import canonical_cbor_dumps as cbor_dumps
from kvpure.hashing.cbor import cbor_head
from kvpure.hashing.cbor_tails import (
    array_head,
    cbor_head_of_payload,
    cbor_tails,
    extra_keys_cbor,
    token_array,
)
from kvpure.hashing.chain_checks import check_chain_arguments, plain_chain_arguments
from kvpure.hashing.errors import CborEncodeError
from kvpure.hashing.extra_keys import with_lookahead_tokens
from kvpure.hashing.fast_encoding import cbor_token_items
from kvpure.hashing.one_block import OneBlockHasher, one_block_hasher

__all__ = [
    "OneBlockHasher",
    "block_payloads",
    "fast_hash_lookahead_blocks",
    "fast_hash_token_blocks",
    "fast_hash_uniform_blocks",
    "one_block_hasher",
    "reference_payload",
]

_FEW_TOKENS = 48  # up to this many tokens, one by one beats the whole-prompt encoder
_FEW_PICKLE_BLOCKS = 4  # up to this many blocks, slicing beats setting up zip


_USES_CBOR: dict[str, bool] = {a: a.uses_cbor for a in HashAlgorithm}
"""Whether each algorithm serialises with CBOR, keyed for the hot path (a member or its name)."""

_COMPILED = compiled_hash_blocks()
_COMPILED_LOOKAHEAD = compiled_hash_lookahead_blocks()
_COMPILED_UNIFORM = compiled_hash_uniform_blocks()
_SHA256 = hashlib.sha256
_XXH3_128 = xxhash.xxh3_128_digest
_PICKLE_DUMPS = pickle.dumps


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def _check_algo(algo_name: str) -> bool:
    return HashAlgorithm.from_name(algo_name).uses_cbor


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
    tails = cbor_tails(token_ids, block_size, extras) if cbor and extras else None
    out = []
    for index, (parent, extra) in enumerate(zip(parents, extras, strict=True)):
        if tails is not None and type(parent) is bytes:
            out.append(cbor_head_of_payload(parent) + parent + tails[index])
        else:
            start = index * block_size
            block = token_ids[start : start + block_size]
            out.append(reference_payload(algo_name, parent, block, extra))
    return out


def fast_hash_token_blocks(
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
    :class:`~kvpure.hashing.algorithms.HashAlgorithm` (a member or its name). The result is
    byte-identical to hashing block by block.
    """
    try:
        if _COMPILED is not None:  # the extension's hash_blocks (None when off or not handled)
            accelerated = _COMPILED(algo_name, parent, token_ids, block_size, extra_keys)
            if accelerated is not None:  # the compiled chain handled it, byte for byte
                return accelerated
        if not plain_chain_arguments(parent, token_ids, block_size, extra_keys):
            check_chain_arguments(algo_name, parent, token_ids, block_size, extra_keys)
        num_blocks = len(extra_keys)
        if num_blocks == 1 and 0 < block_size <= len(token_ids):  # decoding: nothing around it
            block = tuple(token_ids if len(token_ids) == block_size else token_ids[:block_size])
            if algo_name == "sha256":
                return [_SHA256(_PICKLE_DUMPS((parent, block, extra_keys[0]), 5)).digest()]
            if algo_name == "xxhash":
                return [_XXH3_128(_PICKLE_DUMPS((parent, block, extra_keys[0]), 5))]
            sha = algo_name == "sha256_cbor"
            if (sha or algo_name == "xxhash_cbor") and type(parent) is bytes:
                array = token_array(block)
                if array is not None:
                    extra = extra_keys_cbor(extra_keys[0])
                    payload = b"".join((cbor_head_of_payload(parent), parent, array, extra))
                    if sha:
                        return [_SHA256(payload).digest()]
                    return [_XXH3_128(payload)]
        known = _USES_CBOR.get(algo_name)
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
        tails = cbor_tails(token_ids, block_size, extras)
        if tails is None or type(parent) is not bytes:
            return _cbor_one_by_one(algo_name, parent, token_ids, block_size, extras)
        return _cbor_chain(algo_name, parent, tails)
    except UnicodeEncodeError as err:  # cbor2 on a lone surrogate in the extra keys
        raise CborEncodeError(type_name="str", reason=f"not valid UTF-8: {err}") from None


def fast_hash_uniform_blocks(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    num_blocks: int,
    first_keys: tuple[object, ...] | None,
    rest_keys: tuple[object, ...] | None,
) -> list[bytes]:
    """:func:`fast_hash_token_blocks` of the first ``num_blocks`` blocks of ``token_ids`` with
    the extra keys ``first_keys`` for block 0 and ``rest_keys`` for every other (a prompt
    without multimodal items), in C without a list of keys where the extension is built."""
    if _COMPILED_UNIFORM is not None:
        accelerated = _COMPILED_UNIFORM(
            algo_name, parent, token_ids, block_size, num_blocks, first_keys, rest_keys
        )
        if accelerated is not None:
            return accelerated
    extras = [rest_keys] * num_blocks
    if extras:
        extras[0] = first_keys
    return fast_hash_token_blocks(
        algo_name, parent, token_ids[: num_blocks * block_size], block_size, extras
    )


def fast_hash_lookahead_blocks(
    algo_name: str,
    parent: bytes,
    window: Sequence[int],
    block_size: int,
    bases: Sequence[tuple[object, ...] | None],
    lookahead: int,
) -> list[bytes]:
    """:func:`fast_hash_token_blocks` of ``len(bases)`` blocks hashed with ``lookahead`` (L)
    tokens: ``window`` holds the blocks' tokens then L more, ``bases`` each block's ``E``;
    block ``i``'s extra keys are ``(E_i, *window[e_i : e_i + L])`` (vLLM 0.33+'s
    ``get_request_block_hasher`` with ``num_hash_lookahead_tokens``). In C where built (the
    keys' tuples are never made), else through those tuples."""
    if _COMPILED_LOOKAHEAD is not None:
        accelerated = _COMPILED_LOOKAHEAD(algo_name, parent, window, block_size, bases, lookahead)
        if accelerated is not None:
            return accelerated
    extras = with_lookahead_tokens(bases, window, block_size, lookahead)
    return fast_hash_token_blocks(
        algo_name, parent, window[: len(bases) * block_size], block_size, extras
    )


def _cbor_chain(algo_name: str, parent: bytes, tails: list[bytes]) -> list[bytes]:
    """Digests of every block, given block 0's parent and every block's tail."""
    out: list[bytes] = []
    append = out.append
    first_head = cbor_head_of_payload(parent)
    # every later parent is a digest of the algorithm's size
    head = b"\x83" + cbor_head(2, HashAlgorithm.from_name(algo_name).digest_bytes)
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
    digest = HashAlgorithm.from_name(algo_name).digest
    head_of_array = array_head(block_size)
    out = []
    start = 0
    for extra in extras:
        block = token_ids[start : start + block_size]
        if type(parent) is bytes and (run := cbor_token_items(block)) is not None:
            payload = cbor_head_of_payload(parent) + parent + head_of_array + run
            payload += extra_keys_cbor(extra)
        else:
            payload = cbor_dumps((parent, tuple(block), extra))
        parent = digest(payload)
        out.append(parent)
        start += block_size
    return out
