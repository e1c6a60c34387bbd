"""The call hook's size checks against what Python's own ``str``/``bytes`` methods return.

transformers renders a chat template over real ``str``, so the expected value of
each case is the length of Python's own result: the hook must refuse a call
exactly when that result would be longer than the text bound. The bound is
read when the hook runs, so a small one (100 characters) stands for 4 Mi here
and each case stays small. The figure itself (4 Mi) is checked in
``test_text_budget_bounds.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kvpure.text import call_budget
from kvpure.text.budget import BudgetExceeded

BOUND = 100

# (owner, method, args, kwargs): each is called by Python too, for the expected length
CALLS: list[tuple[str | bytes, str, tuple[Any, ...], dict[str, Any]]] = [
    *[
        (owner, name, (width, *fill), {})
        for owner in ("a", "-12")
        for name in ("center", "ljust", "rjust")
        for width in (BOUND - 1, BOUND, BOUND + 1, -5)
        for fill in ((), ("*",))
    ],
    *[("-12", "zfill", (width,), {}) for width in (BOUND, BOUND + 1)],
    *[(b"ab", "center", (width,), {}) for width in (BOUND, BOUND + 1)],
    *[(b"ab", "zfill", (width,), {}) for width in (BOUND, BOUND + 1)],
    # tabs at the start of the text: each grows to exactly ``tabsize`` characters
    *[("\t" * 12, "expandtabs", (), {}), ("\t" * 13, "expandtabs", (), {})],  # 96, 104
    *[("\t" * 10, "expandtabs", (size,), {}) for size in (10, 11)],
    *[("\t" * 10, "expandtabs", (), {"tabsize": size}) for size in (10, 11)],
    *[("\t" * 50 + "x" * 50, "expandtabs", (size,), {}) for size in (0, 1, 2)],
    *[("\t" * 100, "expandtabs", (size,), {}) for size in (-3, 0, 1)],
    *[(b"\t" * 10, "expandtabs", (size,), {}) for size in (10, 11)],
    *[(b"\t\tab", "expandtabs", (), {})],
    # replace: every occurrence grows by len(new) - len(old)
    *[("a" * 10, "replace", ("a", "b" * n), {}) for n in (10, 11)],
    *[("xa" * 10, "replace", ("a", "b" * n), {}) for n in (9, 10)],  # 10 + 10n
    *[("a" * 99, "replace", ("a", "bb", count), {}) for count in (1, 2, 0, -1)],
    *[("a" * 98, "replace", ("a", "bb", count), {}) for count in (2, 3)],
    *[("aa" * 50, "replace", ("aa", ""), {}), ("a" * 100, "replace", ("a", "a"), {})],
    *[("a" * BOUND, "replace", ("x", "yy"), {}), ("ab" * 50, "replace", ("ab", "c"), {})],
    # an empty old string: a replacement around each character, len(owner) + 1 of them
    *[("a" * 9, "replace", ("", "b" * n), {}) for n in (9, 10)],
    *[("a" * 32, "replace", ("", "bb"), {}), ("a" * 33, "replace", ("", "bb"), {})],
    *[(b"a" * 9, "replace", (b"", b"b" * n), {}) for n in (9, 10)],
    *[(b"a" * 10, "replace", (b"a", b"b" * n), {}) for n in (10, 11)],
    *[(b"xa" * 10, "replace", (b"a", b"b" * 10, count), {}) for count in (1, 9)],
    # nested format widths (``{:{}}``): the width comes from an argument, its sign is the
    # alignment's, so abs counts
    *[("{:{}}", "format", (7, width), {}) for width in (BOUND, BOUND + 1, -BOUND - 1)],
    *[("{:{w}}", "format", ("a",), {"w": width}) for width in (BOUND, BOUND + 1)],
    *[("{a:{w}}", "format_map", ({"a": "x", "w": width},), {}) for width in (BOUND, BOUND + 1)],
    *[("{}{}", "format", ("a", BOUND + 1), {}), ("{:>{}}", "format", ("a", 3), {})],
    # methods that do not grow a string, with arguments of every kind (two str arguments
    # that are not a replacement: encode's encoding and errors)
    *[("utf-8" * 20, "encode", ("utf-8", "strict"), {}), ("aa" * 50, "split", ("a", 1), {})],
    *[("a,b,c", "split", (",", 1), {}), ("abc", "count", ("a", 0), {})],
    *[("abc", "upper", (), {}), ("abc", "startswith", ("a", 0, 2), {})],
]


def _label(call: tuple[str | bytes, str, tuple[Any, ...], dict[str, Any]]) -> str:
    owner, name, args, kwargs = call
    return f"{owner[:8]!r}.{name}{args!r:.40}{kwargs or ''}"


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(call_budget, "MAX_TEXT_CHARS", BOUND)


@pytest.mark.usefixtures("small_bound")
@pytest.mark.parametrize("call", CALLS, ids=_label)
def test_a_call_is_refused_exactly_when_pythons_result_is_too_long(
    call: tuple[str | bytes, str, tuple[Any, ...], dict[str, Any]],
) -> None:
    owner, name, args, kwargs = call
    method: Callable[..., Any] = getattr(owner, name)
    result = method(*args, **kwargs)
    expected = len(result) if isinstance(result, str | bytes | list) else 0
    if expected > BOUND:
        with pytest.raises(BudgetExceeded):
            call_budget.check_call_arguments(method, args, kwargs)
    else:
        call_budget.check_call_arguments(method, args, kwargs)


@pytest.mark.usefixtures("small_bound")
@pytest.mark.parametrize("name", ["center", "ljust", "rjust", "zfill"])
def test_a_width_is_refused_before_the_call_with_its_name(name: str) -> None:
    # 'a'.center(2**62) would raise MemoryError: the hook refuses first, naming the call
    with pytest.raises(BudgetExceeded, match=rf"calls {name} with 4611686018427387904"):
        call_budget.check_call_arguments(getattr("a", name), (2**62,), {})
    call_budget.check_call_arguments(getattr("a", name), (BOUND,), {})


@pytest.mark.usefixtures("small_bound")
def test_a_wrapped_format_is_checked_as_format() -> None:
    # jinja2's sandbox hands over a wrapper of str.format (``__wrapped__`` names it)
    owner = "{:{}}"

    def wrapper(*args: object, **kwargs: object) -> str:
        return owner.format(*args, **kwargs)

    wrapper.__wrapped__ = owner.format  # type: ignore[attr-defined]  # as functools.wraps sets it
    with pytest.raises(BudgetExceeded, match=f"calls format with {BOUND + 1}"):
        call_budget.check_call_arguments(wrapper, ("a", BOUND + 1), {})
    call_budget.check_call_arguments(wrapper, ("a", BOUND), {})


@pytest.mark.usefixtures("small_bound")
def test_python_decides_what_it_refuses_itself() -> None:
    # the hook passes these on (Python raises its own TypeError/ValueError), it does not
    # fail inside itself: str/bytes mixed, a malformed format, a keyword count (Python
    # 3.13 takes it; the hook counts it as the positional count)
    for owner, name, args, kwargs in [
        ("a" * 60, "replace", (b"a", "bb"), {}),
        (b"a" * 60, "replace", ("a", b"bb"), {}),
        ("a" * 60, "replace", ("a", b"bb"), {}),
        ("{:{}", "format", ("a", BOUND + 1), {}),
        ("{", "format_map", ({},), {}),
        ("a" * 60, "replace", ("a", "bb"), {"count": 1}),
        ("ab", "center", ("x",), {}),
        ("\t" * 60, "expandtabs", (None,), {}),
    ]:
        call_budget.check_call_arguments(getattr(owner, name), args, kwargs)
    with pytest.raises(BudgetExceeded):
        call_budget.check_call_arguments(("a" * 60).replace, ("a", "bb"), {"count": 50})


def test_other_callables_pass() -> None:
    call_budget.check_call_arguments(len, ("abc",), {})
    call_budget.check_call_arguments([1, 2].index, (2,), {})
    call_budget.check_call_arguments((1, 2).count, (2,), {})
