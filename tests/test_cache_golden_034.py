"""The vLLM 0.34.0 cache-replay goldens, record by record, under ``--vllm 0.34`` and 0.33.

Expected values are vLLM 0.34.0's own (``tests/data/vllm-0.34.0/cache_replay``, copied
from the shared goldens): the six traces of the 0.26 goldens replayed by 0.34's manager
under 0.34's scheduler rules. 0.33 behaves identically on them (the contract, section 4).
The checker compares the ``kv_cache_config`` keys the contract lists, per group the layer
names and the spec's type and block size, every record field by field (``pool.usage`` to
1e-12) and the final state.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.cli import cache_replay_command
from tests.conftest import DATA_DIR

GOLDEN_DIR = DATA_DIR / "vllm-0.34.0" / "cache_replay"
GOLDEN_FILES = sorted(GOLDEN_DIR.glob("*.json"))
CONFIG_KEYS = (
    "num_blocks",
    "scheduler_block_size",
    "hash_block_size",
    "max_model_len",
    "enable_caching",
    "hash_fn",
    "none_hash",
    "use_eagle",
    "num_lookahead_tokens",
    "num_hash_lookahead_tokens",
    "null_block_id",
)
RECORD_KEYS = ("op", "request_id", "outcome", "request", "events", "prefix_cache_stats")
POOL_KEYS = ("free_queue", "num_free_blocks", "num_cached_hashes")


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _check_pool(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    assert set(got) == set(want), f"{where} keys"
    for key in POOL_KEYS:
        assert got[key] == want[key], f"{where}.{key}"
    assert math.isclose(got["usage"], want["usage"], rel_tol=1e-12, abs_tol=0.0), f"{where}.usage"


def _check(result: dict[str, Any], golden: dict[str, Any], version: str) -> None:
    assert result["vllm_version"] == version
    want_config, got_config = golden["kv_cache_config"], result["kv_cache_config"]
    for key in CONFIG_KEYS:
        assert got_config[key] == want_config[key], f"kv_cache_config.{key}"
    assert len(got_config["kv_cache_groups"]) == len(want_config["kv_cache_groups"])
    for i, (got, want) in enumerate(
        zip(got_config["kv_cache_groups"], want_config["kv_cache_groups"], strict=True)
    ):
        assert got["layer_names"] == want["layer_names"], f"kv_cache_groups[{i}].layer_names"
        for key in ("type", "block_size"):
            assert got["kv_cache_spec"][key] == want["kv_cache_spec"][key], (
                f"kv_cache_groups[{i}].kv_cache_spec.{key}"
            )
    assert len(result["records"]) == len(golden["records"])
    for i, (got, want) in enumerate(zip(result["records"], golden["records"], strict=True)):
        assert set(got) == set(want), f"records[{i}] keys"
        for key in RECORD_KEYS:
            assert got[key] == want[key], f"records[{i}].{key}"
        _check_pool(got["pool"], want["pool"], f"records[{i}].pool")
    assert result["final_state"]["requests"] == golden["final_state"]["requests"]
    _check_pool(result["final_state"]["pool"], golden["final_state"]["pool"], "final_state.pool")


def test_all_six_goldens_are_present() -> None:
    assert [p.stem for p in GOLDEN_FILES] == [
        "eviction_lru",
        "hybrid_full_sliding_window",
        "lora_and_cache_salt",
        "partial_last_block",
        "reset_prefix_cache",
        "shared_system_prompt",
    ]


@pytest.mark.parametrize("version", ["0.34", "0.33"])
@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_replay_reproduces_the_034_golden(path: Path, version: str) -> None:
    golden = _load(path)
    _check(replay_trace(golden["trace"], vllm_version=version), golden, version)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_the_default_release_is_034(path: Path) -> None:
    golden = _load(path)
    _check(replay_trace(golden["trace"]), golden, "0.34")


def _command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kvpure")
    cache_replay_command.register(parser.add_subparsers())
    args = parser.parse_args(["cache-replay", *argv])
    code = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("flag", ["0.34", "0.34.0", "0.33"])
@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_command_reproduces_the_034_golden(
    path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _command([str(path), "--vllm", flag, "--json"], capsys)
    assert code == 0
    _check(json.loads(out), _load(path), flag[:4])


def test_the_trace_key_selects_the_release_and_the_flag_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.26 counts a refused admission's lookup (records[7] of eviction_lru: 1 request, 20
    queries, 4 hits); 0.34 counts none (its golden: 0, 0, 0)."""
    golden = _load(GOLDEN_DIR / "eviction_lru.json")
    trace = golden["trace"]
    trace["vllm_version"] = "0.26.0"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    code, out, _ = _command([str(path), "--json"], capsys)
    assert code == 0
    by_file = json.loads(out)
    assert by_file["vllm_version"] == "0.26"
    stats = by_file["records"][7]["prefix_cache_stats"]
    assert (stats["requests"], stats["queries"], stats["hits"]) == (1, 20, 4)
    assert "hits_by_source" not in stats
    code, out, _ = _command([str(path), "--vllm", "0.34", "--json"], capsys)
    assert code == 0
    _check(json.loads(out), golden, "0.34")


def test_an_unknown_version_is_one_line_naming_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = GOLDEN_DIR / "eviction_lru.json"
    code, out, err = _command([str(path), "--vllm", "0.99"], capsys)
    assert code == 2
    assert out == ""
    assert err == "kvpure: error: --vllm: unknown vLLM version '0.99' (known: 0.26, 0.33, 0.34)\n"


def test_an_unknown_version_in_the_trace_names_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _load(GOLDEN_DIR / "eviction_lru.json")["trace"]
    trace["vllm_version"] = "0.30"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    code, out, err = _command([str(path), "--json"], capsys)
    assert code == 2
    assert json.loads(out)["error"]["type"] == "UnknownVllmVersionError"
    assert err.startswith("kvpure: error: vllm_version: unknown vLLM version '0.30'")
    assert err.count("\n") == 1


def test_the_text_report_names_the_release_first(capsys: pytest.CaptureFixture[str]) -> None:
    path = GOLDEN_DIR / "eviction_lru.json"
    for flag, first in (("0.26", "vLLM 0.26: "), ("0.33", "vLLM 0.33: "), (None, "vLLM 0.34: ")):
        code, out, _ = _command([str(path)] + ([] if flag is None else ["--vllm", flag]), capsys)
        assert code == 0
        assert out.splitlines()[0].startswith(first)


def test_help_lists_the_vllm_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _command(["--help"], capsys)
    assert "--vllm VERSION" in capsys.readouterr().out
