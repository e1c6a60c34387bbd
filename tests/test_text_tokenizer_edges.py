"""Loading a local tokenizer folder and its errors, without transformers (fast).

Expected ids and texts come from the ``tokenizers`` library itself (the one
transformers' fast tokenizers wrap); the named chat templates follow
transformers' rule (a list of ``{"name", "template"}``, the one named
``default`` is used); the bounds are the stated figures (a prompt of 4 Mi
characters, files of 256 MiB), here with a small prompt bound standing in.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.text import ChatMessage, ChatTemplate, load_tokenizer
from kvpure.text import tokenizer as tokenizer_module
from kvpure.text.errors import ChatTemplateError, PromptTooLongError, TokenizerError
from kvpure.text.tokenizer import LocalTokenizer

tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

TINY = Path(__file__).resolve().parents[1] / "examples" / "tiny-chat-tokenizer"
HI = (ChatMessage(role="user", texts=("hi",)),)


def _raw() -> Any:
    return tokenizers.Tokenizer.from_file(str(TINY / "tokenizer.json"))


def _folder(tmp_path: Path, config: object | None, *, jinja: str | None = None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(TINY / "tokenizer.json", folder / "tokenizer.json")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    if jinja is not None:
        (folder / "chat_template.jinja").write_text(jinja, encoding="utf-8")
    return folder


def test_the_stated_file_bound() -> None:
    assert tokenizer_module._MAX_FILE_BYTES == 256 * 2**20


def test_a_prompt_at_the_bound_is_encoded_and_past_it_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokenizer_module, "MAX_TEXT_CHARS", 20)
    tok = load_tokenizer(TINY)
    text = "What is it, France?!"
    assert len(text) == 20
    assert tok.encode_prompt(text) == tuple(_raw().encode(text, add_special_tokens=True).ids)
    with pytest.raises(PromptTooLongError) as caught:
        tok.encode_prompt(text + "x")
    assert (caught.value.where, caught.value.length, caught.value.limit) == ("prompt", 21, 20)
    rendered = tok.render_chat(HI, where="line 3")
    assert len(rendered) == 59
    monkeypatch.setattr(tokenizer_module, "MAX_TEXT_CHARS", len(rendered))
    assert tok.encode_chat(HI, where="line 3") == tuple(
        _raw().encode(rendered, add_special_tokens=False).ids
    )
    monkeypatch.setattr(tokenizer_module, "MAX_TEXT_CHARS", len(rendered) - 1)
    with pytest.raises(PromptTooLongError) as caught:
        tok.encode_chat(HI, where="line 3")
    assert caught.value.where == "line 3"


def test_decode_keeps_the_special_tokens() -> None:
    tok = load_tokenizer(TINY)
    ids = tok.encode_chat(HI, where="t")
    assert tok.decode(ids) == _raw().decode(list(ids), skip_special_tokens=False)
    assert tok.decode(ids) != _raw().decode(list(ids), skip_special_tokens=True)
    assert tok.decode(ids).startswith("<|bos|>")


class _Failing:
    def encode(self, text: str, add_special_tokens: bool) -> Any:
        raise ValueError("bad input\nsecond line")

    def decode(self, ids: list[int], skip_special_tokens: bool) -> str:
        raise BaseException("x" * 300)  # a pyo3 PanicException is a BaseException


def test_library_failures_are_typed_with_their_first_line() -> None:
    template = ChatTemplate("{{ messages[0]['content'] }}", {}, where="t")
    tok = LocalTokenizer(_Failing(), template, where="folder")
    assert (tok.where, tok.chat_template) == ("folder", template)
    with pytest.raises(TokenizerError) as caught:
        tok.encode_prompt("hi")
    assert (caught.value.where, caught.value.reason) == (
        "folder",
        "encoding a prompt failed: bad input",
    )
    with pytest.raises(TokenizerError) as caught:
        tok.encode_chat(HI, where="line 1")
    assert caught.value.reason == "encoding a rendered chat failed: bad input"
    with pytest.raises(TokenizerError) as caught:
        tok.decode([1])
    assert caught.value.reason == "decoding token ids failed: " + "x" * 200


def test_an_empty_message_is_named_by_its_type_and_an_interrupt_passes() -> None:
    def empty() -> None:
        raise KeyError()  # str(KeyError()) == ""

    with pytest.raises(TokenizerError) as caught:
        tokenizer_module._guarded("w", "loading", empty)
    assert caught.value.reason == "loading failed: KeyError"
    assert tokenizer_module._guarded("w", "loading", lambda: 7) == 7

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tokenizer_module._guarded("w", "loading", interrupted)


def test_a_folder_without_a_config_has_no_chat_template(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    tok = load_tokenizer(folder)
    assert tok.chat_template is None
    assert tok.where == str(folder)
    assert tok.encode_prompt("hi") == tuple(_raw().encode("hi", add_special_tokens=True).ids)
    with pytest.raises(ChatTemplateError, match="has no chat template") as caught:
        tok.render_chat(HI, where="line 2")
    assert caught.value.where == "line 2"
    by_file = load_tokenizer(folder / "tokenizer.json")
    assert by_file.chat_template is None


def test_the_default_named_template_is_used(tmp_path: Path) -> None:
    config = {
        "bos_token": {"content": "<|bos|>", "special": True},
        "eos_token": {"content": 5},
        "chat_template": [
            "not a template",
            {"name": "tool_use", "template": "TOOLS"},
            {"name": "default", "template": "D{{ bos_token }}[{{ eos_token }}]"},
        ],
    }
    tok = load_tokenizer(_folder(tmp_path, config))
    assert tok.render_chat(HI, where="t") == "D<|bos|>[]"


def test_the_jinja_file_wins_beside_a_tokenizer_json_file(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path, {"chat_template": "CONFIG", "bos_token": "<b>"}, jinja="J{{ bos_token }}"
    )
    assert load_tokenizer(folder / "tokenizer.json").render_chat(HI, where="t") == "J<b>"


@pytest.mark.parametrize(
    ("config", "field_end", "words"),
    [
        ({"chat_template": [{"name": "tool_use", "template": "T"}]}, ".chat_template", "default"),
        ({"chat_template": [{"name": "default", "template": 5}]}, ".chat_template", "default"),
        ({"chat_template": 5}, ".chat_template", "must be a string"),
        ([1, 2], "tokenizer_config.json", "must be a JSON object"),
    ],
)
def test_a_bad_config_names_the_field(
    tmp_path: Path, config: object, field_end: str, words: str
) -> None:
    folder = _folder(tmp_path, config)
    with pytest.raises(InvalidFieldError, match=words) as caught:
        load_tokenizer(folder)
    assert caught.value.field.endswith(field_end)
    assert str(folder) in caught.value.field


def test_a_config_that_is_not_json_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    (folder / "tokenizer_config.json").write_text("{", encoding="utf-8")
    with pytest.raises(InvalidFieldError, match="invalid JSON"):
        load_tokenizer(folder)


def test_missing_and_broken_tokenizers_are_typed(tmp_path: Path) -> None:
    with pytest.raises(InvalidFieldError, match="does not exist"):
        load_tokenizer(tmp_path / "nothing")
    with pytest.raises(InvalidFieldError, match=r"holds no tokenizer\.json"):
        load_tokenizer(tmp_path)
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"version": "1.0"}', encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"loading tokenizer\.json failed") as caught:
        load_tokenizer(broken)
    assert caught.value.where == str(broken)


def test_a_template_error_names_the_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"chat_template": "{% if %}"})
    with pytest.raises(ChatTemplateError, match="does not parse") as caught:
        load_tokenizer(folder)
    assert caught.value.where == str(folder)
