"""Every named special token reaches the chat template as transformers hands it over.

transformers renders a chat template with its tokenizer's
``special_tokens_map`` (``bos_token`` ... ``mask_token``) as variables; the
expected text is transformers' own ``apply_chat_template`` on the same folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvpure.text.chat_template import SPECIAL_TOKEN_NAMES, ChatMessage
from kvpure.text.tokenizer import load_tokenizer

pytest.importorskip("tokenizers")
pytest.importorskip("jinja2")

TINY = Path(__file__).resolve().parents[1] / "examples" / "tiny-chat-tokenizer"
NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def test_the_names_are_transformers_special_tokens() -> None:
    assert SPECIAL_TOKEN_NAMES == NAMES


def test_each_named_special_token_renders_as_in_transformers(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(TINY / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((TINY / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.update(
        unk_token="<|unk|>", sep_token="<|sep|>", cls_token="<|cls|>", mask_token="<|mask|>"
    )
    config["chat_template"] = "".join(f"[{name}={{{{ {name} }}}}]" for name in NAMES)
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    theirs = AutoTokenizer.from_pretrained(str(folder))
    conversation = [{"role": "user", "content": "hi"}]
    expected = theirs.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    ours = load_tokenizer(folder).render_chat((ChatMessage(role="user", texts=("hi",)),), where="t")
    assert ours == expected
    assert "[mask_token=<|mask|>]" in ours
