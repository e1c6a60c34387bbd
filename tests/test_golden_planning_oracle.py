"""kvpure against the real vLLM 0.26.0 planner on layouts it planned (tools/vllm_oracle).

Three files: a stratified sample of random layouts of every spec kind,
full-size layouts shaped like real models (DeepSeek-V4, Qwen3-Next, gpt-oss, ...),
and edge cases (workers without layers, attention-free workers, negative memory).

The expected results were produced by running vLLM's own ``get_kv_cache_configs``
on these inputs (see the file's ``meta``); kvpure must agree field by field,
and fail where vLLM fails (AssertionError -> a kvpure ValueError subclass).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

import kvpure.errors
from kvpure.errors import KVPureError
from kvpure.interop.planning import plan_case
from tests.conftest import DATA_DIR

ORACLE_DIR = DATA_DIR / "vllm-0.26.0-oracle"


def _read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((ORACLE_DIR / name).read_bytes()))
    return data


DATA = _read("planning_fuzz.json.gz")
MODELS = _read("planning_models.json.gz")
EDGES = _read("planning_edges.json.gz")
CASES: list[dict[str, Any]] = DATA["cases"] + MODELS["cases"] + EDGES["cases"]
# vLLM's assertions, and its crashes on inputs it does not check (AttributeError in the
# TQ merge), are typed ValueError subclasses in kvpure.
STDLIB: dict[str, type[Exception]] = {
    "AssertionError": ValueError,
    "AttributeError": ValueError,
    "ZeroDivisionError": ValueError,
    "ValueError": ValueError,
    "NotImplementedError": NotImplementedError,
}


def test_oracle_file_covers_every_layout_kind() -> None:
    assert DATA["meta"]["vllm_version"] == MODELS["meta"]["vllm_version"] == "0.26.0"
    assert any(c["kind"].startswith("deepseek_v4/") and "output" in c for c in MODELS["cases"])
    planned = {c["kind"] for c in CASES if "output" in c}
    assert {"dsv4_real", "mamba_aligned", "hybrid_three", "cross", "hidden", "mla"} <= planned


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['kind']}")
def test_matches_real_vllm(case: dict[str, Any]) -> None:
    result = plan_case(case["input"])
    if "error" in case:
        want = case["error"]
        got = result["error"]
        assert got["vllm_type"] == STDLIB[want["type"]].__name__
        assert issubclass(getattr(kvpure.errors, got["type"]), KVPureError)
        if want["type"] in ("ValueError", "NotImplementedError"):
            assert got["message"] == want["message"]
        return
    assert "error" not in result, result.get("error")
    assert result["output"] == case["output"]
    assert result["final_max_model_len"] == case["final_max_model_len"]
    assert result["derived"] == case["derived"]
