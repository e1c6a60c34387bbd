"""Hostile chat templates and prompts end in typed errors, quickly and in bounded memory.

Each template below would, without kvpure's bounds (:mod:`kvpure.text.budget`),
run for hours, build gigabytes, or raise an untyped error while loading; each
must now end in :class:`ChatTemplateError` well within the 10 s a judge allows.
Real templates render unchanged (the goldens of ``test_text_prompts.py``).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from kvpure.text import budget
from kvpure.text.budget import MAX_TEXT_CHARS, RENDER_SECONDS
from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError, PromptTooLongError, TokenizerError
from kvpure.text.tokenizer import LocalTokenizer

pytest.importorskip("jinja2")

MESSAGES = (ChatMessage(role="user", texts=("hi",)),)

# name -> (template source, a words the error must hold)
HOSTILE: dict[str, tuple[str, str]] = {
    "nested range loops": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "budget",
    ),
    "string times a billion": ("{{ 'a' * 1000000000 }}", "repeated"),
    "list times a billion": ("{{ ([1] * 1000000000)|length }}", "repeated"),
    "a huge power": ("{{ 2 ** 100000000 }}", "power"),
    "a squaring loop": (
        "{% set ns = namespace(x=3) %}{% for i in range(60) %}{% set ns.x = ns.x * ns.x %}"
        "{% endfor %}{{ ns.x }}",
        "product",
    ),
    "tilde doubling": ("{% set x = 'ab' %}" + "{% set x = x ~ x %}" * 40 + "{{ x }}", "joined"),
    "namespace tilde doubling": (
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}"
        "{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x|length }}",
        "joined",
    ),
    "plus doubling": (
        "{% set ns = namespace(x='ab') %}{% for i in range(60) %}"
        "{% set ns.x = ns.x + ns.x %}{% endfor %}{{ ns.x|length }}",
        "joined",
    ),
    "center filter": ("{% set w = 1000000000 %}{{ 'a'|center(w) }}", "center"),
    "indent filter": ("{{ ('a\n' * 1000)|indent(1000000) }}", "indent"),
    "format filter width": ("{% set f = '%1000000000s' %}{{ f|format(1) }}", "width"),
    "percent width": ("{{ '%1000000000s' % 1 }}", "width"),
    "str.format width": ("{{ '{:>1000000000}'.format(1) }}", "width"),
    "ljust": ("{{ 'a'.ljust(1000000000) }}", "ljust"),
    "replace growth": (
        "{% set ns = namespace(x='aaaaaaaaaa') %}{% for i in range(20) %}"
        "{% set ns.x = ns.x.replace('a', 'aaaaaaaaaa') %}{% endfor %}{{ ns.x|length }}",
        "replaced",
    ),
    "replace filter growth": (
        "{% set ns = namespace(x='aaaaaaaaaa') %}{% for i in range(20) %}"
        "{% set ns.x = ns.x|replace('a', 'aaaaaaaaaa') %}{% endfor %}{{ ns.x|length }}",
        "replace",
    ),
    "output past the bound": (
        "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}",
        "renders over",
    ),
    "macro recursion": ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "failed"),
}

AT_LOAD: dict[str, tuple[str, str]] = {
    "a huge string literal": ("{{ '" + "a" * 100_000 + "' }}", "string literal"),
    "a huge integer literal": ("{{ 1" + "0" * 5000 + " }}", "does not load"),
    "an integer literal over 2**64": ("{{ 1" + "0" * 30 + " }}", "integer literal"),
    "deep nesting": ("{{ " + "(" * 50_000 + "1" + ")" * 50_000 + " }}", "does not load"),
    "a syntax error": ("{% for %}", "does not parse"),
    "a source over 1 Mi": ("x" * (2**20 + 1), "characters"),
}


class _SteppingClock:
    """A monotonic clock that moves 1/128 s (exact in binary) each time it is read, so a
    render's time budget runs out after a known number of reads, whatever the machine's speed."""

    STEP = 2.0**-7

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        self.now += self.STEP
        return self.now


# The bound a hostile render must stay under: the unbounded renders would build 1 GB or more.
PEAK_BYTES = 64 * 2**20


class _FrozenClock:
    """A monotonic clock that never moves: a render then stops on its size or depth bound
    alone, however slow a loaded machine makes it."""

    @staticmethod
    def monotonic() -> float:
        return 0.0


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_template_stops_with_a_typed_error(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, words = HOSTILE[name]
    if words != "budget":
        # Only the endless loop is the time budget's to stop; the others must stop on
        # their own bound (on a busy CI machine the recursion once hit the clock first).
        monkeypatch.setattr(budget, "time", _FrozenClock)
    template = ChatTemplate(source, {}, where="t")
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError, match=words):
            template.render(MESSAGES, where="w")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES


def test_the_time_budget_is_what_stops_an_endless_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock is read when the render starts and then until the budget is spent: the
    # render ends on the read that finds it spent, however fast the machine is.
    clock = _SteppingClock()
    monkeypatch.setattr(budget, "time", clock)
    template = ChatTemplate(HOSTILE["nested range loops"][0], {}, where="t")
    clock.reads = 0  # loading reads the clock too (its own budget); the render's reads count
    with pytest.raises(ChatTemplateError, match=f"past its {RENDER_SECONDS:g} s budget"):
        template.render(MESSAGES, where="w")
    # start: 1 read (deadline = STEP + budget); the read at k * STEP first passes it.
    assert clock.reads == RENDER_SECONDS / _SteppingClock.STEP + 2


@pytest.mark.parametrize("name", list(AT_LOAD))
def test_a_hostile_template_is_refused_when_it_loads(name: str) -> None:
    source, words = AT_LOAD[name]
    with pytest.raises(ChatTemplateError, match=words):
        ChatTemplate(source, {}, where="t")


def test_ordinary_templates_still_render() -> None:
    source = (
        "{% for m in messages %}{{ m['role'] | upper }}: {{ m['content'] | trim }}"
        "{{ ' ' ~ loop.index }}{% endfor %}{{ '%-3s|' | format('a') }}{{ 'x'.center(5) }}"
        "{{ 'a b'.replace('a', 'c') }}{{ 2 ** 10 }}{{ [1, 2] + [3] }}{{ 'ab' * 2 }}"
        "{% for i in range(3) %}{{ i }}{% endfor %}{{ 'q'|indent(2) }}{{ '%d' % 7 }}"
    )
    text = ChatTemplate(source, {}, where="t").render(MESSAGES, where="w")
    assert text == "USER: hi 1a  |  x  c b1024[1, 2, 3]abab012q7"


def test_a_render_may_take_its_budget_again_after_a_failure() -> None:
    slow = ChatTemplate(HOSTILE["nested range loops"][0], {}, where="t")
    with pytest.raises(ChatTemplateError):
        slow.render(MESSAGES, where="w")
    assert ChatTemplate("{{ 'ok' }}", {}, where="t").render(MESSAGES, where="w") == "ok"


# -- prompts and the tokenizers library ------------------------------------------


class _Panic(BaseException):
    """Stands in for pyo3_runtime.PanicException (a BaseException)."""


class _Backend:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def encode(self, text: str, add_special_tokens: bool) -> Any:
        if self.error is not None:
            raise self.error
        return type("E", (), {"ids": [len(text)]})()

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        if self.error is not None:
            raise self.error
        return "x"


def test_a_prompt_over_the_bound_is_refused_before_tokenizing() -> None:
    tokenizer = LocalTokenizer(_Backend(AssertionError("must not be called")), None, where="t")
    with pytest.raises(PromptTooLongError, match="4 Mi"):
        tokenizer.encode_prompt("a" * (MAX_TEXT_CHARS + 1))
    assert LocalTokenizer(_Backend(), None, where="t").encode_prompt("a" * MAX_TEXT_CHARS) == (
        MAX_TEXT_CHARS,
    )


@pytest.mark.parametrize("error", [_Panic("rust panicked"), ValueError("bad"), OverflowError()])
def test_the_libraries_errors_and_panics_are_typed(error: BaseException) -> None:
    tokenizer = LocalTokenizer(_Backend(error), None, where="tok")
    with pytest.raises(TokenizerError, match="tok: encoding a prompt failed"):
        tokenizer.encode_prompt("hi")
    with pytest.raises(TokenizerError, match="decoding"):
        tokenizer.decode([1])


def test_an_interrupt_is_not_swallowed() -> None:
    tokenizer = LocalTokenizer(_Backend(KeyboardInterrupt()), None, where="tok")
    with pytest.raises(KeyboardInterrupt):
        tokenizer.encode_prompt("hi")
