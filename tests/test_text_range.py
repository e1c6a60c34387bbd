"""A chat template's ``range`` behaves as in transformers' sandbox (a sequence, not a generator).

kvpure's ``range`` reads the render clock while a loop runs over it
(:mod:`kvpure.text.budget`), but to the template it must stay what jinja2's
sandbox gives transformers: a ``range`` with a length, items, slices, a
truth value and a printed form. Each expected text is rendered here by
transformers' own compiled template (the one ``apply_chat_template`` uses).
"""

from __future__ import annotations

import pytest

from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError

pytest.importorskip("jinja2")

TEMPLATES = [
    "{{ range(3)|length }}",
    "{{ range(0)|length }}",
    "{{ range(2, 11, 3)|list }}",
    "{{ range(10)[2] }}",
    "{{ range(10)[-1] }}",
    "{{ range(10)[2:8:3]|list }}",
    "{{ range(10)[2:8:3] }}",
    "{{ range(3) }}",
    "{{ range(1, 7, 2) }}",
    "{{ range(3)|first }}{{ range(3)|last }}",
    "{{ range(4)|reverse|list }}",
    "{{ range(4)|sum }}{{ range(4)|max }}{{ range(4)|min }}",
    "{{ 2 in range(3) }}{{ 3 in range(3) }}{{ 5 not in range(3) }}",
    "{% if range(0) %}full{% else %}empty{% endif %}{% if range(2) %}full{% endif %}",
    "{{ range(3)|join(',') }}",
    "{{ range(5)|batch(2)|list }}",
    "{{ range(6)|select('odd')|list }}",
    "{{ range(3).start }}{{ range(2, 9, 3).stop }}{{ range(2, 9, 3).step }}",
    "{{ range(5).index(3) }}{{ range(5).index(0) }}{{ range(5).count(9) }}{{ range(5).count(4) }}",
    "{{ range(3) == range(3) }}{{ range(3) == range(4) }}{{ range(0, 3) != range(3) }}",
    "{{ range(3) == [0, 1, 2] }}{{ range(3) != 5 }}",
    "{{ [range(2), range(2), range(3)]|unique|list|length }}",
    "{% for i in range(3) %}{{ loop.length }}{{ loop.revindex }}{{ loop.last }}{% endfor %}",
    "{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
    "{% for i in range(2000) %}{% if loop.last %}{{ i }}{% endif %}{% endfor %}",
    "{{ range(2500)[1500:2300]|length }}{{ range(2500)[1500:2300]|last }}",
    "{% set r = range(4) %}{{ r|length }}{{ r|list }}{{ r|list }}",
    "{{ (range(3)|list) + [7] }}{{ range(3)|map('string')|join }}",
]


def _transformers_render(source: str) -> str:
    chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    compiled = chat_template_utils._compile_jinja_template(source)
    messages = [{"role": "user", "content": "hi"}]
    return str(compiled.render(messages=messages, add_generation_prompt=True))


@pytest.mark.parametrize("source", TEMPLATES)
def test_range_renders_as_in_transformers(source: str) -> None:
    expected = _transformers_render(source)
    messages = (ChatMessage(role="user", texts=("hi",)),)
    assert ChatTemplate(source, {}, where="t").render(messages, where="w") == expected


@pytest.mark.parametrize("source", ["{{ range(5).index(3, 1) }}", "{{ range(5).index(7) }}"])
def test_range_methods_fail_as_in_transformers(source: str) -> None:
    with pytest.raises((TypeError, ValueError)):
        _transformers_render(source)
    messages = (ChatMessage(role="user", texts=("hi",)),)
    with pytest.raises(ChatTemplateError):
        ChatTemplate(source, {}, where="t").render(messages, where="w")
