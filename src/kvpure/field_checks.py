"""The one field check: an exact ``int`` within bounds, else :class:`InvalidFieldError`.

``bool`` is refused although it is an ``int`` subclass (``True`` is never meant
as a block size), and so is every non-int; the error names the field.

The public planner's three arguments are checked once, at the boundary, by
:func:`kvpure.planning.inputs.check_plan_inputs`, so that the planning core runs
unchecked on known-good values.
"""

from __future__ import annotations

import math

from kvpure.errors import FieldTypeError, InvalidFieldError

__all__ = [
    "MAX_MEMORY_BYTES",
    "check_bool",
    "check_bytes",
    "check_instance",
    "check_int",
    "check_optional_int",
    "check_str",
]

MAX_MEMORY_BYTES = 2**96
"""The largest memory figure accepted (vLLM's integer arithmetic is exact far past real
sizes; 2**96 bytes keeps every product of block counts and page sizes a modest int)."""


def check_int(field: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` if it is an int in ``[minimum, maximum]``; else an error naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFieldError(field=field, value=value, reason="must be an integer")
    if value < minimum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at most {maximum}")
    return value


def check_optional_seconds(field: str, value: object, *, reason: str) -> None:
    """``value`` is None or a finite, non-negative int or float (seconds); else an error."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidFieldError(field=field, value=value, reason=reason)
    if value < 0:
        raise InvalidFieldError(field=field, value=value, reason=reason)


def check_optional_int(
    field: str, value: object, *, minimum: int, maximum: int | None = None
) -> int | None:
    """Like :func:`check_int`, but ``None`` (not set) is allowed."""
    return None if value is None else check_int(field, value, minimum=minimum, maximum=maximum)


def check_bool(field: str, value: object) -> bool:
    """``value`` if it is ``True`` or ``False`` (not 1, None or a str); else an error."""
    if value is not True and value is not False:
        raise FieldTypeError(field=field, value=value, reason="must be True or False")
    return value


def check_bytes(field: str, value: object, *, what: str = "bytes") -> bytes:
    """``value`` if it is ``bytes``; else an error naming ``field``."""
    if not isinstance(value, bytes):
        raise FieldTypeError(field=field, value=value, reason=f"must be {what} (bytes)")
    return value


def check_str(field: str, value: object) -> str:
    """``value`` if it is a ``str``; else an error naming ``field``."""
    if not isinstance(value, str):
        raise FieldTypeError(field=field, value=value, reason="must be a str")
    return value


def check_instance(field: str, value: object, cls: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` unless it is an instance of ``cls`` (``what`` names it for the fix)."""
    if not isinstance(value, cls):
        raise FieldTypeError(field=field, value=value, reason=f"must be {what}")
