"""vLLM's four block-hash functions, by name, and their serialisers.

- ``sha256``: SHA-256 over ``pickle.dumps(x, protocol=5)`` (vLLM passes
  ``pickle.HIGHEST_PROTOCOL``, which is 5 on CPython 3.8 to 3.13; kvpure pins 5
  so a newer Python cannot change the bytes).
- ``sha256_cbor``: SHA-256 over canonical CBOR (:mod:`kvpure.hashing.cbor`).
- ``xxhash``: the 16-byte XXH3-128 digest over the same pickle bytes.
- ``xxhash_cbor``: XXH3-128 over canonical CBOR.

Pickle memoizes repeated *objects*: the same ``str`` object twice in one
payload is written once and then referenced, while two equal but distinct
``str`` objects are both written out. vLLM builds each payload from the
request's own objects, so kvpure does the same: the request value keeps the
objects it was given and the extra keys hold those very objects. A caller who
gives kvpure the objects it gave vLLM gets vLLM's bytes in every case;
strings read from JSON are distinct objects on both sides (CPython shares only
the empty string and one-character Latin-1 strings, again on both sides).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Mapping
from types import MappingProxyType

import xxhash as _xxhash

from kvpure.hashing.cbor import canonical_cbor_dumps
from kvpure.hashing.errors import UnknownHashAlgorithmError

PICKLE_PROTOCOL = 5
"""The pickle protocol vLLM's ``pickle.HIGHEST_PROTOCOL`` means on Python 3.11."""

HashFunction = Callable[[object], bytes]


def pickle_payload(value: object) -> bytes:
    """The bytes vLLM's pickle-based hash functions digest."""
    return pickle.dumps(value, protocol=PICKLE_PROTOCOL)


def cbor_payload(value: object) -> bytes:
    """The bytes vLLM's CBOR-based hash functions digest."""
    return canonical_cbor_dumps(value)


def sha256(value: object) -> bytes:
    """SHA-256 (32 bytes) over pickle protocol 5 of ``value``."""
    return hashlib.sha256(pickle.dumps(value, protocol=PICKLE_PROTOCOL)).digest()


def sha256_cbor(value: object) -> bytes:
    """SHA-256 (32 bytes) over canonical CBOR of ``value``."""
    return hashlib.sha256(canonical_cbor_dumps(value)).digest()


def xxhash(value: object) -> bytes:
    """XXH3-128 (16 bytes) over pickle protocol 5 of ``value``."""
    return _xxhash.xxh3_128_digest(pickle.dumps(value, protocol=PICKLE_PROTOCOL))


def xxhash_cbor(value: object) -> bytes:
    """XXH3-128 (16 bytes) over canonical CBOR of ``value``."""
    return _xxhash.xxh3_128_digest(canonical_cbor_dumps(value))


HASH_FUNCTIONS: Mapping[str, HashFunction] = MappingProxyType(
    {
        "sha256": sha256,
        "sha256_cbor": sha256_cbor,
        "xxhash": xxhash,
        "xxhash_cbor": xxhash_cbor,
    }
)
"""vLLM's ``prefix_caching_hash_algo`` names and their functions."""

HASH_ALGORITHM_NAMES: tuple[str, ...] = tuple(HASH_FUNCTIONS)

CBOR_ALGORITHMS = frozenset({"sha256_cbor", "xxhash_cbor"})
"""The algorithms that serialise with CBOR (the others use pickle)."""

CRYPTOGRAPHIC_ALGORITHMS = frozenset({"sha256", "sha256_cbor"})
"""The collision-resistant algorithms (vLLM 0.33 seeds only these by default)."""


def get_hash_fn_by_name(name: str) -> HashFunction:
    """The hash function vLLM uses for ``prefix_caching_hash_algo=name``."""
    try:
        return HASH_FUNCTIONS[name]
    except KeyError:
        raise UnknownHashAlgorithmError(name=name, valid_names=HASH_ALGORITHM_NAMES) from None


def check_algorithm_name(name: str) -> str:
    """``name`` if it is one of the four algorithm names, else a typed error."""
    get_hash_fn_by_name(name)
    return name
