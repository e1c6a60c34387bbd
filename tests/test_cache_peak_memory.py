"""``kvpure cache --json``'s ``peak_rss_bytes``: the getrusage measurement, in bytes."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.cli.peak_memory import peak_rss_bytes

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")


def test_a_64_mib_allocation_shows_in_the_peak() -> None:
    block = b"x" * (64 * 2**20)
    peak = peak_rss_bytes()
    assert peak is not None
    assert peak >= len(block)


@pytest.mark.parametrize(("platform", "scale"), [("linux", 1024), ("darwin", 1)])
def test_the_larger_of_self_and_children_in_bytes(
    monkeypatch: pytest.MonkeyPatch, platform: str, scale: int
) -> None:
    sizes = {resource.RUSAGE_SELF: 5, resource.RUSAGE_CHILDREN: 7}

    def fake(who: int) -> Any:
        return SimpleNamespace(ru_maxrss=sizes[who])

    monkeypatch.setattr(resource, "getrusage", fake)
    monkeypatch.setattr(sys, "platform", platform)
    assert peak_rss_bytes() == 7 * scale


def test_the_json_report_carries_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"prompt_token_ids": list(range(1, 40))}) + "\n")
    base = ["cache", str(path), "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "24GiB"]
    assert main([*base, "--max-model-len", "1024", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data["peak_rss_bytes"], int)
    assert data["peak_rss_bytes"] >= 16 * 2**20  # an interpreter with kvpure loaded
    sweep = [*base, "--max-model-len", "1024", "--sweep-memory", "1GiB", "--json"]
    assert main(sweep) == 0
    assert json.loads(capsys.readouterr().out)["peak_rss_bytes"] >= data["peak_rss_bytes"]
