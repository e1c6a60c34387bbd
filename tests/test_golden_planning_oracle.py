"""kvpure against the real vLLM 0.26.0 planner on layouts it planned (tools/vllm_oracle).

Three files: a stratified sample of random layouts of every spec kind,
full-size layouts shaped like real models (DeepSeek-V4, Qwen3-Next, gpt-oss, ...),
and edge cases (workers without layers, attention-free workers, negative memory).

The expected results were produced by running vLLM's own ``get_kv_cache_configs``
on these inputs (see the file's ``meta``); kvpure must agree field by field,
and fail where vLLM fails (AssertionError -> a kvpure ValueError subclass) with
vLLM's message: word for word for vLLM's ValueErrors, and for its assertions and
crashes the reason vLLM's failing frame shows (``planning_error_details.json``,
from ``tools/vllm_oracle/error_details_vllm.py``: the source line, the message and
the frame's values).
"""

from __future__ import annotations

import gzip
import json
import re
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
FILES = {
    "planning_fuzz.json.gz": DATA,
    "planning_models.json.gz": MODELS,
    "planning_edges.json.gz": EDGES,
}
ERROR_DETAILS: list[dict[str, Any]] = json.loads(
    (ORACLE_DIR / "planning_error_details.json").read_text()
)["cases"]
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
    result = plan_case(case["input"], vllm_version="0.26")
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


def test_error_details_cover_every_assertion_and_crash() -> None:
    expected = [
        (name, index)
        for name, data in FILES.items()
        for index, case in enumerate(data["cases"])
        if "error" in case and case["error"]["type"] not in ("ValueError", "NotImplementedError")
    ]
    assert [(d["file"], d["index"]) for d in ERROR_DETAILS] == expected
    assert len(expected) == 24
    for detail in ERROR_DETAILS:
        recorded = FILES[detail["file"]]["cases"][detail["index"]]["error"]
        assert (detail["type"], detail["message"]) == (recorded["type"], recorded["message"])


@pytest.mark.parametrize(
    "detail", ERROR_DETAILS, ids=lambda d: f"{d['kind']}-{d['function']}-{d['index']}"
)
def test_error_message_carries_vllms_reason(detail: dict[str, Any]) -> None:
    """kvpure's message for vLLM's assertions and crashes says what vLLM's frame shows."""
    case = FILES[detail["file"]]["cases"][detail["index"]]
    message: str = plan_case(case["input"], vllm_version="0.26")["error"]["message"]
    vllm_message: str = detail["message"]
    frame: dict[str, Any] = detail["locals"]
    checked = False
    if detail["type"] == "AssertionError" and vllm_message:
        # vLLM's own words, up to its first full stop
        assert vllm_message.split(".")[0] in message
        checked = True
    if "decode_context_parallel_size" in detail["source_line"]:
        dcp = case["input"]["vllm_config"]["parallel_config"]["decode_context_parallel_size"]
        assert message.endswith(f"needs decode_context_parallel_size == 1, got {dcp}.")
    if "sm_page_sizes" in frame:
        # `assert max(sm_page_sizes) <= max(all_page_sizes)`, with vLLM's page sizes
        assert f"sliding-window page ({max(frame['sm_page_sizes'])} bytes)" in message
        assert f"(largest {max(frame['all_page_sizes'])} bytes)" in message
        checked = True
    if "layer_name" in frame and detail["type"] == "AssertionError":
        assert f"layer {frame['layer_name']} " in message
    if detail["type"] == "AttributeError":
        found = re.fullmatch(r"'(\w+)' object has no attribute '(\w+)'", vllm_message)
        assert found is not None
        assert found[1] in message
        assert found[2] in message
        checked = True
    if detail["type"] == "ZeroDivisionError":
        # vLLM divides by a worker's bytes per block, which is zero
        assert frame.get("bytes_per_block", frame.get("b")) == 0
        assert "zero bytes per block" in message
        checked = True
    assert checked, detail


def test_readme_and_docs_count_the_layouts_loaded_here() -> None:
    root = DATA_DIR.parents[1]
    readme = (root / "README.md").read_text()
    planning_doc = (root / "docs" / "planning.md").read_text()
    assert f"{len(CASES)} oracle layouts" in readme
    assert f"`tests/data/vllm-0.26.0-oracle/` holds {len(CASES)}\n" in planning_doc
