"""The roots of kvpure's exception tree and the errors every area raises about its inputs.

:mod:`kvpure.errors` is the public home of these classes (it re-exports them with every
area's leaves); the areas' error modules import them from here, so that no module imports
the facade that imports it.
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


__all__ = [
    "FieldIndexError",
    "FieldTypeError",
    "InvalidFieldError",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureTypeError",
    "KVPureValueError",
    "format_gib",
]
