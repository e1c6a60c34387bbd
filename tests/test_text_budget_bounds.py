"""Each bound of a chat template's render holds exactly at its stated figure.

The figures are those stated in :mod:`kvpure.text.budget`'s docstring and in
issue 24 (4 Mi characters of text per prompt): written here as numbers, not
read from the module, so a changed bound fails. At the bound a template
renders what transformers renders (its compiled template, the one
``apply_chat_template`` uses); one step past it, the render ends in
:class:`ChatTemplateError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kvpure.text import budget, call_budget
from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError

pytest.importorskip("jinja2")

TEXT = 4 * 2**20  # characters a template may build or render (and a prompt may hold)
MESSAGES = (ChatMessage(role="user", texts=("hi",)),)


def _render(source: str) -> str:
    return ChatTemplate(source, {}, where="t").render(MESSAGES, where="w")


def _transformers(source: str) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    template = utils._compile_jinja_template(source)
    return str(template.render(messages=[{"role": "user", "content": "hi"}]))


def test_the_stated_figures() -> None:
    assert budget.MAX_TEXT_CHARS == TEXT
    assert budget.MAX_TEMPLATE_CHARS == 2**20
    assert budget.MAX_LITERAL_CHARS == 64 * 2**10
    assert budget.MAX_LITERAL_INT == 2**64
    assert budget.MAX_POWER_BITS == 4096
    assert budget.RENDER_SECONDS == 2.0


# each: (renders as in transformers, one step past the bound)
AT_AND_PAST: dict[str, tuple[str, str]] = {
    "repeat, sequence left": (
        f"{{{{ ('ab' * {TEXT // 2})|length }}}}",
        f"{{{{ ('ab' * {TEXT // 2 + 1})|length }}}}",
    ),
    "repeat, sequence right": (
        f"{{{{ ({TEXT // 4} * [1, 2, 3, 4])|length }}}}",
        f"{{{{ ({TEXT // 4 + 1} * [1, 2, 3, 4])|length }}}}",
    ),
    "power": ("{{ 2 ** 2048 }}", "{{ 2 ** 2049 }}"),
    "power of a negative base": ("{{ (-3) ** 2048 }}", "{{ (-3) ** 2049 }}"),
    "power of a sum": (
        "{% set x = 2 ** 2047 %}{% set y = x * x %}{{ (y + y) ** 1 }}",
        "{% set x = 2 ** 2047 %}{% set y = x * x %}{{ (y + y + y + y) ** 1 }}",
    ),
    "product": (
        "{% set x = 2 ** 2047 %}{{ x * x }}",
        "{% set x = 2 ** 2047 %}{% set y = 2 ** 2048 %}{{ x * y }}",
    ),
    "plus": (
        f"{{% set x = 'a' * {TEXT - 3} %}}{{{{ (x + 'abc')|length }}}}",
        f"{{% set x = 'a' * {TEXT - 3} %}}{{{{ (x + 'abcd')|length }}}}",
    ),
    "percent width": (
        f"{{{{ ('%{TEXT}s' % 'x')|length }}}}",
        f"{{{{ ('%{TEXT + 1}s' % 'x')|length }}}}",
    ),
    "tilde": (
        f"{{% set x = 'a' * {TEXT - 2} %}}{{{{ (x ~ 'bc')|length }}}}",
        f"{{% set x = 'a' * {TEXT - 2} %}}{{{{ (x ~ 'bcd')|length }}}}",
    ),
    "ljust": (
        f"{{{{ 'a'.ljust({TEXT})|length }}}}",
        f"{{{{ 'a'.ljust({TEXT + 1})|length }}}}",
    ),
    "str.replace": (
        "{{ ('a' * 4096).replace('a', 'b' * 1024)|length }}",
        "{{ ('a' * 4096).replace('a', 'b' * 1025)|length }}",
    ),
    "str.replace, same length": (
        f"{{{{ ('a' * {TEXT}).replace('a', 'b')|length }}}}",
        f"{{{{ ('a' * {TEXT}).replace('a', 'bc')|length }}}}",
    ),
    "center filter": (
        f"{{{{ 'a'|center({TEXT})|length }}}}",
        f"{{{{ 'a'|center({TEXT + 1})|length }}}}",
    ),
    "indent filter": (
        "{{ ('a' * 1024)|indent(4095)|length }}",
        "{{ ('a' * 1024)|indent(4096)|length }}",
    ),
    "indent filter, width by name": (
        "{{ ('a' * 1024)|indent(width=4095)|length }}",
        "{{ ('a' * 1024)|indent(width='x' * 4096)|length }}",
    ),
    "indent filter, default width": (
        "{{ ('a' * 838860)|indent|length }}",
        "{{ ('a' * 838861)|indent|length }}",
    ),
    "indent filter, width 0": (
        "{{ ('a' * 2097153)|indent(0)|length }}",
        "{{ ('a' * 4194305)|indent(0)|length }}",
    ),
    "format filter": (
        "{{ ('%4194304s'|format('x'))|length }}",
        "{{ ('%4194305s'|format('x'))|length }}",
    ),
    "replace filter, same length": (
        f"{{{{ ('a' * {TEXT})|replace('a', 'b')|length }}}}",
        f"{{{{ ('a' * {TEXT})|replace('a', 'bc')|length }}}}",
    ),
    "center filter, a list": (
        "{{ ([0] * 1000)|center(10)|length }}",
        "{{ ([0] * 1400000)|center(10)|length }}",
    ),
    "replace filter": (
        "{{ ('a' * 4096)|replace('a', 'b' * 1024)|length }}",
        "{{ ('a' * 4096)|replace('a', 'b' * 1025)|length }}",
    ),
    "output": (
        f"{{{{ 'a' * {TEXT - 2} }}}}{{{{ 'bc' }}}}",
        f"{{{{ 'a' * {TEXT - 2} }}}}{{{{ 'bcd' }}}}",
    ),
}


# what the error of each case past the bound names (the check that refused it)
PAST_WORDS: dict[str, str] = {
    "repeat, sequence left": "a repeated sequence of 4,194,306 items",
    "repeat, sequence right": "a repeated sequence of 4,194,308 items",
    "power": "a power of over 4096 bits",
    "power of a negative base": "a power of over 4096 bits",
    "power of a sum": "a power of over 4096 bits",
    "product": "a product of over 4096 bits",
    "plus": "a joined sequence of 4,194,305 items",
    "percent width": "formats with a width of 4194305",
    "tilde": "a joined string of 4,194,305 items",
    "ljust": "calls ljust with 4194305",
    "str.replace": "a replaced string of 4,198,400 items",
    "str.replace, same length": "a replaced string of 8,388,608 items",
    "center filter": r"a string \(filter center\) of 4,194,305 items",
    "indent filter": r"a string \(filter indent\) of 4,195,328 items",
    "indent filter, width by name": r"a string \(filter indent\) of 4,195,328 items",
    "indent filter, default width": r"a string \(filter indent\) of 4,194,305 items",
    "indent filter, width 0": "a repeated sequence of 4,194,305 items",
    "format filter": "formats with a width of 4194305",
    "replace filter, same length": r"a string \(filter replace\) of 8,388,608 items",
    "center filter, a list": r"a string \(filter center\) of 4,194,305 items",
    "replace filter": r"a string \(filter replace\) of 4,198,400 items",
    "output": "renders over 4,194,304 characters",
}


@pytest.mark.parametrize("name", list(AT_AND_PAST))
def test_at_the_bound_as_transformers_and_past_it_refused(name: str) -> None:
    at, past = AT_AND_PAST[name]
    assert _render(at) == _transformers(at)
    with pytest.raises(ChatTemplateError, match=PAST_WORDS[name]):
        _render(past)


SMALL: list[str] = [
    "{{ 1 ** 5000 }}{{ (-1) ** 5001 }}{{ 0 ** 5000 }}{{ 2 ** 0 }}{{ 2 ** -2 }}",
    "{{ 2.0 ** 3 }}{{ 7 % 3 }}{{ 7.5 % 2 }}{{ [1] * 3 }}{{ 3 * 'ab' }}{{ 'ab' * -1 }}",
    "{{ 'a'.ljust(-5) }}{{ 'ab'.replace('', '-') }}{{ 'aaa'.replace('a', '') }}",
    "{{ 'x'|center }}{{ 'a\nb'|indent }}{{ 'a\nb'|indent(2, true) }}{{ 'a\nb'|indent('> ') }}",
    "{{ '%s-%s'|format(1, 2) }}{{ 'a b'|replace('a') if false else 'a b'|replace('a', 'c') }}",
    "{{ 'ab'|replace('', '.') }}{{ 'hello world'|wordwrap(5) }}{{ 'a'|center(3.5) if false }}",
    "{{ [1, 2] ~ (3, 4) ~ none }}{{ 'x' ~ 1 ~ 2.5 }}{{ ('a', 'b') + ('c',) }}",
    "{{ 1 + 2 }}{{ 1.5 + 2 }}{{ '%00000001s' % 'x' }}{{ '%0s' % 'x' }}",
    "{{ '{:00000003}'.format(1) }}{{ '%08.3f' % 2.5 }}",
    "{{ '{}/{}'.format(1, 2) }}{{ '{a}'.format_map({'a': 1}) }}{{ [1, 2].index(2) }}",
]


@pytest.mark.parametrize("source", SMALL)
def test_within_the_bounds_as_transformers(source: str) -> None:
    assert _render(source) == _transformers(source)


def test_past_the_deadline_every_hook_stops() -> None:
    """The clock is read at range creation and iteration, operators, joins, calls, filters."""
    from kvpure.text.sandbox import environment

    filters = environment().filters
    hooks: dict[str, Callable[[], object]] = {
        "range": lambda: budget.budgeted_range(3),
        "range iteration": lambda: list(budget.BudgetedRange(range(3))),
        "operator": lambda: budget.checked_binop("+", 1, 2),
        "join": lambda: budget.checked_join(("a", "b"), "".join),
        "call": lambda: call_budget.check_call_arguments("a".upper, (), {}),
        "filter": lambda: filters["center"]("a", 3),
        "attribute": lambda: environment().getattr("a", "upper"),
        "item": lambda: environment().getitem([1], 0),
    }
    for hook in hooks.values():
        budget.BUDGET.deadline = 0.0
        try:
            with pytest.raises(budget.BudgetExceeded, match="budget"):
                hook()
        finally:
            budget.BUDGET.stop()
        hook()  # within the deadline it runs


def test_outside_a_render_there_is_no_deadline() -> None:
    assert _render("{{ 'ok' }}") == "ok"
    assert budget.BUDGET.deadline == float("inf")


LITERALS: dict[str, tuple[str, str]] = {
    "string literal": (
        "{{ '" + "a" * 64 * 2**10 + "'|length }}",
        "{{ '" + "a" * (64 * 2**10 + 1) + "' }}",
    ),
    "integer literal": (f"{{{{ {2**64} }}}}", f"{{{{ {2**64 + 1} }}}}"),
    "source": ("x" * 2**20, "x" * (2**20 + 1)),
}


@pytest.mark.parametrize("name", list(LITERALS))
def test_a_literal_at_the_bound_loads_and_past_it_is_refused(name: str) -> None:
    at, past = LITERALS[name]
    assert _render(at) == _transformers(at)
    with pytest.raises(ChatTemplateError):
        ChatTemplate(past, {}, where="t")


def test_a_render_starts_a_deadline_two_seconds_away() -> None:
    before = time.monotonic()
    budget.BUDGET.start()
    try:
        assert before + 2.0 <= budget.BUDGET.deadline <= time.monotonic() + 2.0
    finally:
        budget.BUDGET.stop()
    assert budget.BUDGET.deadline == float("inf")


def test_a_call_is_refused_before_it_runs_or_after_by_its_result() -> None:
    # 'a'.ljust(2**62) would raise MemoryError: the width is refused before the call
    with pytest.raises(ChatTemplateError, match=r"calls ljust with 4611686018427387904"):
        _render("{{ 'a'.ljust(2 ** 62) }}")
    sep = f"{{% set sep = 'a' * {2**21} %}}"
    at = sep + "{{ sep.join(['', '', ''])|length }}"
    assert _render(at) == _transformers(at) == str(TEXT)
    with pytest.raises(ChatTemplateError, match=r"a call's result of 6,291,456 items"):
        _render(sep + "{{ sep.join(['', '', '', ''])|length }}")


def test_a_value_over_the_bound_is_named() -> None:
    with pytest.raises(budget.BudgetExceeded, match="a value of 4,194,305 items"):
        budget.check_size("a" * (TEXT + 1))
    assert budget.check_size("a" * TEXT) == "a" * TEXT


def test_a_format_width_is_checked_on_format_calls_only() -> None:
    with pytest.raises(ChatTemplateError, match="formats with a width of 4194305"):
        _render("{{ '{:>4194305}'.format(1) }}")
    with pytest.raises(ChatTemplateError, match="formats with a width of 4194305"):
        _render("{{ '{a:>4194305}'.format_map({'a': 1}) }}")
    source = "{{ '{:>99999999}'.upper() }}{{ '%99999999s'.strip() }}"
    assert _render(source) == _transformers(source)


def test_wordwrap_is_refused_past_twice_the_bound() -> None:
    # wrapping can add a newline per character: the estimate is twice the text
    with pytest.raises(ChatTemplateError, match=r"filter wordwrap\) of 4,194,306 items"):
        _render("{{ ('a' * 2097153)|wordwrap }}")


def test_a_join_counts_a_value_without_a_length_as_32_characters() -> None:
    at = f"{{% set x = 'a' * {TEXT - 32} %}}{{{{ (x ~ 5)|length }}}}"
    assert _render(at) == _transformers(at)
    with pytest.raises(ChatTemplateError, match="a joined string of 4,194,305 items"):
        _render(f"{{% set x = 'a' * {TEXT - 31} %}}{{{{ (x ~ 5)|length }}}}")
