"""``kvpure cache``: a workload's prefix-cache hits through the exact manager.

Expected counts follow from vLLM's rules by hand: Llama 3 8B at block size 16,
full blocks only, a hit capped at ``num_tokens - 1`` tokens, freed blocks
appended to the free queue tail first-to-last in reverse (the tail block is
evicted first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache.workload import WorkloadRequest, short_prefix_tokens
from kvpure.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
A = list(range(1, 65))
B = list(range(1001, 1065))


def _write(tmp_path: Path, lines: list[Any]) -> str:
    path = tmp_path / "workload.jsonl"
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return str(path)


def _base(path: str) -> list[str]:
    return [
        "cache",
        "--vllm",
        "0.26",
        path,
        "--model",
        LLAMA,
        "--kv-cache-memory",
        "24GiB",
        "--max-model-len",
        "1024",
    ]


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[Any], *args: str
) -> dict[str, Any]:
    path = _write(tmp_path, lines)
    code = main([*_base(path), *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


def test_two_identical_prompts_hit_all_but_the_last_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = _run(capsys, tmp_path, [{"prompt_token_ids": A}, {"prompt_token_ids": A}])
    # 63 hittable tokens, rounded down to full blocks: 48.
    assert data["actual"]["prefix_cache_queries"] == 128
    assert data["actual"]["prefix_cache_hits"] == 48
    assert data["unbounded"]["prefix_cache_hits"] == 48
    assert data["hits_lost_to_eviction"] == 0
    assert data["short_prefix_tokens"] == 0


def test_block_size_32_rounds_the_hit_down_to_32(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [{"prompt_token_ids": A}, {"prompt_token_ids": A}]
    data = _run(capsys, tmp_path, lines, "--block-size", "32")
    assert data["actual"]["block_size"] == 32
    assert data["actual"]["prefix_cache_hits"] == 32


def test_one_running_at_a_time_still_hits_the_freed_blocks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines: list[Any] = [{"prompt_token_ids": A, "output_len": 20}] * 3
    data = _run(capsys, tmp_path, lines, "--max-num-seqs", "1")
    assert data["actual"]["prefix_cache_hits"] == 96


def test_a_ten_token_shared_prefix_cannot_hit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = {"prompt_token_ids": A[:10] + B[:30]}
    second = {"prompt_token_ids": A[:10] + B[30:60]}
    data = _run(capsys, tmp_path, [first, second])
    assert data["actual"]["prefix_cache_hits"] == 0
    assert data["unbounded"]["prefix_cache_hits"] == 0
    assert data["short_prefix_requests"] == 1
    assert data["short_prefix_tokens"] == 10


def test_salt_and_lora_separate_the_caches(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [
        {"prompt_token_ids": A},
        {"prompt_token_ids": A, "cache_salt": "tenant-2"},
        {"prompt_token_ids": A, "lora_name": "adapter"},
    ]
    data = _run(capsys, tmp_path, lines)
    assert data["actual"]["prefix_cache_hits"] == 0
    assert data["short_prefix_tokens"] == 0


def test_eviction_loses_hits_the_unbounded_cache_keeps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 5 usable blocks. A takes 4; B is refused until A finishes, then takes the
    # never-used block and A's last three (tail first); A again finds only its
    # first block: 16 tokens, where an unbounded cache gives 48.
    lines = [{"prompt_token_ids": A}, {"prompt_token_ids": B}, {"prompt_token_ids": A}]
    args = ("--num-gpu-blocks-override", "6", "--max-model-len", "80")
    data = _run(capsys, tmp_path, lines, *args)
    assert data["actual"]["num_blocks"] == 6
    assert data["actual"]["prefix_cache_hits"] == 16
    assert data["unbounded"]["prefix_cache_hits"] == 48
    assert data["hits_lost_to_eviction"] == 32


def test_short_prefix_counts_only_earlier_prompts_in_the_same_namespace() -> None:
    requests = [
        WorkloadRequest(prompt_token_ids=(1, 2, 3, 4)),
        WorkloadRequest(prompt_token_ids=(1, 2, 9)),
        WorkloadRequest(prompt_token_ids=(1, 2, 3), cache_salt="x"),
        WorkloadRequest(prompt_token_ids=(7,)),
    ]
    assert short_prefix_tokens(requests, 16) == (1, 2)


def test_text_report_and_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, [{"prompt_token_ids": A}, {"prompt_token_ids": A}])
    base = ["cache", path, "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "24GiB"]
    assert main([*base, "--max-model-len", "1024"]) == 0
    out = capsys.readouterr().out
    assert "prefix-cache hits:    48 tokens (37.5%)" in out
    assert "no preemption" in out
    sweep = [*base, "--max-model-len", "1024", "--sweep-memory", "64MiB,1GiB"]
    assert main(sweep) == 0
    out = capsys.readouterr().out
    assert "64MiB cannot be served" in out
    assert "#" in out
    assert "37.5%" in out
    assert main([*sweep, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["sweep_memory"]
    assert "error" in rows[0]
    assert rows[1]["actual"]["prefix_cache_hits"] == 48


@pytest.mark.parametrize(
    ("lines", "args", "needle"),
    [
        ([{"prompt_token_ids": A}, "{not json"], (), "line 2"),
        ([{"output_len": 3}], (), "line 1.prompt_token_ids"),
        ([{"prompt_token_ids": [1, -2]}], (), "line 1.prompt_token_ids[1]"),
        ([{"prompt_token_ids": A, "output_len": True}], (), "line 1.output_len"),
        ([{"prompt_token_ids": A, "prompt": "hi"}], (), "line 1.prompt: give exactly one of"),
        ([{"prompt_token_ids": A, "cache_salt": 3}], (), "line 1.cache_salt"),
        (["[1, 2]"], (), "line 1: must be a JSON object"),
        ([""], (), "holds no requests"),
        (
            [{"prompt_token_ids": A, "output_len": 2000}],
            (),
            "line 1.output_len: must fit max_model_len",
        ),
        ([{"prompt_token_ids": A}], ("--max-num-seqs", "0"), "--max-num-seqs"),
        ([{"prompt_token_ids": A}], ("--sweep-memory", "lots"), "--sweep-memory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    lines: list[Any],
    args: tuple[str, ...],
    needle: str,
) -> None:
    path = _write(tmp_path, lines)
    code = main([*_base(path), *args])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("kvpure: error: ")
    assert needle in captured.err


def test_the_model_is_required(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, [{"prompt_token_ids": A}])
    assert main(["cache", path, "--kv-cache-memory", "24GiB"]) == 2
    assert "--model" in capsys.readouterr().err
