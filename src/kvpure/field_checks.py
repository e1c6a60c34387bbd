"""The one field check: an exact ``int`` within bounds, else :class:`InvalidFieldError`.

``bool`` is refused although it is an ``int`` subclass (``True`` is never meant
as a block size), and so is every non-int; the error names the field.
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError

__all__ = ["check_int", "check_optional_int"]


def check_int(field: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` if it is an int in ``[minimum, maximum]``; else an error naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFieldError(field=field, value=value, reason="must be an integer")
    if value < minimum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at most {maximum}")
    return value


def check_optional_int(field: str, value: object, *, minimum: int) -> int | None:
    """Like :func:`check_int`, but ``None`` (not set) is allowed."""
    return None if value is None else check_int(field, value, minimum=minimum)
