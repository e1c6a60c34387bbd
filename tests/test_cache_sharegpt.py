"""``kvpure cache`` on a ShareGPT dataset, sampled as vLLM 0.26's benchmark samples it.

The expected requests follow ``ShareGPTDataset.load_data`` / ``ShareGPTDataset.sample``
and ``is_valid_sequence`` in vLLM 0.26's ``vllm/benchmarks/datasets/datasets.py``
(entries with fewer than 2 turns dropped; prompt = first turn's text encoded
with special tokens; output length = the second turn's token count; dropped
when prompt < 4, output < 4, prompt > 1024 or prompt + output > 2048 tokens;
``--disable-shuffle`` order), re-done here with the ``tokenizers`` library.
The expected hits follow vLLM's prefix-cache rules with a pool that never
evicts: the full 16-token blocks of the longest common prefix with an
earlier prompt, capped at ``num_tokens - 1`` (``KVCacheManager.get_computed_blocks``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from kvpure.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
TINY = ROOT / "examples" / "tiny-chat-tokenizer"
SAMPLE = ROOT / "examples" / "sharegpt_sample.json"


def _sampled(entries: list[dict[str, Any]]) -> list[tuple[list[int], int]]:
    raw = Tokenizer.from_file(str(TINY / "tokenizer.json"))
    out: list[tuple[list[int], int]] = []
    for entry in entries:
        turns = entry.get("conversations", [])
        if len(turns) < 2:
            continue
        prompt = list(raw.encode(turns[0]["value"], add_special_tokens=True).ids)
        output = len(raw.encode(turns[1]["value"], add_special_tokens=True).ids)
        if len(prompt) < 4 or output < 4 or len(prompt) > 1024 or len(prompt) + output > 2048:
            continue
        out.append((prompt, output))
    return out


def _expected_hits(prompts: list[list[int]]) -> int:
    hits = 0
    for i, ids in enumerate(prompts):
        best = 0
        for other in prompts[:i]:
            common = 0
            for a, b in zip(ids, other, strict=False):
                if a != b:
                    break
                common += 1
            best = max(best, common)
        hits += min(best, len(ids) - 1) // 16 * 16
    return hits


def _cache(path: Path, *args: str) -> list[str]:
    return [
        "cache",
        "--vllm",
        "0.26",
        str(path),
        "--model",
        LLAMA,
        "--kv-cache-memory",
        "24GiB",
        "--max-model-len",
        "2048",
        "--tokenizer",
        str(TINY),
        *args,
    ]


def _json(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    assert main([*_cache(path, "--json")]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_the_bundled_sharegpt_sample_is_read_as_vllms_benchmark_reads_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    entries = json.loads(SAMPLE.read_text(encoding="utf-8"))
    sampled = _sampled(entries)
    data = _json(capsys, SAMPLE)
    # 11 entries: two with fewer than 2 turns, one ("Hi": 3 tokens) under the length filter.
    assert data["input"] == {
        "format": "sharegpt",
        "arrival_order": False,
        "sharegpt_entries": 11,
        "sharegpt_skipped_short_conversations": 2,
        "sharegpt_skipped_by_length": 1,
    }
    assert data["num_requests"] == len(sampled) == 8
    prompts = [ids for ids, _ in sampled]
    assert data["prompt_tokens"] == sum(len(ids) for ids in prompts)
    hits = _expected_hits(prompts)
    assert hits > 0
    assert data["actual"]["prefix_cache_queries"] == data["prompt_tokens"]
    assert data["actual"]["prefix_cache_hits"] == hits
    assert data["unbounded"]["prefix_cache_hits"] == hits


def test_output_lengths_come_from_the_second_turn(tmp_path: Path) -> None:
    from kvpure.cli.workload_files import parse_workload
    from kvpure.text.tokenizer import load_tokenizer

    entries = json.loads(SAMPLE.read_text(encoding="utf-8"))
    text = SAMPLE.read_text(encoding="utf-8")
    workload = parse_workload(str(SAMPLE), text, load_tokenizer(TINY))
    got = [(list(r.prompt_token_ids), r.output_len) for r in workload.requests]
    assert got == _sampled(entries)
    # The entry opened by the assistant still sends its first turn as the prompt.
    assert workload.requests[5].source.endswith("[7]")


def test_the_jsonl_form_gives_the_same_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    entries = json.loads(SAMPLE.read_text(encoding="utf-8"))
    path = tmp_path / "sharegpt.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    lines = _json(capsys, path)
    array = _json(capsys, SAMPLE)
    assert lines["input"]["format"] == "sharegpt-jsonl"
    assert lines["actual"] == array["actual"]
    assert lines["num_requests"] == array["num_requests"]


def test_the_text_report_names_the_sampling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_cache(SAMPLE)) == 0
    out = capsys.readouterr().out
    assert "ShareGPT:             8 of 11 entries" in out
    assert "2 with fewer than 2 turns, 1 by its length filter" in out


TURN = {"from": "human", "value": "Tell me about the history of the city of Lisbon."}


@pytest.mark.parametrize(
    ("data", "tokenizer", "needle"),
    [
        ([{"conversations": [TURN, TURN]}], False, "[0].conversations: needs a tokenizer"),
        ([{"conversations": [TURN, "x"]}], True, "[0].conversations[1]: must be an object"),
        (
            [{"conversations": [TURN, {"from": "gpt", "value": 3}]}],
            True,
            "[0].conversations[1].value: must be a string",
        ),
        ([{"conversations": [TURN, TURN]}, 7], True, "[1]: must be an object"),
        ([{"conversations": {"a": 1}}], True, "[0].conversations: must be a list"),
        ([{"conversations": [TURN]}], True, "holds no ShareGPT conversation"),
    ],
)
def test_bad_sharegpt_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data: list[Any],
    tokenizer: bool,
    needle: str,
) -> None:
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    args = _cache(path)
    if not tokenizer:
        args = args[: args.index("--tokenizer")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert needle in err


def test_a_broken_array_names_the_item_where_it_breaks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the array is read item by item: the error names the item, not a line
    path = tmp_path / "sg.json"
    path.write_text('[\n {"conversations": []},\n', encoding="utf-8")
    assert main(_cache(path)) == 2
    err = capsys.readouterr().err
    assert "sg.json[1]: invalid JSON" in err


def test_an_array_of_requests_is_refused_with_the_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps([{"prompt_token_ids": [1, 2, 3]}], indent=1), encoding="utf-8")
    assert main(_cache(path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "holds no ShareGPT entry" in err
    assert "one request a line" in err
