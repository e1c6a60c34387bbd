"""The kvpure exception tree.

Every error kvpure raises derives from :class:`KVPureError`. Each leaf also
derives from the stdlib exception vLLM raises in the same situation, so code
written against vLLM keeps catching what it caught before. Where vLLM raises
``AssertionError`` for a user mistake, kvpure raises a ``ValueError`` subclass.

The inputs that caused an error are attributes of it (callers never parse the
message), and every error pickles with those attributes intact.

::

    KVPureError
    ├── KVPureValueError (ValueError)
    │   ├── InvalidFieldError            a field of an input value is out of range
    │   └── ... (the areas below add their leaves)
    ├── KVPureNotImplementedError (NotImplementedError)
    └── KVPureRuntimeError (RuntimeError)

Each area of the library keeps its leaves in its own section below.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type[KVPureError], args: tuple[Any, ...], state: dict[str, Any]) -> KVPureError:
    """Recreate an error without calling its keyword-only ``__init__``."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class KVPureError(Exception):
    """Root of every error raised by kvpure."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    @property
    def message(self) -> str:
        """The human-readable message (the first argument)."""
        return str(self.args[0]) if self.args else ""


class KVPureValueError(KVPureError, ValueError):
    """A value is wrong (vLLM raises ValueError or AssertionError here)."""


class KVPureNotImplementedError(KVPureError, NotImplementedError):
    """vLLM does not support this combination (vLLM raises NotImplementedError)."""


class KVPureRuntimeError(KVPureError, RuntimeError):
    """A state-dependent operation failed (vLLM raises RuntimeError)."""


class InvalidFieldError(KVPureValueError):
    """A field of an input value is missing, of the wrong kind, or out of range.

    ``field`` names it (dotted for nested values), ``value`` is what was given
    and ``reason`` says what was expected.
    """

    def __init__(self, *, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}: {reason} (got {value!r})")
        self.field = field
        self.value = value
        self.reason = reason


# ---------------------------------------------------------------------------
# Hashing errors
# ---------------------------------------------------------------------------
# (owned by the hashing area)


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


# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------
# (owned by the free-queue area)


# ---------------------------------------------------------------------------
# GPU adapter errors
# ---------------------------------------------------------------------------
# (owned by kvpure_gpu; errors that need no torch live here)


# ---------------------------------------------------------------------------
# Interop and model-config errors
# ---------------------------------------------------------------------------
# (owned by interop and the model-config reader)
