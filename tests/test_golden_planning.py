"""Every planning golden of vLLM 0.26.0, compared field by field with kvpure's result."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import kvpure.errors
from kvpure.errors import KVPureError
from kvpure.interop.planning import (
    parse_planning_input,
    plan_case,
    plan_input,
)
from kvpure.planning.log_lines import vllm_log_lines
from tests.conftest import GOLDEN_026
from tests.planning_golden_checks import assert_input_specs_round_trip, assert_plan_matches

NOT_PLANNING = {"hashes.json", "tensor_views.json", "block_pool_traces.json", "kv_events.json"}
CASES = sorted(p for p in GOLDEN_026.glob("*.json") if p.name not in NOT_PLANNING)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_all_planning_goldens_are_found() -> None:
    assert len(CASES) == 36
    assert sum("error" in _load(p) for p in CASES) == 3


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden_case(path: Path) -> None:
    case = _load(path)
    result = plan_case(case["input"], vllm_version="0.26")
    if "error" in case:
        expected = case["error"]
        error = result["error"]
        assert error["vllm_type"] == expected["type"]
        assert error["message"] == expected["message"]
        kv_class = getattr(kvpure.errors, error["type"])
        assert issubclass(kv_class, KVPureError)
        assert issubclass(
            kv_class,
            {"ValueError": ValueError, "NotImplementedError": NotImplementedError}[
                expected["type"]
            ],
        )
        return
    assert list(result) == ["output", "final_max_model_len", "derived"]
    assert_plan_matches(result, case)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden_input_specs_reproduce_derived(path: Path) -> None:
    assert_input_specs_round_trip(_load(path))


@pytest.mark.parametrize("path", [p for p in CASES if "error" in _load(p)], ids=lambda p: p.stem)
def test_golden_failure_raises_typed_error_with_numbers(path: Path) -> None:
    case = _load(path)
    parsed = parse_planning_input(case["input"], vllm_version="0.26")
    stdlib = {"ValueError": ValueError, "NotImplementedError": NotImplementedError}[
        case["error"]["type"]
    ]
    with pytest.raises(stdlib) as info:
        plan_input(parsed)
    assert isinstance(info.value, KVPureError)
    numbers = re.findall(r"\d+(?:\.\d+)?", case["error"]["message"])
    for number in numbers:
        assert number in str(info.value)


AUTO_FIT_REDUCED = re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+) ")


@pytest.mark.parametrize(
    "path", [p for p in CASES if "error" not in _load(p)], ids=lambda p: p.stem
)
def test_golden_logs_rebuilt_from_plan_facts(path: Path) -> None:
    case = _load(path)
    plan = plan_input(parse_planning_input(case["input"], vllm_version="0.26"))
    got = [(line.level, line.msg) for line in vllm_log_lines(plan)]
    want = [(log["level"], log["msg"]) for log in case["logs"]]
    # The goldens' input.vllm_config was recorded after vLLM's in-place auto-fit, so its
    # max_model_len is already the fitted one; only the log line still shows the original.
    # From that input kvpure (correctly) finds the full context fits: compare the fitted value.
    for i, (level, msg) in enumerate(want):
        reduced = AUTO_FIT_REDUCED.match(msg)
        if reduced:
            fitted = int(reduced.group(2))
            assert plan.final_max_model_len == fitted
            assert case["input"]["vllm_config"]["model_config"]["max_model_len"] == fitted
            want[i] = (
                level,
                f"Auto-fit max_model_len: full model context length {fitted} fits in available "
                "GPU memory",
            )
    assert got == want
