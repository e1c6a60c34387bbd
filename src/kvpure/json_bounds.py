"""Bounds on parsed JSON: nesting depth and integer digits, checked at C speed.

Parsing with a Python ``parse_int`` hook costs a call per number (about 1 µs:
seconds for a prompt of millions of token ids). Instead, the C parser reads
integers itself (Python refuses integer text over ``sys.get_int_max_str_digits()``
digits, 4300 by default, so no quadratic parse), and :func:`check_bounds` then
walks the containers: a list's element types are collected with
``set(map(type, items))`` and its integers bounded with ``min``/``max``, so a
flat list of token ids costs a few C passes and no Python call per item.

Where the interpreter's digit limit is off or raised (``PYTHONINTMAXSTRDIGITS``),
:func:`int_hook_needed` says so and callers parse with their ``parse_int`` hook.
"""

from __future__ import annotations

import sys
from typing import cast

__all__ = ["check_bounds", "int_hook_needed", "too_many_digits"]

_SAFE_INT_DIGITS = 4300
_CONTAINERS = (list, dict)


def int_hook_needed() -> bool:
    """Whether the C parser could build integers of more than 4300 digits here."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return limit == 0 or limit > _SAFE_INT_DIGITS


def too_many_digits(err: ValueError) -> bool:
    """Whether ``err`` is Python's refusal of an integer text past its digit limit."""
    return "digits" in str(err) and "integer" in str(err)


def check_bounds(data: object, *, max_depth: int, max_int_digits: int) -> str | None:
    """None if ``data`` nests at most ``max_depth`` containers deep and holds no integer
    of more than ``max_int_digits`` digits; else what is wrong (``"nesting"`` or
    ``"an integer of N digits"``)."""
    limit = 10**max_int_digits
    if type(data) is int:
        return _digits(data, max_int_digits) if not -limit < data < limit else None
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        values: list[object]
        if type(item) is dict:
            values = list(item.values())
        elif type(item) is list:
            values = item
        else:
            continue
        if depth > max_depth:
            return "nesting"
        kinds = set(map(type, values))
        if int in kinds:
            ints = cast(
                "list[int]", values if len(kinds) == 1 else [v for v in values if type(v) is int]
            )
            if ints and (max(ints) >= limit or min(ints) <= -limit):
                big = next(v for v in ints if not -limit < v < limit)
                return _digits(big, max_int_digits)
        if list in kinds or dict in kinds:
            stack.extend((v, depth + 1) for v in values if type(v) in _CONTAINERS)
    return None


def _digits(value: int, max_int_digits: int) -> str:
    return f"an integer of {len(str(abs(value)))} digits (at most {max_int_digits})"
