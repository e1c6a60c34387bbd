"""One block's hash with its extra keys fixed: the decoding path's hasher.

:func:`one_block_hasher` builds, once per request, ``f(parent, block_token_ids)``, vLLM's
``hash_fn((parent, tuple(tokens), extra_keys))``: the C extension's one-block hasher where
it is built (it hands every input it does not handle to the Python one), else the Python
reference here, with the extra keys' CBOR encoded once.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Sequence

from kvpure.hashing.accelerator import one_block_hasher as accelerated_one_block_hasher
from kvpure.hashing.algorithms import HashAlgorithm
from kvpure.hashing.cbor import canonical_cbor_dumps as cbor_dumps
from kvpure.hashing.cbor_tails import PAYLOAD_HEADS, cbor_head_of_payload, token_array

__all__ = ["OneBlockHasher", "one_block_hasher"]

_SHA256 = hashlib.sha256
_PICKLE_DUMPS = pickle.dumps


def _check_algo(algo_name: str) -> bool:
    return HashAlgorithm.from_name(algo_name).uses_cbor


OneBlockHasher = Callable[[bytes, Sequence[int]], bytes]
"""``f(parent, block_token_ids)``: one block's digest, its extra keys fixed."""


def one_block_hasher(
    algo_name: str, block_size: int, extra_keys: tuple[object, ...] | None, lookahead: int = 0
) -> OneBlockHasher:
    """A function that hashes one block of ``block_size`` tokens with ``extra_keys``.

    With ``lookahead`` L > 0 it takes the block's tokens and the L after it, and hashes the
    block with ``(extra_keys, *those L)``, as vLLM 0.33+ does with ``num_hash_lookahead_tokens``.

    ``f(parent, tokens)`` is vLLM's ``hash_fn((parent, tuple(tokens), extra_keys))``, for
    every input. For CBOR the extra keys are encoded once, here (they must not change
    while ``f`` is used: kvpure's own extra keys are tuples of strings and ints); for
    pickle ``f`` is vLLM's expression itself. Decoding builds it once per request. Where the
    C extension is built, ``f`` is its one-block hasher, which hands every input it does not
    handle to the Python one.
    """
    if lookahead:
        python_hasher = _python_lookahead_hasher(algo_name, block_size, extra_keys, lookahead)
        return accelerated_one_block_hasher(
            algo_name, block_size, extra_keys, python_hasher, lookahead
        )
    python_hasher = _python_one_block_hasher(algo_name, block_size, extra_keys)
    return accelerated_one_block_hasher(algo_name, block_size, extra_keys, python_hasher)


def _python_lookahead_hasher(
    algo_name: str, block_size: int, extra_keys: tuple[object, ...] | None, lookahead: int
) -> OneBlockHasher:
    """``f(parent, tokens)`` of ``block_size + lookahead`` tokens: vLLM's
    ``hash_fn((parent, tuple(tokens[:B]), (extra_keys, *tokens[B:B+L])))``, the reference."""
    hash_fn = HashAlgorithm.from_name(algo_name).hash_fn

    def hash_with_lookahead(parent: bytes, tokens: Sequence[int]) -> bytes:
        window = tuple(tokens)
        after = window[block_size : block_size + lookahead]
        return hash_fn((parent, window[:block_size], (extra_keys, *after)))

    return hash_with_lookahead


def _python_one_block_hasher(
    algo_name: str, block_size: int, extra_keys: tuple[object, ...] | None
) -> OneBlockHasher:
    """The reference of :func:`one_block_hasher`, in Python."""
    cbor = _check_algo(algo_name)
    digest = HashAlgorithm.from_name(algo_name).digest
    if not cbor:
        if algo_name == "sha256":  # no wrapper call around hashlib on this hot path

            def sha256_pickled(parent: bytes, tokens: Sequence[int]) -> bytes:
                return _SHA256(_PICKLE_DUMPS((parent, tuple(tokens), extra_keys), 5)).digest()

            return sha256_pickled

        def hash_pickled(parent: bytes, tokens: Sequence[int]) -> bytes:
            return digest(_PICKLE_DUMPS((parent, tuple(tokens), extra_keys), 5))

        return hash_pickled
    extra_part = cbor_dumps(extra_keys)
    sha = algo_name == "sha256_cbor"

    def hash_cbor(parent: bytes, tokens: Sequence[int]) -> bytes:
        block = tuple(tokens)
        array = token_array(block) if len(block) == block_size else None
        if array is None or type(parent) is not bytes:
            return digest(cbor_dumps((parent, block, extra_keys)))
        size = len(parent)  # the head inline: this runs once per decoded block
        head = PAYLOAD_HEADS[size] if size < 256 else cbor_head_of_payload(parent)
        payload = b"".join((head, parent, array, extra_part))
        return _SHA256(payload).digest() if sha else digest(payload)

    return hash_cbor
