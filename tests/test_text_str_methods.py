"""A chat template's str methods behave as Python's str, inside the size bound.

transformers renders a chat template in jinja2's sandbox over real ``str``, so
a negative or large count (``replace``'s ``count``, ``split``'s ``maxsplit``,
``find``'s ``start``, a negative width) is what Python makes of it. Expected
values come from transformers' own compiled template (the oracle), the bounds
from :mod:`kvpure.text.budget`'s stated figure (4 Mi items), computed below
from Python's own length rules.
"""

from __future__ import annotations

import pytest

from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError

pytest.importorskip("jinja2")

TEXT = 4 * 2**20
BIG = 10**7  # over the bound, as a count or a start: harmless to Python
MESSAGES = (ChatMessage(role="user", texts=("hi",)),)


def _render(source: str) -> str:
    return ChatTemplate(source, {}, where="t").render(MESSAGES, where="w")


def _transformers(source: str) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    template = utils._compile_jinja_template(source)
    return str(template.render(messages=[{"role": "user", "content": "hi"}]))


_AS_PYTHON: list[str] = [
    "{{ 'abca'.replace('a', 'x', -1) }}|{{ 'abca'.replace('a', 'x', 1) }}",
    "{{ 'abca'.replace('a', 'x', 0) }}|{{ 'abca'.replace('a', 'x', -BIG) }}",
    "{{ 'abca'.replace('a', 'x', BIG) }}|{{ 'ab'.replace('', '-', -1) }}",
    "{{ 'ab'.replace('', '-', 2) }}|{{ 'ab'.replace('', '-', 0) }}",
    "{{ 'a,b,c'.split(',', -1) }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.split(',', BIG) }}",
    "{{ 'a b  c'.split(none, -1) }}|{{ 'a b  c'.split(none, -BIG) }}",
    "{{ 'a,b,c'.rsplit(',', -1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'a,b,c'.rsplit(',', BIG) }}",
    "{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'a\\nb\\r\\nc'.splitlines(true) }}",
    "{{ 'a\\nb'.splitlines(false) }}|{{ ''.splitlines() }}",
    "{{ 'abc'.center(-5) }}|{{ 'abc'.center(-BIG, '*') }}|{{ 'abc'.ljust(-BIG) }}",
    "{{ 'abc'.rjust(-BIG, 'x') }}|{{ '-7'.zfill(-BIG) }}|{{ '-7'.zfill(4) }}",
    "{{ 'a\\tb'.expandtabs(-1) }}|{{ 'a\\tb'.expandtabs(-BIG) }}|{{ 'a\\tb'.expandtabs(1000) "
    "|length }}",
    "{{ 'abcabc'.find('a', -3) }}|{{ 'abcabc'.find('a', -BIG) }}|{{ 'abc'.find('a', BIG) }}",
    "{{ 'abcabc'.rfind('a', 0, -BIG) }}|{{ 'abcabc'.index('c', -1) }}",
    "{{ 'abcabc'.count('a', -BIG, BIG) }}|{{ 'abcabc'.rindex('b', -BIG) }}",
    "{{ 'abc'.startswith('c', -1) }}|{{ 'abc'.endswith('a', 0, -BIG) }}",
    "{{ [1, 2, 3].index(3, -BIG) }}|{{ (1, 2, 1).count(1) }}",
    "{{ '{}'.format(BIG) }}|{{ '{:{}}|'.format('a', 5) }}|{{ '{:>{}}'.format(7, -3) }}",
    # the replace filter takes a count too (jinja2's do_replace: None is all)
    "{{ 'abca'|replace('a', 'x', -1) }}|{{ 'abca'|replace('a', 'x', 1) }}",
    "{{ 'abca'|replace('a', 'x', count=1) }}|{{ 'ab'|replace('', '-') }}",
    "{{ ('a' * 4096)|replace('a', 'b' * 4096, 1)|length }}",
]
AS_PYTHON = [source.replace("BIG", str(BIG)) for source in _AS_PYTHON]


@pytest.mark.parametrize("source", AS_PYTHON)
def test_str_methods_render_as_transformers(source: str) -> None:
    assert _render(source) == _transformers(source)


# each: (at the bound, renders as in transformers; one step past it, refused with these words)
BOUNDS: dict[str, tuple[str, str, str]] = {
    # len 4096 + n * (1025 - 1) replaced: n = 4092 is 4,194,304 exactly
    "replace, count": (
        "{{ ('a' * 4096).replace('a', 'b' * 1025, 4092)|length }}",
        "{{ ('a' * 4096).replace('a', 'b' * 1025, 4093)|length }}",
        "a replaced string of 4,195,328 items",
    ),
    "replace, negative count is all": (
        "{{ ('a' * 4096).replace('a', 'b' * 1025, 4092)|length }}",
        "{{ ('a' * 4096).replace('a', 'b' * 1025, -1)|length }}",
        "a replaced string of 4,198,400 items",
    ),
    # '' is found len + 1 times: 2047 + 2048 * 2047 = 4,194,303; then + 2048
    "replace, empty old": (
        "{{ ('a' * 2047).replace('', 'b' * 2047)|length }}",
        "{{ ('a' * 2047).replace('', 'b' * 2048)|length }}",
        "a replaced string of 4,196,351 items",
    ),
    # 1024 tabs at column 0 mod the size: 1024 * 4096 = 4,194,304
    "replace filter, count": (
        "{{ ('a' * 4096)|replace('a', 'b' * 1025, 4092)|length }}",
        "{{ ('a' * 4096)|replace('a', 'b' * 1025, 4093)|length }}",
        r"a string \(filter replace\) of 4,195,328 items",
    ),
    "replace filter, empty old": (
        "{{ ('a' * 2047)|replace('', 'b' * 2047)|length }}",
        "{{ ('a' * 2047)|replace('', 'b' * 2048)|length }}",
        r"a string \(filter replace\) of 4,196,351 items",
    ),
    "expandtabs": (
        "{{ ('\\t' * 1024).expandtabs(4096)|length }}",
        "{{ ('\\t' * 1024).expandtabs(4097)|length }}",
        "an expanded string of 4,195,328 items",
    ),
    "center": (
        f"{{{{ 'a'.center({TEXT})|length }}}}",
        f"{{{{ 'a'.center({TEXT + 1})|length }}}}",
        f"calls center with {TEXT + 1}",
    ),
    "zfill": (
        f"{{{{ '1'.zfill({TEXT})|length }}}}",
        f"{{{{ '1'.zfill({TEXT + 1})|length }}}}",
        f"calls zfill with {TEXT + 1}",
    ),
    "nested format width": (
        f"{{{{ '{{:{{}}}}'.format('a', {TEXT})|length }}}}",
        f"{{{{ '{{:{{}}}}'.format('a', {TEXT + 1})|length }}}}",
        f"calls format with {TEXT + 1}",
    ),
    "nested format width, negative (the sign option)": (
        f"{{{{ '{{:{{}}}}'.format(1, -{TEXT})|length }}}}",
        f"{{{{ '{{:{{}}}}'.format(1, -{TEXT + 1})|length }}}}",
        f"calls format with -{TEXT + 1}",
    ),
    "nested format width from a map": (
        f"{{{{ '{{a:{{w}}}}'.format_map({{'a': 1, 'w': {TEXT}}})|length }}}}",
        f"{{{{ '{{a:{{w}}}}'.format_map({{'a': 1, 'w': {TEXT + 1}}})|length }}}}",
        f"calls format_map with {TEXT + 1}",
    ),
}


@pytest.mark.parametrize("name", list(BOUNDS))
def test_growing_methods_keep_the_size_bound(name: str) -> None:
    at, past, words = BOUNDS[name]
    assert _render(at) == _transformers(at)
    with pytest.raises(ChatTemplateError, match=words):
        _render(past)
