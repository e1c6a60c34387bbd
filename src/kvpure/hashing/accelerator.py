"""The optional C accelerator of prompt block hashing (``kvpure.hashing._chain``).

:func:`hash_prompt_blocks` has the contract of
:func:`kvpure.hashing.fast_prompt.hash_token_blocks` except that it may decline: it returns
every block's digest, byte-identical to the pure-Python path, or None where the extension is
not built, is switched off, or does not handle the input (token ids that are not exact ints
in the signed 64-bit range, extra keys holding other than None/bool/int/float/str/bytes/
tuple, a lone surrogate, a pickle payload near pickle's 64 KiB frame, a caller's object that
pickle's memo would share with the parent); the caller then runs the pure-Python path,
which stays the reference. :func:`set_enabled` is the one switch; ``KVPURE_NO_EXTENSION=1``
in the environment when kvpure is imported starts it switched off (the library and the
CLI alike); :func:`accelerated` says which path runs.

The decoding path has two more entry points with the same rule: :func:`one_block_hasher`
wraps kvpure's Python one-block hasher in a C one (the extra keys encoded once) that hands
every input it does not handle to the Python one, and :func:`install_decode_append` gives
``RequestBlockHashes`` a C ``append_output_token_ids`` that runs the Python method for
every call it does not handle. Both read the switch on every call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TypeVar, cast

import xxhash

__all__ = [
    "accelerated",
    "available",
    "compiled_hash_blocks",
    "compiled_hash_lookahead_blocks",
    "compiled_hash_uniform_blocks",
    "first_bad_token",
    "floor_digests",
    "hash_prompt_blocks",
    "install_decode_append",
    "one_block_hasher",
    "set_enabled",
    "set_native_xxhash",
    "set_sha_ni",
    "set_token_items",
    "sha_route",
    "token_items_versions",
    "xxhash_route",
]

_ALGORITHM_CODES = {"sha256": 0, "sha256_cbor": 1, "xxhash": 2, "xxhash_cbor": 3}


def _load() -> ModuleType | None:
    try:
        from kvpure.hashing import _chain
    except ImportError:  # not built: the pure-Python path runs
        return None
    _chain.init_xxhash(xxhash.xxh3_128_digest)
    return _chain


_CHAIN = _load()
_state = {"enabled": _CHAIN is not None}
if os.environ.get("KVPURE_NO_EXTENSION") == "1" and _CHAIN is not None:  # read once, at import
    _state["enabled"] = False
    _CHAIN.set_enabled(False)


def available() -> bool:
    """Whether the C extension is built and loaded."""
    return _CHAIN is not None


def accelerated() -> bool:
    """Whether prompt hashing runs through the C extension (built and not switched off)."""
    return _state["enabled"]


def set_enabled(enabled: bool) -> bool:
    """Switch the extension on or off for this process; returns whether it is now in use
    (never where it is not built)."""
    _state["enabled"] = enabled and _CHAIN is not None
    if _CHAIN is not None:
        _CHAIN.set_enabled(_state["enabled"])
    return _state["enabled"]


def xxhash_route() -> str | None:
    """How the extension reaches XXH3-128: ``"native"`` (libxxhash.so.0, self-checked at
    import) or ``"python"`` (the xxhash package's function through the CPython API)."""
    return None if _CHAIN is None else str(_CHAIN.xxhash_route())


def set_native_xxhash(enabled: bool) -> str | None:
    """Use libxxhash.so.0 where loaded (True) or the xxhash package (False); returns the route."""
    return None if _CHAIN is None else str(_CHAIN.set_native_xxhash(enabled))


def sha_route() -> str | None:
    """How the extension computes SHA-256: ``"sha-ni"`` (the x86 SHA extensions, checked
    against OpenSSL at import) or ``"openssl"``; None where not built."""
    return None if _CHAIN is None else str(_CHAIN.sha_route())


def set_sha_ni(enabled: bool) -> str | None:
    """Use the SHA extensions where checked (True) or OpenSSL (False); returns the route."""
    return None if _CHAIN is None else str(_CHAIN.set_sha_ni(enabled))


def token_items_versions() -> list[str]:
    """The token-id encoders of the laid-out chain this CPU runs (``"scalar"``, and
    ``"avx2"`` / ``"vbmi2"`` where it has them), fastest last; none where not built."""
    return [] if _CHAIN is None else list(_CHAIN.token_items_versions())


def set_token_items(name: str | None) -> str | None:
    """Encode token ids with the version ``name`` (None: the fastest this CPU runs; a name
    it lacks changes nothing); returns the version now in use. All give the same bytes."""
    return None if _CHAIN is None else str(_CHAIN.set_token_items(name))


def first_bad_token(token_ids: Sequence[object], low: int, high: int | None) -> int:
    """The index of the first item of ``token_ids`` that is not an int (a bool is not one)
    or lies outside ``[low, high]`` (``high`` None: unbounded), else -1. In C where the
    extension is built (a list or tuple; whether or not it is switched on, as it is a check,
    not a hash), else in Python: the same answer."""
    chain = _CHAIN
    if chain is not None and (type(token_ids) is list or type(token_ids) is tuple):
        return int(chain.first_bad_token(token_ids, low, high))
    for index, token in enumerate(token_ids):
        if (
            not isinstance(token, int)
            or type(token) is bool
            or token < low
            or (high is not None and token > high)
        ):
            return index
    return -1


def floor_digests() -> Callable[[int, list[bytes]], bytes] | None:
    """The extension's ``floor_digests(algo_code, payloads)``: every payload's digest in a C
    loop (a benchmark's floor); None where the extension is not built."""
    return (
        None
        if _CHAIN is None
        else cast("Callable[[int, list[bytes]], bytes]", _CHAIN.floor_digests)
    )


CompiledHashBlocks = Callable[
    [str, bytes, Sequence[int], int, Sequence[tuple[object, ...] | None]], list[bytes] | None
]


def compiled_hash_blocks() -> CompiledHashBlocks | None:
    """The extension's ``hash_blocks`` itself, which takes the algorithm's name and has the
    contract of :func:`hash_prompt_blocks` (None while switched off), for a caller that
    saves the wrapper's call; None where the extension is not built."""
    return None if _CHAIN is None else cast("CompiledHashBlocks", _CHAIN.hash_blocks)


CompiledLookaheadBlocks = Callable[
    [str, bytes, Sequence[int], int, Sequence[tuple[object, ...] | None], int], list[bytes] | None
]


def compiled_hash_lookahead_blocks() -> CompiledLookaheadBlocks | None:
    """The extension's ``hash_blocks`` with its sixth argument, the lookahead L: the extra
    keys given are each block's ``E`` and the token ids hold L tokens past the last block;
    block ``i`` is hashed with ``(E_i, the L tokens after it)``. None where not built."""
    return None if _CHAIN is None else cast("CompiledLookaheadBlocks", _CHAIN.hash_blocks)


CompiledUniformBlocks = Callable[
    [str, bytes, Sequence[int], int, int, object, object], list[bytes] | None
]


def compiled_hash_uniform_blocks() -> CompiledUniformBlocks | None:
    """The extension's ``hash_uniform_blocks(algo, parent, token_ids, block_size, num_blocks,
    first_keys, rest_keys)``: :func:`compiled_hash_blocks` where block 0's extra keys are
    ``first_keys`` and every other block's ``rest_keys`` (no list of them is built; the
    token ids may run past the last block). None where not built."""
    return None if _CHAIN is None else cast("CompiledUniformBlocks", _CHAIN.hash_uniform_blocks)


def hash_prompt_blocks(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: Sequence[tuple[object, ...] | None],
) -> list[bytes] | None:
    """Every block's digest (see the module docstring), or None: not handled, use Python."""
    chain = _CHAIN
    code = _ALGORITHM_CODES.get(algo_name)
    if chain is None or code is None or not _state["enabled"]:
        return None
    result: list[bytes] | None = chain.hash_blocks(code, parent, token_ids, block_size, extra_keys)
    return result


_Hasher = TypeVar("_Hasher", bound=Callable[[bytes, Sequence[int]], bytes])


def one_block_hasher(
    algo_name: str, block_size: int, extra_keys: object, fallback: _Hasher, lookahead: int = 0
) -> _Hasher:
    """A C hasher of one block of ``block_size`` tokens with ``extra_keys`` (encoded once)
    that calls ``fallback`` for every input it does not handle or while switched off; or
    ``fallback`` itself where the extension is not built or cannot encode the extra keys.
    With ``lookahead`` L > 0 it takes ``block_size + L`` tokens and hashes the first
    ``block_size`` with ``(extra_keys, the L others)``."""
    chain = _CHAIN
    code = _ALGORITHM_CODES.get(algo_name)
    if chain is None or code is None:
        return fallback
    native = chain.one_block_hasher(code, block_size, extra_keys, fallback, lookahead)
    return fallback if native is None else cast("_Hasher", native)


def install_decode_append(cls: type, python_append: object, default_chain_hasher: object) -> bool:
    """Give ``cls`` (``RequestBlockHashes``) the C ``append_output_token_ids``, which runs
    ``python_append`` for every call it does not handle; False where not built."""
    if _CHAIN is None:
        return False
    _CHAIN.install_decode_append(cls, python_append, default_chain_hasher)
    return True
