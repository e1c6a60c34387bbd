"""kvpure's template sandbox gives what transformers' gives: its globals, filters and tags.

Each expected text is rendered by transformers' own compiled template (the
one ``apply_chat_template`` uses): ``tojson`` and its keywords, the
``{% generation %}`` tag, ``trim_blocks``/``lstrip_blocks``, loop controls,
the namespace that refuses underscore names, ``raise_exception``,
``strftime_now``, and ``~`` joins under autoescaping.
"""

from __future__ import annotations

import pytest

from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError

pytest.importorskip("jinja2")

MESSAGES = (ChatMessage(role="user", texts=("hi",)),)

TEMPLATES = [
    "{{ {'b': 1, 'a': 'é'}|tojson }}",
    "{{ {'b': 1, 'a': [1, 2]}|tojson(indent=2) }}",
    "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}",
    "{{ {'b': 1, 'a': 2}|tojson(separators=(',', ':')) }}",
    "{{ 'é'|tojson(ensure_ascii=true) }}{{ 'é'|tojson }}",
    "a{% generation %}b{{ 1 + 1 }}{% endgeneration %}c",
    "{% for m in messages %}\n  {% if true %}\n    {{ m['role'] }}\n  {% endif %}\n{% endfor %}\n",
    "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}"
    "{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }}",
    "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}",
    "{{ strftime_now('%Y') }}",
    "{{ 'a' ~ 1 ~ none }}{{ messages[0]['role'] ~ '!' }}",
    "{% autoescape true %}{{ '<' ~ 'b' }}{% endautoescape %}",
    "{% set on = true %}{% autoescape on %}{{ '<' ~ 'b' }}{% endautoescape %}",
    "{% autoescape true %}{{ messages[0]['role'] ~ '<' }}{% endautoescape %}",
    "{% set on = true %}{% autoescape on %}{{ messages[0]['role'] ~ '<' }}{% endautoescape %}",
    "{% set no = false %}{% autoescape no %}{{ messages[0]['role'] ~ '<' }}{% endautoescape %}",
    "{% autoescape true %}{{ ('<b>'|safe) ~ messages[0]['role'] ~ '<' }}{% endautoescape %}",
    "{% set on = true %}{% autoescape on %}{{ ('<b>'|safe) ~ messages[0]['role'] ~ '<' }}"
    "{% endautoescape %}",
    "{% set no = false %}{% autoescape no %}{{ ('<b>'|safe) ~ messages[0]['role'] ~ '<' }}"
    "{% endautoescape %}",
    "{% set off = false %}{% autoescape off %}{{ '<' ~ 'b' }}{% endautoescape %}",
    "{{ messages|length }}{{ messages[0].role }}{{ 'abc'[1] }}{{ 'x'.upper() }}",
    "[{{ ''.__class__ }}|{{ range.__globals__ }}|{{ messages.__class__ }}]",
    "{{ '%s|%d' % ('a', 2) }}{{ 2 * 3 }}{{ 2 ** 3 }}{{ 'a' + 'b' }}",
]


def _transformers_render(source: str) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    template = utils._compile_jinja_template(source)
    return str(template.render(messages=[{"role": "user", "content": "hi"}]))


def _render(source: str) -> str:
    return ChatTemplate(source, {}, where="t").render(MESSAGES, where="w")


@pytest.mark.parametrize("source", TEMPLATES)
def test_renders_as_in_transformers(source: str) -> None:
    assert _render(source) == _transformers_render(source)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{{ raise_exception('no system role') }}", "no system role"),
        ("{% set ns = namespace(_a=1) %}{{ ns }}", "_a"),
        ("{% set ns = namespace({'_a': 1}) %}{{ ns }}", "_a"),
        ("{% set ns = namespace(a=1) %}{% set ns._b = 2 %}{{ ns.a }}", "_b"),
    ],
)
def test_fails_where_transformers_fails(source: str, words: str) -> None:
    with pytest.raises(Exception, match=words):
        _transformers_render(source)
    with pytest.raises(ChatTemplateError, match=words):
        _render(source)


def test_without_jinja2_the_sandbox_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from kvpure.text.errors import MissingExtraError
    from kvpure.text.sandbox import environment

    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(MissingExtraError, match=r"kvpure\[text\]"):
        environment.__wrapped__()


def test_a_loop_over_range_reads_the_render_clock() -> None:
    from kvpure.text import budget
    from kvpure.text.sandbox import environment

    template = environment().from_string("{% for i in range(3) %}{% endfor %}")
    budget.BUDGET.deadline = 0.0
    try:
        with pytest.raises(budget.BudgetExceeded):
            template.render()
    finally:
        budget.BUDGET.stop()
    assert template.render() == ""
