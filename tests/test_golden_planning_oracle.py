"""kvpure against the real vLLM 0.26.0 planner on random layouts it planned (tools/vllm_oracle).

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

ORACLE_FILE = DATA_DIR / "vllm-0.26.0-oracle" / "planning_fuzz.json.gz"
DATA: dict[str, Any] = json.loads(gzip.decompress(ORACLE_FILE.read_bytes()))
CASES: list[dict[str, Any]] = DATA["cases"]
# vLLM's assertions, and its crashes on inputs it does not check (AttributeError in the
# TQ merge), are typed ValueError subclasses in kvpure.
STDLIB: dict[str, type[Exception]] = {
    "AssertionError": ValueError,
    "AttributeError": ValueError,
    "ValueError": ValueError,
    "NotImplementedError": NotImplementedError,
}


def test_oracle_file_covers_every_layout_kind() -> None:
    assert DATA["meta"]["vllm_version"] == "0.26.0"
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
