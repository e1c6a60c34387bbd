"""Chat template edges: content-format detection, developer messages, the variables handed over.

Expected values:

- content format: vLLM 0.26's own detector (``vllm/renderers/hf.py``,
  ``_detect_content_format`` and the ``_iter_nodes_*`` helpers), run on each
  template by ``tools/vllm_oracle``-style execution of that source here when
  the vLLM sources are present (``KVPURE_VLLM_SOURCES``), and written out as
  literals so a plain clone checks them too;
- messages: vLLM 0.26's ``_convert_developer_to_system`` and
  ``_consolidate_system_messages`` (same file), likewise run when present; the
  tool-role join and ``name`` of ``vllm/entrypoints/chat_utils.py``
  (``_parse_chat_message_content``);
- the rendered text: transformers' compiled template (``_compile_jinja_template``,
  the one ``apply_chat_template`` renders with ``tools=None, documents=None``
  and ``add_generation_prompt``), with ``reasoning_effort=None`` where the
  template reads it (vLLM's ``ChatCompletionRequest`` passes it and
  ``resolve_chat_template_kwargs`` keeps what the template reads).
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError

jinja2 = pytest.importorskip("jinja2")

VLLM_HF = Path(os.environ.get("KVPURE_VLLM_SOURCES", "/work/vllm")) / "0.26.0/vllm/renderers/hf.py"


def _vllm_functions() -> dict[str, Any] | None:
    """vLLM 0.26's detector and developer-message functions, from its own source."""
    if not VLLM_HF.is_file():
        return None
    text = VLLM_HF.read_text()
    namespace: dict[str, Any] = {"jinja2": jinja2, "deque": deque, "Any": Any}
    for start, end in (
        ("def _is_var_access(", "def _try_extract_ast("),
        ("def _convert_developer_to_system(", "def _resolve_chat_template_content_format("),
    ):
        chunk = text[text.index(start) : text.index(end)]
        chunk = chunk.replace("@lru_cache(maxsize=32)\n", "")
        exec(compile(chunk, str(VLLM_HF), "exec"), namespace)  # vLLM's own source
    return namespace


def _vllm_format(functions: dict[str, Any], source: str) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    tree = utils._compile_jinja_template(source).environment.parse(source)  # _try_extract_ast
    try:
        next(functions["_iter_nodes_assign_content_item"](tree))
    except StopIteration:
        return "string"
    except Exception:  # vLLM logs it and returns the default, "string" for auto
        return "string"
    return "openai"


# each: (template, vLLM 0.26's format)
DETECTION: list[tuple[str, str]] = [
    ("{% for m in messages %}{% for p in other.content %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in other['content'] %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m[0] %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m[key] %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m.text %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m.content|list %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages %}{% for p in m.content[1:] %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages|list %}{% for p in m.content %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages[::2] %}{% for p in m.content %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages[0] %}{% for p in m.content %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in other %}{% for p in m.content %}{% endfor %}{% endfor %}", "string"),
    ("{% for p in content %}{% endfor %}", "openai"),
    ("{% for p in content|list %}{% endfor %}", "string"),
    ("{% for p in contents %}{% endfor %}", "string"),
    ("{% for p, q in content %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p, q in m.content %}{% endfor %}{% endfor %}", "string"),
    ("{% set a = messages|list %}{% for m in a %}{% for p in m.content %}{% endfor %}{% endfor %}",
     "openai"),
    ("{% set a = messages %}{% set a = a %}{% for m in a %}{% for p in m.content %}{% endfor %}"
     "{% endfor %}", "openai"),
    ("{% set a = messages %}{% set b = a %}{% set c = b %}{% for m in c %}{% for p in m.content %}"
     "{% endfor %}{% endfor %}", "openai"),
    ("{% set a = other %}{% for m in a %}{% for p in m.content %}{% endfor %}{% endfor %}",
     "string"),
    # no scopes: an "m" of a messages loop is a message wherever it is read (vLLM's NOTE)
    ("{% set a = messages %}{% for m in a %}{% endfor %}{% for m in other %}"
     "{% for p in m.content %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages %}{{ m.content }}{% endfor %}{% for x in y %}{% endfor %}", "string"),
    ("{% for m in messages %}{% for p in m['content'] is string %}{% endfor %}{% endfor %}",
     "openai"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "expected"), DETECTION)
def test_content_format_is_vllms(source: str, expected: str) -> None:
    assert ChatTemplate(source, {}, where="t").content_format == expected
    functions = _vllm_functions()
    if functions is not None:
        assert _vllm_format(functions, source) == expected


def _transformers(source: str, messages: list[dict[str, Any]], **extra: Any) -> str:
    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    template = utils._compile_jinja_template(source)
    return str(
        template.render(
            messages=messages, tools=None, documents=None, add_generation_prompt=True, **extra
        )
    )


SHOW = "{% for m in messages %}[{{ m.role }}|{{ m.content }}|{{ m.name|default('-') }}]{% endfor %}"


def _dicts(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": "\n".join(message.texts)}
        if message.name is not None:
            item["name"] = message.name
        out.append(item)
    return out


DEVELOPER_CASES: list[tuple[tuple[ChatMessage, ...], str]] = [
    (
        (
            ChatMessage(role="developer", texts=("A",), name="d"),
            ChatMessage(role="user", texts=("u",)),
        ),
        "[system|A|d][user|u|-]",
    ),
    (
        (
            ChatMessage(role="user", texts=("u",)),
            ChatMessage(role="developer", texts=("A",)),
            ChatMessage(role="system", texts=("B",), name="s"),
            ChatMessage(role="developer", texts=()),
            ChatMessage(role="assistant", texts=("x",)),
        ),
        "[system|A\n\nB|-][user|u|-][assistant|x|-]",
    ),
    (
        (
            ChatMessage(role="system", texts=("S",)),
            ChatMessage(role="user", texts=("u",)),
            ChatMessage(role="developer", texts=("D1", "D2")),
        ),
        "[system|S\n\nD1\nD2|-][user|u|-]",
    ),
    (
        (
            ChatMessage(role="developer", texts=("",)),
            ChatMessage(role="developer", texts=("B",)),
        ),
        "[system|B|-]",
    ),
]


@pytest.mark.parametrize(("messages", "expected"), DEVELOPER_CASES)
def test_developer_messages_become_system_ones_as_vllm_merges_them(
    messages: tuple[ChatMessage, ...], expected: str
) -> None:
    assert ChatTemplate(SHOW, {}, where="t").render(messages, where="w") == expected
    functions = _vllm_functions()
    if functions is not None:
        conversation = functions["_convert_developer_to_system"](_dicts(messages))
        conversation = functions["_consolidate_system_messages"](conversation)
        assert _transformers(SHOW, conversation) == expected


@pytest.mark.parametrize("quote", ["'", '"'])
def test_a_template_naming_developer_gets_developer_messages(quote: str) -> None:
    source = SHOW + "{% if false %}" + quote + "developer" + quote + "{% endif %}"
    messages = (
        ChatMessage(role="user", texts=("u",)),
        ChatMessage(role="developer", texts=("A",)),
    )
    expected = "[user|u|-][developer|A|-]"
    assert ChatTemplate(source, {}, where="t").render(messages, where="w") == expected
    assert _transformers(source, _dicts(messages)) == expected


OPENAI_SHOW = (
    "{% for m in messages %}[{{ m.role }}|{% if m.content is string %}{{ m.content }}"
    "{% else %}{% for p in m.content %}{{ p.type }}:{{ p.text }},{% endfor %}{% endif %}]"
    "{% endfor %}"
)


def test_openai_parts_tool_messages_and_merged_developer_parts() -> None:
    template = ChatTemplate(OPENAI_SHOW, {}, where="t")
    assert template.content_format == "openai"
    messages = (
        ChatMessage(role="user", texts=("u1", "u2")),
        ChatMessage(role="tool", texts=("x", "y")),
        ChatMessage(role="developer", texts=("a", "b")),
    )
    # vLLM: parts as {"type": "text", "text": ...}; a tool message's text parts joined with
    # newlines; developer -> system, then the system parts joined and moved to the front
    expected = "[system|a\nb][user|text:u1,text:u2,][tool|x\ny]"
    assert template.render(messages, where="w") == expected
    conversation: list[dict[str, Any]] = [
        {"role": "system", "content": "a\nb"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "u1"}, {"type": "text", "text": "u2"}],
        },
        {"role": "tool", "content": "x\ny"},
    ]
    assert _transformers(OPENAI_SHOW, conversation) == expected


def test_the_variables_transformers_and_vllm_hand_over() -> None:
    source = (
        "{{ tools is none }}/{{ documents is none }}/{{ add_generation_prompt }}/"
        "{{ reasoning_effort is none }}/{{ bos_token }}/{{ messages|length }}"
    )
    messages = (ChatMessage(role="user", texts=("u",), name="n"),)
    ours = ChatTemplate(source, {"bos_token": "<s>"}, where="t").render(messages, where="w")
    theirs = _transformers(source, _dicts(messages), reasoning_effort=None, bos_token="<s>")
    assert ours == theirs == "True/True/True/True/<s>/1"
    # a template that does not read reasoning_effort is not handed it
    plain = "{{ reasoning_effort is defined }}"
    assert ChatTemplate(plain, {}, where="t").render(messages, where="w") == "True"
    unread = "{{ effort is defined }}"
    assert ChatTemplate(unread, {}, where="t").render(messages, where="w") == "False"


def test_a_template_at_the_size_bound_loads_and_past_it_is_refused() -> None:
    at = "a" * 2**20  # MAX_TEMPLATE_CHARS, 1 Mi characters
    assert ChatTemplate(at, {}, where="t").render((), where="w") == at
    with pytest.raises(ChatTemplateError, match="1,048,577 characters"):
        ChatTemplate(at + "a", {}, where="t")


def test_the_source_and_tokens_are_kept() -> None:
    tokens = {"bos_token": "<s>"}
    template = ChatTemplate("{{ bos_token }}", tokens, where="t")
    tokens["bos_token"] = "changed"
    assert template.source == "{{ bos_token }}"
    assert template.special_tokens == {"bos_token": "<s>"}
    assert template.render((), where="w") == "<s>"


def test_a_render_of_exactly_the_text_bound_is_transformers_and_one_more_is_refused() -> None:
    half = "{% set x = 'a' * 2097152 %}{{ x }}{{ x }}"  # 2 x 2 Mi = 4 Mi characters, in chunks
    ours = ChatTemplate(half, {}, where="t").render((), where="w")
    assert len(ours) == 4 * 2**20
    assert ours == _transformers(half, [])
    with pytest.raises(ChatTemplateError, match=r"renders over 4,194,304 characters"):
        ChatTemplate(half + "b", {}, where="t").render((), where="w")


def test_a_render_leaves_no_deadline_behind() -> None:
    from kvpure.text import budget

    ChatTemplate("{{ 1 }}", {}, where="t").render((), where="w")
    assert budget.BUDGET.deadline == float("inf")
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{{ raise_exception('x') }}", {}, where="t").render((), where="w")
    assert budget.BUDGET.deadline == float("inf")


class _JumpingClock:
    """A monotonic clock one second later at each read: the 2 s budget ends on the third."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_the_render_starts_the_budget_and_reads_it_per_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpure.text import budget

    source = "{% for i in [1, 2, 3, 4, 5] %}{{ i }}{% endfor %}"  # no hook but the output's
    monkeypatch.setattr(budget, "time", _JumpingClock())
    with pytest.raises(ChatTemplateError, match="ran past its 2 s budget"):
        ChatTemplate(source, {}, where="t").render((), where="w")
    monkeypatch.undo()
    assert ChatTemplate(source, {}, where="t").render((), where="w") == "12345"
