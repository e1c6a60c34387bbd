"""Errors of block hashing: an unknown algorithm or profile, a NONE_HASH not asked for,
block sizes that do not divide, a group id that does not fit, a value CBOR cannot write."""

from __future__ import annotations

from kvpure.errors import KVPureValueError

__all__ = [
    "BlockSizeMismatchError",
    "CborEncodeError",
    "GroupIdOutOfRangeError",
    "RandomNoneHashNotRequestedError",
    "UnknownHashAlgorithmError",
    "UnknownHashProfileError",
]


class UnknownHashAlgorithmError(KVPureValueError):
    """A hash function name vLLM does not know (vLLM raises ValueError).

    ``name`` is what was given, ``valid_names`` the names vLLM accepts for
    ``--prefix-caching-hash-algo``.
    """

    def __init__(self, *, name: str, valid_names: tuple[str, ...]) -> None:
        super().__init__(
            f"Unsupported hash function: {name!r}; prefix_caching_hash_algo must be one of "
            f"{', '.join(valid_names)}"
        )
        self.name = name
        self.valid_names = valid_names


class UnknownHashProfileError(KVPureValueError):
    """A vLLM hashing profile name kvpure does not have."""

    def __init__(self, *, name: str, valid_names: tuple[str, ...]) -> None:
        super().__init__(
            f"unknown hashing profile {name!r}; choose one of {', '.join(valid_names)}"
        )
        self.name = name
        self.valid_names = valid_names


class RandomNoneHashNotRequestedError(KVPureValueError):
    """No seed was given and the profile's rule for that case is a random NONE_HASH.

    vLLM draws such a NONE_HASH from ``os.urandom`` in each process, so no
    other process can reproduce its hashes. kvpure does that only when asked.
    """

    def __init__(self, *, profile: str, algorithm: str) -> None:
        super().__init__(
            f"profile {profile} with algorithm {algorithm} and no seed gives a random "
            "NONE_HASH (vLLM uses os.urandom when PYTHONHASHSEED is unset); pass the "
            "server's PYTHONHASHSEED as seed (--seed), or ask for a random NONE_HASH "
            "explicitly (random_none_hash=True, --random-none-hash)"
        )
        self.profile = profile
        self.algorithm = algorithm


class BlockSizeMismatchError(KVPureValueError):
    """Block hashes cannot be viewed at the requested block size (vLLM asserts)."""

    def __init__(self, *, hash_block_size: int, block_size: int, reason: str) -> None:
        super().__init__(
            f"cannot view block hashes computed at hash_block_size={hash_block_size} "
            f"tokens as block_size={block_size} tokens: {reason}"
        )
        self.hash_block_size = hash_block_size
        self.block_size = block_size
        self.reason = reason


class GroupIdOutOfRangeError(KVPureValueError, OverflowError):
    """A KV-cache group id does not fit in 4 unsigned bytes (vLLM: OverflowError)."""

    def __init__(self, *, group_id: int) -> None:
        super().__init__(
            f"group_id={group_id} does not fit the 4-byte big-endian group id; "
            f"it must be in 0..{2**32 - 1}"
        )
        self.group_id = group_id


class CborEncodeError(KVPureValueError):
    """A payload holds a value the canonical CBOR encoder does not encode."""

    def __init__(self, *, type_name: str, reason: str) -> None:
        super().__init__(f"cannot CBOR-encode a value of type {type_name}: {reason}")
        self.type_name = type_name
        self.reason = reason


# ---------------------------------------------------------------------------
# Spec and planning errors
# ---------------------------------------------------------------------------
# (owned by the planning area)
