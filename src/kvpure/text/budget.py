"""The bounds a chat template renders within: time, text size, literals.

A chat template is code from the model's folder. transformers renders it in
jinja2's sandbox, which stops attribute escapes but not a template that loops
for hours or builds a gigabyte string; kvpure adds stated bounds, each ending
in :class:`~kvpure.text.errors.ChatTemplateError`:

- **source**: at most :data:`MAX_TEMPLATE_CHARS` characters; no string literal
  over :data:`MAX_LITERAL_CHARS` characters and no integer literal over
  :data:`MAX_LITERAL_INT` (checked on the parsed tree, before rendering);
- **time**: a render stops after :data:`RENDER_SECONDS` seconds. The clock is
  read at every loop step over ``range`` (the sandbox's only unbounded
  iteration: every other iterable is a value already bounded below), every
  call, attribute or item read, every ``~`` join, every intercepted operator
  and every output chunk;
- **size**: no string, list or tuple the template builds (``~``, ``+``, ``*``,
  ``%``, ``center``/``indent``/``format``/``replace``/``wordwrap`` and the
  growing methods of ``str``, :mod:`kvpure.text.call_budget`) may exceed
  :data:`MAX_TEXT_CHARS`, checked before it is built; ``**`` is refused past
  :data:`MAX_POWER_BITS` bits; the rendered output stops at
  :data:`MAX_TEXT_CHARS` characters (the prompt bound of :mod:`kvpure.text.tokenizer`).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, overload

__all__ = [
    "MAX_LITERAL_CHARS",
    "MAX_LITERAL_INT",
    "MAX_POWER_BITS",
    "MAX_TEMPLATE_CHARS",
    "MAX_TEXT_CHARS",
    "RENDER_SECONDS",
    "BudgetExceeded",
    "BudgetedRange",
    "Budget",
    "budgeted_filters",
    "budgeted_range",
    "check_format_widths",
    "check_literals",
    "check_size",
    "over_the_bound",
]

MAX_TEXT_CHARS: Final = 4 * 2**20
"""The longest text a template may build or render, and the longest prompt tokenized (4 Mi
characters: 4 MiB of ASCII)."""
MAX_TEMPLATE_CHARS: Final = 2**20
"""The longest chat template source accepted (1 Mi characters; real ones are under 50 Ki)."""
MAX_LITERAL_CHARS: Final = 64 * 2**10
"""The longest string literal in a template (64 Ki characters)."""
MAX_LITERAL_INT: Final = 2**64
"""The largest integer literal (in absolute value) in a template."""
MAX_POWER_BITS: Final = 4096
"""The largest result of ``**`` a template may compute, in bits."""
RENDER_SECONDS: Final = 2.0
"""The time one render may take."""

_RANGE_STRIDE: Final = 1024  # range steps between clock reads


class BudgetExceeded(BaseException):
    """A template went past one of the bounds (turned into ChatTemplateError by the caller).

    A ``BaseException``, so that no ``except Exception`` inside jinja2 (its
    constant folding, its attribute fallbacks) can swallow it.
    """


class Budget(threading.local):
    """The deadline of the render running in this thread (none outside a render)."""

    deadline: float = math.inf

    def start(self) -> None:
        self.deadline = time.monotonic() + RENDER_SECONDS

    def stop(self) -> None:
        self.deadline = math.inf

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise BudgetExceeded(f"the chat template ran past its {RENDER_SECONDS:g} s budget")


BUDGET: Final = Budget()


def over_the_bound(what: str, size: int) -> BudgetExceeded:
    """The error for ``what``, ``size`` items long, past :data:`MAX_TEXT_CHARS`."""
    return BudgetExceeded(
        f"the chat template builds {what} of {size:,} items (at most {MAX_TEXT_CHARS:,})"
    )


def check_size(value: object, what: str = "a value") -> object:
    """``value``, unless it is a str, list or tuple over :data:`MAX_TEXT_CHARS`."""
    if isinstance(value, str | bytes | list | tuple) and len(value) > MAX_TEXT_CHARS:
        raise over_the_bound(what, len(value))
    return value


class BudgetedRange:
    """The sandbox's ``range``: jinja2's ``range`` object, reading the clock while iterated.

    To a template it is the ``range`` that transformers' sandbox hands out (a
    length, items, slices, a truth value, ``start``/``stop``/``step``, the same
    printed form); only iterating it reads the clock, every
    :data:`_RANGE_STRIDE` steps.
    """

    __slots__ = ("_steps",)

    def __init__(self, steps: range) -> None:
        self._steps = steps

    @property
    def start(self) -> int:
        return self._steps.start

    @property
    def stop(self) -> int:
        return self._steps.stop

    @property
    def step(self) -> int:
        return self._steps.step

    def __len__(self) -> int:
        return len(self._steps)

    def __bool__(self) -> bool:
        return bool(self._steps)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> BudgetedRange: ...

    def __getitem__(self, index: int | slice) -> int | BudgetedRange:
        if isinstance(index, slice):
            return BudgetedRange(self._steps[index])
        return self._steps[index]

    def __contains__(self, value: object) -> bool:
        return value in self._steps

    def __iter__(self) -> Iterator[int]:
        steps = self._steps
        for start in range(0, len(steps), _RANGE_STRIDE):
            BUDGET.tick()
            yield from steps[start : start + _RANGE_STRIDE]

    def __reversed__(self) -> Iterator[int]:
        return iter(BudgetedRange(self._steps[::-1]))

    def index(self, value: Any) -> int:
        return self._steps.index(value)

    def count(self, value: Any) -> int:
        return self._steps.count(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BudgetedRange):
            return self._steps == other._steps
        return self._steps == other

    def __hash__(self) -> int:
        return hash(self._steps)

    def __repr__(self) -> str:
        return repr(self._steps)


def budgeted_range(*args: int) -> BudgetedRange:
    """The sandbox's ``range``: jinja2's ``safe_range`` (with its size cap), budgeted."""
    from jinja2.sandbox import safe_range

    BUDGET.tick()
    return BudgetedRange(safe_range(*args))


def _length(value: object) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


def checked_binop(operator: str, left: Any, right: Any) -> Any:
    """``left operator right`` for the intercepted operators, refusing oversized results."""
    BUDGET.tick()
    if operator == "**":
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and abs(left) > 1
            and right * abs(left).bit_length() > MAX_POWER_BITS
        ):
            raise BudgetExceeded(
                f"the chat template computes a power of over {MAX_POWER_BITS} bits"
            )
        return left**right
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            size = _length(seq)
            if size is not None and isinstance(times, int) and size * times > MAX_TEXT_CHARS:
                raise over_the_bound("a repeated sequence", size * times)
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() + right.bit_length() > MAX_POWER_BITS
        ):
            raise BudgetExceeded(
                f"the chat template computes a product of over {MAX_POWER_BITS} bits"
            )
        return left * right
    if operator == "+":
        a, b = _length(left), _length(right)
        if a is not None and b is not None and a + b > MAX_TEXT_CHARS:
            raise over_the_bound("a joined sequence", a + b)
        return left + right
    if operator == "%":
        if isinstance(left, str):
            check_format_widths(left)
        return left % right
    raise BudgetExceeded(f"operator {operator!r} is not intercepted")  # pragma: no cover


_WIDTHS = re.compile(r"\d+")


def check_format_widths(spec: str) -> None:
    """Refuse a format string holding a number (a width or precision) over the text bound."""
    for digits in _WIDTHS.findall(spec):
        significant = digits.lstrip("0")  # a leading 0 is the zero-padding flag
        if len(significant) > 7 or int(significant or "0") > MAX_TEXT_CHARS:
            raise BudgetExceeded(
                f"the chat template formats with a width of {digits[:20]} "
                f"(at most {MAX_TEXT_CHARS:,})"
            )


def checked_join(parts: tuple[object, ...], join: Callable[[Any], str]) -> str:
    """jinja2's ``~`` join, refusing a result over the text bound."""
    BUDGET.tick()
    total = 0
    for part in parts:
        size = _length(part)
        total += size if size is not None else 32
    if total > MAX_TEXT_CHARS:
        raise over_the_bound("a joined string", total)
    return join(parts)


def budgeted_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The width-taking filters wrapped with their size checks (``slice``: its count of
    slices; ``batch`` with a fill value: its line count)."""

    def wrap(name: str, size_of: Callable[..., int]) -> Callable[..., Any]:
        original = filters[name]

        def filtered(*args: Any, **kwargs: Any) -> Any:
            BUDGET.tick()
            size = size_of(*args, **kwargs)
            if size > MAX_TEXT_CHARS:
                raise over_the_bound(f"a string (filter {name})", size)
            return original(*args, **kwargs)

        filtered.__name__ = original.__name__
        for attribute in ("jinja_pass_arg",):  # eval-context / environment filters
            if hasattr(original, attribute):
                setattr(filtered, attribute, getattr(original, attribute))
        return filtered

    def text(value: object) -> str:
        return value if isinstance(value, str) else str(value)[: MAX_TEXT_CHARS + 1]

    def center(value: object, width: int = 80, *_: Any, **__: Any) -> int:
        return max(len(text(value)), width if isinstance(width, int) else 0)

    def indent(*args: Any, **kwargs: Any) -> int:
        values = [a for a in args if not _is_context(a)]
        value = text(values[0])  # jinja2 passes the filtered value first
        width = kwargs.get("width", values[1] if len(values) > 1 else 4)
        width = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        return len(value) * (1 + max(width, 0))

    def format_size(value: object, *args: Any, **kwargs: Any) -> int:
        if isinstance(value, str):
            check_format_widths(value)
        return len(text(value))

    def replace(*args: Any, **kwargs: Any) -> int:
        values = [a for a in args if not _is_context(a)]
        names = ("old", "new", "count")  # jinja2's do_replace(s, old, new, count=None)
        given = dict(zip(names, values[1:], strict=False))
        given |= {name: kwargs[name] for name in names if name in kwargs}
        if not values or "old" not in given or "new" not in given:
            return 0
        value, old, new = text(values[0]), str(given["old"]), str(given["new"])
        times = value.count(old) if old else len(value) + 1  # "" is replaced around each item
        count = given.get("count")
        if isinstance(count, int) and count >= 0:
            times = min(times, count)
        return len(value) + times * max(len(new) - len(old), 0)

    def wordwrap(*args: Any, **kwargs: Any) -> int:
        values = [a for a in args if not _is_context(a)]
        return 2 * len(text(values[0]))  # jinja2 passes the filtered value first

    def slices(*args: Any, **kwargs: Any) -> int:
        values = [a for a in args if not _is_context(a)]  # do_slice(value, slices, fill_with)
        count = kwargs.get("slices", values[1] if len(values) > 1 else 0)
        return count if isinstance(count, int) else 0

    def batch(*args: Any, **kwargs: Any) -> int:
        values = [a for a in args if not _is_context(a)]  # do_batch(value, linecount, fill_with)
        count = kwargs.get("linecount", values[1] if len(values) > 1 else 0)
        filled = kwargs.get("fill_with", values[2] if len(values) > 2 else None) is not None
        return count if filled and isinstance(count, int) else 0

    wrapped = dict(filters)
    wrapped["slice"] = wrap("slice", slices)
    wrapped["batch"] = wrap("batch", batch)
    wrapped["center"] = wrap("center", center)
    wrapped["indent"] = wrap("indent", indent)
    wrapped["format"] = wrap("format", format_size)
    wrapped["replace"] = wrap("replace", replace)
    wrapped["wordwrap"] = wrap("wordwrap", wordwrap)
    return wrapped


def _is_context(value: object) -> bool:
    """jinja2 passes its eval context or environment first to some filters.

    The environment is kvpure's sandbox, a subclass defined outside jinja2: its
    classes are searched too (``wordwrap`` takes the environment first).
    """
    return any(cls.__module__.startswith("jinja2.") for cls in type(value).__mro__)


def check_literals(tree: Any) -> None:
    """Refuse string literals over MAX_LITERAL_CHARS and integers over MAX_LITERAL_INT."""
    from jinja2 import nodes

    for const in tree.find_all(nodes.Const):
        value = const.value
        if isinstance(value, str) and len(value) > MAX_LITERAL_CHARS:
            raise BudgetExceeded(
                f"the chat template holds a string literal of {len(value):,} characters "
                f"(at most {MAX_LITERAL_CHARS:,})"
            )
        if isinstance(value, int) and abs(value) > MAX_LITERAL_INT:
            raise BudgetExceeded(
                f"the chat template holds an integer literal over {MAX_LITERAL_INT:,}"
            )
    for data in tree.find_all(nodes.TemplateData):
        if len(data.data) > MAX_TEMPLATE_CHARS:  # pragma: no cover  # bounded by the source
            raise BudgetExceeded("the chat template holds too much literal text")
