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


# ---------------------------------------------------------------------------
# Spec and planning errors
# ---------------------------------------------------------------------------
# (owned by the planning area)


# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------
# (owned by the free-queue area)


class BlockHashAlreadySetError(KVPureValueError):
    """``set_block_hash`` was called on a block that already carries a hash.

    vLLM asserts here. ``block_id`` names the block; call ``reset_hash()``
    first (the pool does so when it evicts the block).
    """

    def __init__(self, *, block_id: int, reason: str) -> None:
        super().__init__(f"block {block_id}: {reason}")
        self.block_id = block_id
        self.reason = reason


class NotEnoughFreeBlocksError(KVPureValueError):
    """More blocks were popped than the free block queue holds.

    ``num_requested`` blocks were asked for, ``num_free_blocks`` were free.
    """

    def __init__(self, *, num_requested: int, num_free_blocks: int) -> None:
        super().__init__(
            f"popleft_n({num_requested}) asks for {num_requested} blocks but only "
            f"{num_free_blocks} free blocks are in the queue; pop at most "
            f"{num_free_blocks} blocks or free some first"
        )
        self.num_requested = num_requested
        self.num_free_blocks = num_free_blocks


class NoFreeBlocksError(NotEnoughFreeBlocksError):
    """``popleft()`` on an empty free block queue (vLLM's ValueError message)."""

    def __init__(self) -> None:
        KVPureValueError.__init__(self, "No free blocks available")
        self.num_requested = 1
        self.num_free_blocks = 0


class FreeBlockQueueMisuseError(KVPureRuntimeError):
    """A block was given to a free block queue operation it does not fit.

    ``operation`` names the queue method, ``block_id`` the block, and
    ``reason`` says what is wrong with it. The queue is left unchanged.
    """

    def __init__(self, *, operation: str, block_id: int, reason: str) -> None:
        super().__init__(f"{operation}() called on block {block_id}: {reason}")
        self.operation = operation
        self.block_id = block_id
        self.reason = reason


class BlockNotQueuedError(FreeBlockQueueMisuseError):
    """``remove()`` of a block that is in no free block queue (vLLM: RuntimeError)."""


class BlockAlreadyQueuedError(FreeBlockQueueMisuseError):
    """A block that already is in this queue (or twice in one batch) was added again."""


class BlockInOtherQueueError(FreeBlockQueueMisuseError):
    """A block that is linked into a different free block queue was passed."""


# ---------------------------------------------------------------------------
# GPU adapter errors
# ---------------------------------------------------------------------------
# (owned by kvpure_gpu; errors that need no torch live here)


# ---------------------------------------------------------------------------
# Interop and model-config errors
# ---------------------------------------------------------------------------
# (owned by interop and the model-config reader)
