"""``kvpure cache``'s top shared prefixes on workloads of known structure.

Each request's hit follows vLLM 0.26's rules by hand (Llama 3 8B, 16-token
blocks, a pool that never evicts): the full blocks of its longest common
prefix with an earlier prompt in its LoRA/salt namespace, capped at
``num_tokens - 1`` tokens (``KVCacheManager.get_computed_blocks``). The
prefixes group requests served exactly the same tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
TINY = ROOT / "examples" / "tiny-chat-tokenizer"
P = list(range(1, 49))  # 3 blocks
S = list(range(2001, 2033))  # 2 blocks
LONG = [*P, *range(100, 116), 7, 8]  # 66 tokens


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[dict[str, Any]], *args: str
) -> dict[str, Any]:
    path = tmp_path / "w.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    base = ["cache", str(path), "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "24GiB"]
    assert main([*base, "--max-model-len", "1024", *args]) == 0
    if "--json" not in args:
        return {"text": capsys.readouterr().out}
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


LINES: list[dict[str, Any]] = [
    {"prompt_token_ids": LONG},  # line 1: nothing cached yet
    {"prompt_token_ids": [*P, *range(200, 210)]},  # line 2: P, 48
    {"prompt_token_ids": [*P, *range(300, 310)]},  # line 3: P, 48
    {"prompt_token_ids": [*S, *range(400, 406)]},  # line 4: nothing
    {"prompt_token_ids": [*S, *range(500, 506)]},  # line 5: S, 32
    {"prompt_token_ids": LONG},  # line 6: 65 hittable tokens -> 64
    {"prompt_token_ids": [*S, *range(600, 606)]},  # line 7: S, 32
    {"prompt_token_ids": [*P, 9], "lora_name": "a"},  # line 8: another namespace
    {"prompt_token_ids": [*P, 9], "cache_salt": "x"},  # line 9: another namespace
    {"prompt_token_ids": [*P, 10], "cache_salt": "x"},  # line 10: P under salt x, 48
]


def test_prefixes_rank_by_hit_tokens_then_first_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = _run(capsys, tmp_path, LINES, "--json")
    assert data["actual"]["prefix_cache_hits"] == 48 + 48 + 32 + 64 + 32 + 48
    top = data["top_shared_prefixes"]
    got = [(p["length_tokens"], p["requests"], p["hit_tokens"], p["first_request"]) for p in top]
    where = str(tmp_path / "w.jsonl")
    assert got == [
        (48, 2, 96, f"{where} line 2"),
        # 64 hit tokens each: the earlier first request wins the tie.
        (32, 2, 64, f"{where} line 5"),
        (64, 1, 64, f"{where} line 6"),
        (48, 1, 48, f"{where} line 10"),
    ]
    assert top[0]["preview_token_ids"] == P[:16]
    assert top[1]["preview_token_ids"] == S[:16]
    assert "preview_text" not in top[0]
    assert sum(p["hit_tokens"] for p in top) == data["actual"]["prefix_cache_hits"]


def test_at_most_five_prefixes_are_listed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Seven pairs; pair k shares (k + 1) blocks, so its second request hits 16 * (k + 1).
    lines: list[dict[str, Any]] = []
    for k in range(7):
        shared = list(range(10_000 * (k + 1), 10_000 * (k + 1) + 16 * (k + 1)))
        lines += [{"prompt_token_ids": [*shared, 1]}, {"prompt_token_ids": [*shared, 2]}]
    data = _run(capsys, tmp_path, lines, "--json")
    lengths = [p["length_tokens"] for p in data["top_shared_prefixes"]]
    assert lengths == [112, 96, 80, 64, 48]


def test_the_text_report_lists_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = _run(capsys, tmp_path, LINES)["text"]
    assert "top shared prefixes" in out
    assert "1.        96 = 48 tokens x 2 request(s), first served to" in out
    assert " ".join(map(str, P[:8])) + " ..." in out


def test_no_hits_lists_no_prefixes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = _run(capsys, tmp_path, [{"prompt_token_ids": P}, {"prompt_token_ids": S}], "--json")
    assert data["top_shared_prefixes"] == []


def test_with_a_tokenizer_the_preview_is_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 3
    lines = [{"prompt": text + "One."}, {"prompt": text + "Two."}]
    data = _run(capsys, tmp_path, lines, "--json", "--tokenizer", str(TINY))
    top = data["top_shared_prefixes"]
    assert len(top) == 1
    assert top[0]["requests"] == 1
    assert top[0]["preview_text"].startswith("<|bos|>The quick brown")
