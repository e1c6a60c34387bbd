"""The cache-replay goldens: vLLM 0.26.0's KVCacheManager, record for record.

Expected values are vLLM's own (``tests/data/vllm-0.26.0/cache_replay``,
copied from the shared goldens); the checker compares the kv_cache_config
keys the goldens' README lists, every record field by field (``pool.usage``
to 1e-12 relative) and the final state.
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
from tests.conftest import GOLDEN_026

CACHE_REPLAY_DIR = GOLDEN_026 / "cache_replay"
GOLDEN_FILES = sorted(CACHE_REPLAY_DIR.glob("*.json"))
CONFIG_KEYS = (
    "num_blocks",
    "scheduler_block_size",
    "hash_block_size",
    "max_model_len",
    "max_in_flight_tokens",
    "enable_caching",
    "hash_fn",
    "none_hash",
    "use_eagle",
    "num_lookahead_tokens",
    "null_block_id",
)
GROUP_KEYS = ("layer_names", "kv_cache_spec", "manager")
RECORD_KEYS = ("op", "request_id", "outcome", "request", "events", "prefix_cache_stats")


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _check_pool(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    for key in ("free_queue", "num_free_blocks", "num_cached_hashes"):
        assert got[key] == want[key], f"{where}.{key}"
    assert math.isclose(got["usage"], want["usage"], rel_tol=1e-12, abs_tol=0.0), f"{where}.usage"


def _check(result: dict[str, Any], golden: dict[str, Any]) -> None:
    want_config = golden["kv_cache_config"]
    got_config = result["kv_cache_config"]
    for key in CONFIG_KEYS:
        assert got_config[key] == want_config[key], f"kv_cache_config.{key}"
    assert len(got_config["kv_cache_groups"]) == len(want_config["kv_cache_groups"])
    for i, (got, want) in enumerate(
        zip(got_config["kv_cache_groups"], want_config["kv_cache_groups"], strict=True)
    ):
        for key in GROUP_KEYS:
            assert got[key] == want[key], f"kv_cache_groups[{i}].{key}"
    assert len(result["records"]) == len(golden["records"])
    for i, (got, want) in enumerate(zip(result["records"], golden["records"], strict=True)):
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


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_replay_reproduces_golden(path: Path) -> None:
    golden = _load(path)
    _check(replay_trace(golden["trace"], vllm_version="0.26"), golden)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_command_reproduces_golden_from_whole_file(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="kvpure")
    cache_replay_command.register(parser.add_subparsers())
    args = parser.parse_args(["cache-replay", str(path), "--json", "--vllm", "0.26"])
    assert args.run(args) == 0
    _check(json.loads(capsys.readouterr().out), _load(path))


def test_result_does_not_depend_on_the_interpreters_hash_seed(tmp_path: Path) -> None:
    """Only ``replay.pythonhashseed`` decides NONE_HASH: a subprocess with another seed agrees."""
    import os
    import subprocess
    import sys

    path = CACHE_REPLAY_DIR / "partial_last_block.json"
    code = (
        "import json,sys; from kvpure.cache import replay_trace; "
        "print(json.dumps(replay_trace(json.load(open(sys.argv[1])), vllm_version='0.26')))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, capture_output=True, check=True, text=True
    )
    _check(json.loads(out.stdout), _load(path))
