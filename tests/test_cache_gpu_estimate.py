"""``kvpure cache ... --gpu NAME`` without ``--kv-cache-memory``: the memory estimated as by plan.

The analyzer estimates the KV cache memory from the GPU exactly as ``kvpure
plan`` does and replays the workload at the estimate's central figure and at
both ends of its band. The band's figures are checked against ``kvpure plan
--json``'s own memory object for the same model, GPU and flags (the command
the estimate must agree with); the hit rates against replays at those figures
given as ``--kv-cache-memory``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
WORKLOAD = str(ROOT / "examples" / "eviction_workload.jsonl")
#: An L4 at these utilizations leaves Llama-3-8B a KV cache small enough to evict.
FLAGS = ["--gpu", "L4", "--max-model-len", "2048"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    data: dict[str, Any] = json.loads(out)
    return data


def _plan_band(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, list[int]]:
    memory = _json(capsys, "plan", LLAMA, *flags)["memory"]
    return {
        "low": [max(0, w["kv_cache_bytes_low"]) for w in memory],
        "central": [max(0, w["kv_cache_bytes"]) for w in memory],
        "high": [max(0, w["kv_cache_bytes_high"]) for w in memory],
    }


def _hit_rate(capsys: pytest.CaptureFixture[str], memory: list[int], *flags: str) -> float:
    size = ",".join(f"{m}B" for m in memory)
    data = _json(capsys, "cache", WORKLOAD, "--model", LLAMA, *flags, "--kv-cache-memory", size)
    rate: float = data["actual"]["hit_rate"]
    return rate


@pytest.mark.parametrize("utilization", ["0.86", "0.82"])
def test_the_band_is_plans_and_each_end_is_replayed(
    capsys: pytest.CaptureFixture[str], utilization: str
) -> None:
    flags = [*FLAGS, "--gpu-memory-utilization", utilization]
    data = _json(capsys, "cache", WORKLOAD, "--model", LLAMA, *flags)
    estimate = data["kv_cache_memory_estimate"]
    assert estimate["estimated"] is True
    plan = _plan_band(capsys, *flags)
    assert {end: estimate[end] for end in ("low", "central", "high")} == plan
    assert estimate["gpu_memory_utilization"] == float(utilization)
    # the report is the central figure's: the same as giving that figure as --kv-cache-memory
    central = _hit_rate(capsys, plan["central"], *FLAGS)
    assert data["actual"]["hit_rate"] == central
    low, high = data["hit_rate_band"]
    assert high == _hit_rate(capsys, plan["high"], *FLAGS)
    if low is None:  # that end leaves too little memory to serve a request
        assert "low" in data["hit_rate_band_unserved"]
    else:
        assert low == _hit_rate(capsys, plan["low"], *FLAGS)
        assert low <= central
    assert central <= high


def test_the_band_shows_eviction_at_the_low_end(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.83: with the L4's recorded torch total (22.05 GiB) the band is narrower than
    # with the driver fallback, and the low end evicts from about here down (0.84
    # before Model Runner V2's sampler peak -- logits kept in bf16 -- was modelled).
    flags = [*FLAGS, "--gpu-memory-utilization", "0.83"]
    data = _json(capsys, "cache", WORKLOAD, "--model", LLAMA, *flags)
    low, high = data["hit_rate_band"]
    assert low < data["actual"]["hit_rate"] <= high  # the workload evicts at the low end


def test_text_report_names_the_estimate_and_the_band(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.79 (0.81 before Model Runner V2's sampler peak, logits in bf16, was modelled)
    flags = [*FLAGS, "--gpu-memory-utilization", "0.79"]
    assert main(["cache", WORKLOAD, "--model", LLAMA, *flags]) == 0
    out = capsys.readouterr().out
    assert "estimated from the GPU" in out
    assert "hit rate band:" in out
    assert "low end cannot be served" in out


def test_vllm_release_reaches_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    flags = [*FLAGS, "--vllm", "0.26"]
    data = _json(capsys, "cache", WORKLOAD, "--model", LLAMA, *flags)
    plan = _plan_band(capsys, *flags)
    assert data["kv_cache_memory_estimate"]["central"] == plan["central"]
    # 0.26's default utilization (0.92), not 0.34's 1.0 under the extensible KV cache
    assert data["kv_cache_memory_estimate"]["gpu_memory_utilization"] == 0.92


def test_neither_memory_nor_gpu_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", WORKLOAD, "--model", LLAMA]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("kvpure: error: --kv-cache-memory is required")
    assert "--gpu" in err


def test_an_estimate_option_with_a_given_memory_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["cache", WORKLOAD, "--model", LLAMA, "--kv-cache-memory", "1GiB"]
    assert main([*args, "--gpu-memory-utilization", "0.9"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--gpu-memory-utilization" in err


def test_help_no_longer_calls_the_memory_required(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("cache", "plan"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        option = "\n  --kv-cache-memory SIZE"
        assert option in text
        block = text[text.index(option) + 1 :].split("\n  -", 1)[0]
        assert "required" not in block
        assert "estimated from --gpu" in " ".join(block.split())
