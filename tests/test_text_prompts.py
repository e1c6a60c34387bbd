"""Text prompts and chat messages through a local tokenizer, as vLLM 0.26 encodes them.

Expected ids come from the ``tokenizers`` library itself and from the chat
template rendered by hand, following vLLM 0.26:

- completions: ``CompletionRequest.add_special_tokens`` defaults to True
  (``vllm/entrypoints/openai/completion/protocol.py``);
- chat: ``ChatCompletionRequest.add_special_tokens`` defaults to False and
  ``add_generation_prompt`` to True (``.../chat_completion/protocol.py``); the
  template is applied by ``safe_apply_chat_template``
  (``vllm/renderers/hf.py``), which turns developer messages into system
  ones when the template never names ``developer``, and picks the content
  format from the template's syntax tree (``_detect_content_format``).

transformers' ``apply_chat_template`` (the function vLLM calls) cross-checks
the rendering; it is a test-only dependency (the dev extra).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from kvpure.cache.workload_input import parse_request
from kvpure.text import (
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    MissingExtraError,
    load_tokenizer,
)

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "examples" / "tiny-chat-tokenizer"
BOS, IM_START, IM_END = 0, 2, 3

SYSTEM = "You are a helpful assistant."
QUESTION = "What is the capital of France?"


def _raw() -> Tokenizer:
    return Tokenizer.from_file(str(TINY / "tokenizer.json"))


def _hand_rendered(*turns: tuple[str, str]) -> str:
    """The tiny template by hand: BOS, ChatML turns, an open assistant turn."""
    body = "".join(f"<|im_start|>{role}\n{text.strip()}<|im_end|>\n" for role, text in turns)
    return "<|bos|>" + body + "<|im_start|>assistant\n"


def _messages(*turns: tuple[str, str]) -> tuple[ChatMessage, ...]:
    return tuple(ChatMessage(role=role, texts=(text,)) for role, text in turns)


def test_a_text_prompt_gets_the_bos_token_as_vllm_completions_add_it() -> None:
    ids = load_tokenizer(TINY).encode_prompt(QUESTION)
    assert ids == tuple(_raw().encode(QUESTION, add_special_tokens=True).ids)
    assert ids[0] == BOS
    assert ids[1:] == tuple(_raw().encode(QUESTION, add_special_tokens=False).ids)
    assert len(ids) == 13


def test_a_tokenizer_json_file_reads_the_config_beside_it() -> None:
    by_file = load_tokenizer(TINY / "tokenizer.json")
    turns = (("user", QUESTION),)
    assert by_file.render_chat(_messages(*turns), where="t") == _hand_rendered(*turns)


def test_chat_messages_render_the_template_and_add_no_special_tokens() -> None:
    turns = (("system", SYSTEM), ("user", f"  {QUESTION}\n"))
    tokenizer = load_tokenizer(TINY)
    text = tokenizer.render_chat(_messages(*turns), where="t")
    assert text == _hand_rendered(*turns)
    ids = tokenizer.encode_chat(_messages(*turns), where="t")
    assert ids == tuple(_raw().encode(text, add_special_tokens=False).ids)
    # one BOS, written by the template; special tokens are single ids
    assert ids[:2] == (BOS, IM_START)
    assert ids.count(BOS) == 1
    assert ids.count(IM_END) == 2


def test_content_parts_are_joined_with_newlines_for_a_string_template() -> None:
    tokenizer = load_tokenizer(TINY)
    parts = ChatMessage(role="user", texts=("first", "second"))
    assert tokenizer.render_chat((parts,), where="t") == _hand_rendered(("user", "first\nsecond"))
    data = {
        "messages": [{"role": "user", "content": ["first", {"type": "text", "text": "second"}]}]
    }
    request = parse_request(data, "w line 1", tokenizer)
    assert request.prompt_token_ids == tokenizer.encode_chat((parts,), where="t")


def test_the_template_raise_exception_is_a_one_line_error() -> None:
    with pytest.raises(ChatTemplateError, match="Unknown role: tool"):
        load_tokenizer(TINY).encode_chat(_messages(("tool", "42")), where="w line 3")


def test_developer_messages_become_one_leading_system_message() -> None:
    # vllm/renderers/hf.py: the tiny template never names 'developer', so the
    # developer message turns system and both system messages merge at the front.
    messages = _messages(("user", QUESTION), ("developer", "Be terse."), ("system", SYSTEM))
    text = load_tokenizer(TINY).render_chat(messages, where="t")
    assert text == _hand_rendered(("system", f"Be terse.\n\n{SYSTEM}"), ("user", QUESTION))


def _folder_with_template(tmp_path: Path, template: str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(TINY / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((TINY / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


PARTS_TEMPLATE = (
    "{% set convo = messages %}"
    "{% for message in convo %}<|im_start|>{{ message.role }}\n"
    "{% for part in message['content'] %}[{{ part['text'] }}]{% endfor %}<|im_end|>\n"
    "{% endfor %}{{ eos_token }}"
)


def test_a_template_looping_over_content_gets_openai_parts(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(_folder_with_template(tmp_path, PARTS_TEMPLATE))
    assert tokenizer.chat_template is not None
    assert tokenizer.chat_template.content_format == "openai"
    message = ChatMessage(role="user", texts=("a", "b"))
    # eos_token is written as an AddedToken object in tokenizer_config.json
    assert (
        tokenizer.render_chat((message,), where="t")
        == "<|im_start|>user\n[a][b]<|im_end|>\n<|im_end|>"
    )


def test_chat_template_jinja_wins_over_the_config(tmp_path: Path) -> None:
    folder = _folder_with_template(tmp_path, PARTS_TEMPLATE)
    (folder / "chat_template.jinja").write_text("{{ messages[0]['content'] }}!", encoding="utf-8")
    tokenizer = load_tokenizer(folder)
    assert tokenizer.render_chat(_messages(("user", "hi")), where="t") == "hi!"


CASES: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": QUESTION}],
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
    [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Summarize the following text in one sentence."},
        {"role": "assistant", "content": " The quick brown fox jumps over the lazy dog. "},
        {"role": "user", "content": "Translate it into German: the cache is warm."},
    ],
]


@pytest.mark.parametrize("conversation", CASES)
@pytest.mark.parametrize("template", [None, PARTS_TEMPLATE])
def test_transformers_apply_chat_template_agrees(
    tmp_path: Path, conversation: list[dict[str, Any]], template: str | None
) -> None:
    from transformers import AutoTokenizer

    folder = TINY if template is None else _folder_with_template(tmp_path, template)
    ours = load_tokenizer(folder)
    assert ours.chat_template is not None
    messages = tuple(ChatMessage(role=m["role"], texts=(m["content"],)) for m in conversation)
    # vLLM hands transformers the content in the format the template reads
    given = [
        {**m, "content": [{"type": "text", "text": m["content"]}]}
        if ours.chat_template.content_format == "openai"
        else m
        for m in conversation
    ]
    theirs = AutoTokenizer.from_pretrained(str(folder))
    text = theirs.apply_chat_template(given, tokenize=False, add_generation_prompt=True)
    ids = theirs.apply_chat_template(
        given, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert ours.render_chat(messages, where="t") == text
    assert ours.encode_chat(messages, where="t") == tuple(ids)
    prompt = conversation[-1]["content"]
    assert ours.encode_prompt(prompt) == tuple(theirs.encode(prompt, add_special_tokens=True))


def test_without_the_tokenizers_package_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'kvpure\[text\]'"):
        load_tokenizer(TINY)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"prompt": "hi"}, "line 1.prompt: needs a tokenizer"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "line 1.messages: needs a tokenizer"),
        ({"prompt": ""}, "line 1.prompt: must be a non-empty string"),
        ({"prompt": "hi", "messages": []}, "line 1.messages: give exactly one of"),
        ({"messages": []}, "line 1.messages: must be a non-empty list"),
        ({"messages": [{"content": "hi"}]}, "line 1.messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, "line 1.messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "line 1.messages[0].content[0]",
        ),
        (
            {"messages": [{"role": "assistant", "content": None, "tool_calls": []}]},
            "line 1.messages[0].tool_calls: unknown key",
        ),
    ],
)
def test_bad_text_lines_name_the_field(data: dict[str, Any], needle: str) -> None:
    from kvpure.errors import InvalidFieldError

    with pytest.raises(InvalidFieldError) as info:
        parse_request(data, "w line 1")
    assert needle in str(info.value)


# Expected formats: vLLM 0.26's own detector (vllm/renderers/hf.py,
# _detect_content_format and the _iter_nodes_* helpers it calls), executed on
# each template from vLLM's source; kvpure's rewrite must agree.
DETECTION = [
    ("{% for m in messages %}{{ m['content'] }}{% endfor %}", "string"),
    ("{% for m in messages %}"
     "{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages|reverse %}"
     "{% for p in m['content']|list %}{% endfor %}{% endfor %}", "openai"),
    ("{% set content = messages[0]['content'] %}{% for p in content %}{% endfor %}", "openai"),
    # a tuple loop target over the messages: vLLM gives up and says "string"
    ("{% for m, n in messages %}{% endfor %}"
     "{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}", "string"),
    ("{% for m in messages[1:] %}{% for p in m.content %}{% endfor %}{% endfor %}", "openai"),
    ("{% set a = messages %}{% set b = a %}"
     "{% for m in b %}{% for p in m['content'] %}{% endfor %}{% endfor %}", "openai"),
    ("{% for m in messages %}{% for p in m['text'] %}{% endfor %}{% endfor %}", "string"),
    ("{% for p in messages[0]['content'] %}{% endfor %}", "string"),
    ("{% set ns = namespace(x=messages) %}"
     "{% for m in ns.x %}{% for p in m.content %}{% endfor %}{% endfor %}", "string"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "expected"), DETECTION)
def test_content_format_detection_agrees_with_vllm(source: str, expected: str) -> None:
    assert ChatTemplate(source, {}, where="t").content_format == expected


def test_a_template_that_does_not_parse_is_one_error() -> None:
    with pytest.raises(ChatTemplateError, match="does not parse"):
        ChatTemplate("{% for m in messages %}", {}, where="t")
