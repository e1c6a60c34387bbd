"""``kvpure cache`` with ``arrival_time``: requests admitted in arrival order.

Expected hits follow vLLM 0.26's rules by hand, as in tests/test_cache_workload.py:
Llama 3 8B at block size 16, 6 blocks (5 usable), a hit capped at
``num_tokens - 1`` tokens, freed blocks appended to the free queue tail
first-to-last in reverse (the tail block is evicted first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
A = list(range(1, 65))
B = list(range(1001, 1065))
SMALL = ("--num-gpu-blocks-override", "6", "--max-model-len", "80")


def _main(tmp_path: Path, lines: list[Any], *args: str) -> int:
    path = tmp_path / "w.jsonl"
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    base = ["cache", str(path), "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "24GiB"]
    return main([*base, *SMALL, *args])


def _json(capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[Any]) -> dict[str, Any]:
    assert _main(tmp_path, lines, "--json") == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_arrival_order_changes_the_hits_under_eviction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # File order A, B, A: B evicts A's last three blocks before A returns (16 hit tokens).
    untimed = _json(capsys, tmp_path, [{"prompt_token_ids": x} for x in (A, B, A)])
    assert untimed["actual"]["prefix_cache_hits"] == 16
    assert untimed["input"]["arrival_order"] is False
    # The second A arrives before B: it shares A's four running blocks, needs one
    # more (5 usable), and hits 48 tokens; B comes after both finish.
    timed = [
        {"prompt_token_ids": A, "arrival_time": 0},
        {"prompt_token_ids": B, "arrival_time": 2.5},
        {"prompt_token_ids": A, "arrival_time": 1},
    ]
    data = _json(capsys, tmp_path, timed)
    assert data["actual"]["prefix_cache_hits"] == 48
    assert data["unbounded"]["prefix_cache_hits"] == 48
    assert data["hits_lost_to_eviction"] == 0
    assert data["input"]["arrival_order"] is True


def test_ties_keep_file_order(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = [{"prompt_token_ids": x, "arrival_time": 5} for x in (A, B, A)]
    assert _json(capsys, tmp_path, lines)["actual"]["prefix_cache_hits"] == 16


def test_the_text_report_says_arrival_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [{"prompt_token_ids": A, "arrival_time": 0}, {"prompt_token_ids": A, "arrival_time": 1}]
    assert _main(tmp_path, lines) == 0
    out = capsys.readouterr().out
    assert "arrival order:        requests admitted by arrival_time" in out


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        ([{"prompt_token_ids": A, "arrival_time": -1}], "line 1.arrival_time: must be a number"),
        ([{"prompt_token_ids": A, "arrival_time": "0"}], "line 1.arrival_time: must be a number"),
        ([{"prompt_token_ids": A, "arrival_time": True}], "line 1.arrival_time: must be a number"),
        (['{"prompt_token_ids": [1, 2], "arrival_time": NaN}'], "line 1.arrival_time"),
        (
            [{"prompt_token_ids": A, "arrival_time": 0}, {"prompt_token_ids": B}],
            "line 2.arrival_time: is missing: give arrival_time on every line or on none",
        ),
    ],
)
def test_bad_arrival_times_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[Any], needle: str
) -> None:
    assert _main(tmp_path, lines) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert needle in err
