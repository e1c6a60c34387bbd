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

The core's leaves live in their areas' modules and are re-exported here (loaded
on first use, the same class objects): specs and planning in
``kvpure.planning.errors``, the free block queue and block tables in
``kvpure.block_errors``. ``kvpure.models``, ``kvpure.cli`` and ``kvpure_gpu``
keep theirs in their own ``errors`` modules, under the same root.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvpure.block_errors import (
        BlockAlreadyQueuedError,
        BlockHashAlreadySetError,
        BlockInOtherQueueError,
        BlockNotQueuedError,
        BlockTableRowOverflowError,
        FreeBlockQueueMisuseError,
        NoCommonKernelBlockSizeError,
        NoFreeBlocksError,
        NotABlockError,
        NotEnoughFreeBlocksError,
        TokenPositionOutOfRangeError,
    )
    from kvpure.planning.errors import (
        AutoFitError,
        ContextParallelUnsupportedError,
        HybridPromotionError,
        HybridUnificationError,
        InsufficientKVCacheMemoryError,
        NoKVCacheMemoryError,
        PageSizeUnificationError,
        PlanningAssertionError,
        PrefixMatchUnitError,
        SinglePrefixMatchUnitError,
        SpecMergeError,
        UnregisteredSpecError,
        WindowSizeMismatchError,
        WorkerSpecMismatchError,
    )


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


class KVPureTypeError(KVPureError, TypeError):
    """An argument of the wrong type (a str where an int is meant, a bool for a count).

    Raised by the runtime checks at the public boundary (``kvpure.runtime_types``),
    in users' own processes; the message names the parameter, what it expected
    and what it got.
    """


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


class FieldIndexError(InvalidFieldError, IndexError):
    """An index out of a sequence's range (an :class:`InvalidFieldError` that is also an
    ``IndexError``, as Python raises for a list)."""


class FieldTypeError(InvalidFieldError, TypeError):
    """An argument or field of the wrong type (a str for an int, None for bytes, ...).

    An :class:`InvalidFieldError` (``field``, ``value``, ``reason``) that is also a
    ``TypeError``, as Python raises for a wrong argument type.
    """


def format_gib(num_bytes: int) -> str:
    """Bytes as GiB the way vLLM prints them: ``str(round(b / 2**30, 2))``."""
    return f"{round(num_bytes / 2**30, 2)}"


#: The leaves kept in their areas' modules, loaded on first use (``kvpure --help``
#: imports this module for :class:`KVPureError` alone): name -> module.
_LEAVES: dict[str, str] = {
    "SpecMergeError": "kvpure.planning.errors",
    "WindowSizeMismatchError": "kvpure.planning.errors",
    "UnregisteredSpecError": "kvpure.planning.errors",
    "WorkerSpecMismatchError": "kvpure.planning.errors",
    "PageSizeUnificationError": "kvpure.planning.errors",
    "HybridUnificationError": "kvpure.planning.errors",
    "HybridPromotionError": "kvpure.planning.errors",
    "NoKVCacheMemoryError": "kvpure.planning.errors",
    "InsufficientKVCacheMemoryError": "kvpure.planning.errors",
    "AutoFitError": "kvpure.planning.errors",
    "PrefixMatchUnitError": "kvpure.planning.errors",
    "SinglePrefixMatchUnitError": "kvpure.planning.errors",
    "ContextParallelUnsupportedError": "kvpure.planning.errors",
    "PlanningAssertionError": "kvpure.planning.errors",
    "BlockHashAlreadySetError": "kvpure.block_errors",
    "NotEnoughFreeBlocksError": "kvpure.block_errors",
    "NoFreeBlocksError": "kvpure.block_errors",
    "FreeBlockQueueMisuseError": "kvpure.block_errors",
    "NotABlockError": "kvpure.block_errors",
    "BlockNotQueuedError": "kvpure.block_errors",
    "BlockAlreadyQueuedError": "kvpure.block_errors",
    "BlockInOtherQueueError": "kvpure.block_errors",
    "BlockTableRowOverflowError": "kvpure.block_errors",
    "TokenPositionOutOfRangeError": "kvpure.block_errors",
    "NoCommonKernelBlockSizeError": "kvpure.block_errors",
}

__all__ = [
    "AutoFitError",
    "BlockAlreadyQueuedError",
    "BlockHashAlreadySetError",
    "BlockInOtherQueueError",
    "BlockNotQueuedError",
    "BlockTableRowOverflowError",
    "ContextParallelUnsupportedError",
    "FieldIndexError",
    "FieldTypeError",
    "FreeBlockQueueMisuseError",
    "HybridPromotionError",
    "HybridUnificationError",
    "InsufficientKVCacheMemoryError",
    "InvalidFieldError",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureTypeError",
    "KVPureValueError",
    "NoCommonKernelBlockSizeError",
    "NoFreeBlocksError",
    "NoKVCacheMemoryError",
    "NotABlockError",
    "NotEnoughFreeBlocksError",
    "PageSizeUnificationError",
    "PlanningAssertionError",
    "PrefixMatchUnitError",
    "SinglePrefixMatchUnitError",
    "SpecMergeError",
    "TokenPositionOutOfRangeError",
    "UnregisteredSpecError",
    "WindowSizeMismatchError",
    "WorkerSpecMismatchError",
    "format_gib",
]


def __getattr__(name: str) -> Any:
    """Load a leaf from its area's module the first time it is asked for."""
    module = _LEAVES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LEAVES})
