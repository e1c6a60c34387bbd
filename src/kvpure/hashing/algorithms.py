"""vLLM's four block-hash algorithms: :class:`HashAlgorithm`, their serialisers and digests.

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
from collections.abc import Callable
from enum import StrEnum
from typing import Final

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


def _sha256_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class HashAlgorithm(StrEnum):
    """vLLM's ``prefix_caching_hash_algo`` values; each carries its serialiser and digest.

    A ``StrEnum``: each member equals (and hashes as) vLLM's name for it, so
    ``HashAlgorithm.SHA256 == "sha256"`` and a string keys the same dict entry.
    """

    SHA256 = "sha256"
    SHA256_CBOR = "sha256_cbor"
    XXHASH = "xxhash"
    XXHASH_CBOR = "xxhash_cbor"

    @classmethod
    def from_name(cls, name: object) -> HashAlgorithm:
        """The algorithm vLLM calls ``name``, or :class:`UnknownHashAlgorithmError`."""
        algorithm = _BY_NAME.get(name) if isinstance(name, str) else None
        if algorithm is None:
            raise UnknownHashAlgorithmError(name=str(name), valid_names=HASH_ALGORITHM_NAMES)
        return algorithm

    @classmethod
    def _missing_(cls, value: object) -> HashAlgorithm:
        """``HashAlgorithm("md5")`` raises kvpure's typed error, as :meth:`from_name` does."""
        return cls.from_name(value)

    @property
    def uses_cbor(self) -> bool:
        """Whether payloads are canonical CBOR (else pickle protocol 5)."""
        return self in (HashAlgorithm.SHA256_CBOR, HashAlgorithm.XXHASH_CBOR)

    @property
    def is_cryptographic(self) -> bool:
        """SHA-256 based (vLLM 0.33 seeds only these without PYTHONHASHSEED)."""
        return self in (HashAlgorithm.SHA256, HashAlgorithm.SHA256_CBOR)

    @property
    def digest_bytes(self) -> int:
        """The digest's length: 32 for SHA-256, 16 for XXH3-128."""
        return 32 if self.is_cryptographic else 16

    @property
    def serialize(self) -> Callable[[object], bytes]:
        """The payload serialiser: canonical CBOR or pickle protocol 5."""
        return cbor_payload if self.uses_cbor else pickle_payload

    @property
    def digest(self) -> Callable[[bytes], bytes]:
        """The digest over serialised bytes: SHA-256 or XXH3-128."""
        return _sha256_digest if self.is_cryptographic else _xxhash.xxh3_128_digest

    @property
    def hash_fn(self) -> HashFunction:
        """vLLM's hash function: ``digest(serialize(value))``."""
        return _HASH_FNS[self]


_BY_NAME: Final[dict[str, HashAlgorithm]] = {a.value: a for a in HashAlgorithm}
_HASH_FNS: Final[dict[HashAlgorithm, HashFunction]] = {
    HashAlgorithm.SHA256: sha256,
    HashAlgorithm.SHA256_CBOR: sha256_cbor,
    HashAlgorithm.XXHASH: xxhash,
    HashAlgorithm.XXHASH_CBOR: xxhash_cbor,
}
HASH_ALGORITHM_NAMES: Final[tuple[str, ...]] = tuple(_BY_NAME)
"""vLLM's names of the four algorithms, in vLLM's order."""


def get_hash_fn_by_name(name: str) -> HashFunction:
    """The hash function vLLM uses for ``prefix_caching_hash_algo=name``."""
    return HashAlgorithm.from_name(name).hash_fn
