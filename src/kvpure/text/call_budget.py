"""The size check of a template's method calls (the ``call`` hook of kvpure's sandbox).

transformers renders a chat template in jinja2's sandbox over real ``str``, so a
method call runs as Python runs it; kvpure refuses, before the call, only
those whose result would exceed :data:`~kvpure.text.budget.MAX_TEXT_CHARS`.
"""

from __future__ import annotations

import string
from typing import Any, Final

from kvpure.text.budget import (
    BUDGET,
    MAX_TEXT_CHARS,
    BudgetExceeded,
    check_format_widths,
    over_the_bound,
)

__all__ = ["check_call_arguments"]


#: ``str``/``bytes`` methods whose first argument is the width of the result.
_WIDTH_METHODS: Final = frozenset({"center", "ljust", "rjust", "zfill"})


def check_call_arguments(target: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A method of a str, list or tuple called so that its result would exceed the text bound.

    Only arguments that size the result are checked, so every other call runs
    as Python runs it (a negative or large ``count``/``maxsplit``/``start`` is
    Python's "all"/"clamped", as transformers' sandbox over real str gives):
    the width of ``center``/``ljust``/``rjust``/``zfill``, the tab size of
    ``expandtabs``, the replacements of ``replace`` (at most ``count`` when it
    is not negative) and the widths of ``format``/``format_map``.
    """
    BUDGET.tick()
    method = getattr(target, "__wrapped__", target)  # the sandbox wraps str.format
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, str | bytes | list | tuple):
        return
    name = getattr(method, "__name__", "")
    if name in ("format", "format_map") and isinstance(owner, str):
        check_format_widths(owner)
        _check_nested_widths(owner, name, args, kwargs)
    elif isinstance(owner, str | bytes):
        _check_grown_size(name, owner, args, kwargs)


def _check_grown_size(
    name: str, owner: str | bytes, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Refuse ``owner.name(*args, **kwargs)`` when a growing method's result would be too long."""
    if name in _WIDTH_METHODS and args and isinstance(args[0], int):
        if args[0] > MAX_TEXT_CHARS:
            raise BudgetExceeded(
                f"the chat template calls {name} with {args[0]} (at most {MAX_TEXT_CHARS:,})"
            )
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tabsize, int):
            tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
            size = len(owner) + tabs * max(tabsize - 1, 0)
            if size > MAX_TEXT_CHARS:
                raise over_the_bound("an expanded string", size)
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        times = _occurrences(owner, old)
        if times is not None and type(new) is type(owner) and isinstance(count, int):
            if count >= 0:
                times = min(times, count)
            size = len(owner) + times * max(len(new) - len(old), 0)
            if size > MAX_TEXT_CHARS:
                raise over_the_bound("a replaced string", size)


def _occurrences(owner: str | bytes, old: object) -> int | None:
    """The places ``owner.replace(old, ...)`` replaces (an empty ``old``: around each item)."""
    if isinstance(owner, str) and isinstance(old, str):
        return owner.count(old) if old else len(owner) + 1
    if isinstance(owner, bytes) and isinstance(old, bytes):
        return owner.count(old) if old else len(owner) + 1
    return None


def _check_nested_widths(
    owner: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """A ``{:{}}`` width taken from an argument (its sign is the format's sign: abs)."""
    if not any("{" in (spec or "") for _, _, spec, _ in _format_fields(owner)):
        return
    values: list[object] = [*args, *kwargs.values()]
    if name == "format_map" and args and isinstance(args[0], dict):
        values.extend(args[0].values())
    for value in values:
        if isinstance(value, int) and abs(value) > MAX_TEXT_CHARS:
            raise BudgetExceeded(
                f"the chat template calls {name} with {value} (at most {MAX_TEXT_CHARS:,})"
            )


def _format_fields(owner: str) -> list[tuple[str, str | None, str | None, str | None]]:
    """``string.Formatter().parse(owner)``; a malformed string has none (format raises)."""
    try:
        return list(string.Formatter().parse(owner))
    except ValueError:
        return []
