"""``kvpure cache --tokenizer``: text and chat workloads through the bundled tiny tokenizer.

The expected hits follow vLLM 0.26's rules by hand, on ids from the
``tokenizers`` library and the chat template rendered by hand (see
tests/test_text_prompts.py for the encoding itself): with a pool that never
evicts, a request hits the full blocks (16 tokens) of its longest common
prefix with an earlier request in the same namespace, capped at
``num_tokens - 1`` tokens (``KVCacheManager.get_computed_blocks``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from kvpure.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
TINY = ROOT / "examples" / "tiny-chat-tokenizer"
EXAMPLE = ROOT / "examples" / "chat_workload.jsonl"


def _chat_text(messages: list[dict[str, Any]]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content'].strip()}<|im_end|>\n" for m in messages)
    return "<|bos|>" + body + "<|im_start|>assistant\n"


def _ids(line: dict[str, Any]) -> list[int]:
    raw = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    if "prompt" in line:
        return list(raw.encode(line["prompt"], add_special_tokens=True).ids)
    return list(raw.encode(_chat_text(line["messages"]), add_special_tokens=False).ids)


def _expected_hits(lines: list[dict[str, Any]]) -> tuple[int, int]:
    seen: list[tuple[str | None, list[int]]] = []
    queries = hits = 0
    for line in lines:
        ids, salt = _ids(line), line.get("cache_salt")
        best = 0
        for other_salt, other in seen:
            if other_salt != salt:
                continue
            common = 0
            for a, b in zip(ids, other, strict=False):
                if a != b:
                    break
                common += 1
            best = max(best, common)
        queries += len(ids)
        hits += min(best, len(ids) - 1) // 16 * 16
        seen.append((salt, ids))
    return queries, hits


def _cache(*args: str) -> list[str]:
    return [
        "cache",
        "--vllm",
        "0.26",
        *args,
        "--model",
        LLAMA,
        "--kv-cache-memory",
        "24GiB",
        "--max-model-len",
        "2048",
    ]


def test_the_bundled_chat_workload_hits_as_vllm_would(capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.loads(x) for x in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    assert {"messages", "prompt"} <= {key for line in lines for key in line}
    code = main([*_cache(str(EXAMPLE)), "--tokenizer", str(TINY), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    queries, hits = _expected_hits(lines)
    assert hits > 0
    assert data["actual"]["prefix_cache_queries"] == queries
    assert data["actual"]["prefix_cache_hits"] == hits
    assert data["unbounded"]["prefix_cache_hits"] == hits


def test_a_prompt_and_its_token_ids_are_the_same_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 4
    ids = _ids({"prompt": text})
    path = tmp_path / "w.jsonl"
    lines = [{"prompt": text}, {"prompt_token_ids": ids}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert main([*_cache(str(path)), "--tokenizer", str(TINY / "tokenizer.json"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["actual"]["prefix_cache_hits"] == (len(ids) - 1) // 16 * 16 > 0


@pytest.mark.parametrize(
    ("line", "tokenizer", "needle"),
    [
        ({"prompt": "hi"}, None, "line 1.prompt: needs a tokenizer: give --tokenizer"),
        ({"prompt": "hi"}, "missing-folder", "--tokenizer: does not exist"),
        ({"messages": [{"role": "tool", "content": "1"}]}, "tiny", "Unknown role: tool"),
    ],
)
def test_text_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    line: dict[str, Any],
    tokenizer: str | None,
    needle: str,
) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    args = _cache(str(path))
    if tokenizer is not None:
        args += ["--tokenizer", str(TINY) if tokenizer == "tiny" else str(tmp_path / tokenizer)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert needle in err


def test_a_tokenizer_without_a_chat_template_refuses_messages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((TINY / "tokenizer.json").read_bytes())
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    assert main([*_cache(str(path)), "--tokenizer", str(folder)]) == 2
    assert "has no chat template" in capsys.readouterr().err


def test_without_the_text_extra_the_cli_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"prompt": "hi"}) + "\n", encoding="utf-8")
    assert main([*_cache(str(path)), "--tokenizer", str(TINY)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "pip install 'kvpure[text]'" in err
