"""The 30 planning goldens of vLLM 0.34.0, compared field by field (floats to 1e-12).

The expected values are vLLM 0.34.0's own output (``tests/data/vllm-0.34.0/``). vLLM
0.33 plans identically (same numbers); its spec objects lack ``kv_head_major_slots``
and ``MambaSpec.state_alignment``, and its hint sentences differ (README there).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kvpure.errors import InsufficientKVCacheMemoryError, InvalidFieldError, KVPureError
from kvpure.interop.planning import parse_planning_input, plan_case, plan_input

GOLDEN_034 = Path(__file__).parent / "data" / "vllm-0.34.0"
CASES = sorted(
    p
    for p in GOLDEN_034.glob("*.json")
    if "vllm_config" in json.loads(p.read_text()).get("input", {})
)
COMPARED = ("final_max_model_len", "output", "derived")
NOT_IN_0_33 = {"kv_head_major_slots", "state_alignment"}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def assert_same(got: object, want: object, path: str = "") -> None:
    """``got`` equals ``want``: same keys in the same order, floats to 1e-12."""
    if isinstance(want, float) or isinstance(got, float):
        assert isinstance(got, int | float), path
        assert isinstance(want, int | float), path
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {got} {want}"
    elif isinstance(want, dict):
        assert isinstance(got, dict), path
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list), path
        assert len(got) == len(want), f"{path}: length"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{path}[{i}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def _without_0_34_fields(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_0_34_fields(v) for k, v in value.items() if k not in NOT_IN_0_33}
    if isinstance(value, list):
        return [_without_0_34_fields(v) for v in value]
    return value


def test_thirty_planning_cases_one_expected_failure() -> None:
    assert len(CASES) == 30
    assert [p.stem for p in CASES if "error" in _load(p)] == ["llama3_8b_not_enough_memory"]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden_case_034(path: Path) -> None:
    case = _load(path)
    result = plan_case(case["input"], vllm_version="0.34")
    if "error" in case:
        assert result["error"]["vllm_type"] == case["error"]["type"]
        assert result["error"]["message"] == case["error"]["message"]
        return
    assert result["vllm_version"] == "0.34"
    for key in COMPARED:
        assert_same(result[key], case[key], key)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden_case_033_same_numbers(path: Path) -> None:
    case = _load(path)
    result = plan_case(case["input"], vllm_version="0.33.0")
    if "error" in case:
        assert result["error"]["vllm_type"] == case["error"]["type"]
        # Same numbers, 0.33's wording of the hint.
        want = re.findall(r"\d+(?:\.\d+)?", case["error"]["message"].split("Try increasing")[0])
        got = re.findall(r"\d+(?:\.\d+)?", result["error"]["message"].split("Try increasing")[0])
        assert got == want
        assert "Decreasing `max_model_len` also reduces" not in result["error"]["message"]
        return
    assert result["vllm_version"] == "0.33"
    for key in COMPARED:
        assert_same(result[key], _without_0_34_fields(case[key]), key)


def test_default_release_is_0_34_and_the_case_key_selects() -> None:
    case = _load(GOLDEN_034 / "llama3_8b_autofit_max_model_len.json")
    default = plan_case(case["input"])
    assert default["vllm_version"] == "0.34"
    assert default["final_max_model_len"] == case["final_max_model_len"] == 49136
    pinned = {**case, "vllm_version": "0.33"}  # beside "input"; meta is never read
    assert plan_case(pinned)["vllm_version"] == "0.33"
    assert plan_case(pinned, vllm_version="0.34.0")["vllm_version"] == "0.34"
    alone = {**case["input"], "vllm_version": "0.33"}  # beside "vllm_config"
    assert plan_case(alone)["vllm_version"] == "0.33"
    # 0.26's classes have no 0.34 fields: the reader names the first one.
    with pytest.raises(InvalidFieldError, match="dcp_sharded: not a field of FullAttentionSpec"):
        plan_case(case, vllm_version="0.26")


def test_not_enough_memory_is_a_typed_error_with_vllm_numbers() -> None:
    case = _load(GOLDEN_034 / "llama3_8b_not_enough_memory.json")
    parsed = parse_planning_input(case["input"], vllm_version="0.34")
    with pytest.raises(InsufficientKVCacheMemoryError) as info:
        plan_input(parsed)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, KVPureError)
    assert info.value.estimated_max_model_len == 32752
    assert info.value.max_model_len == 131072


@pytest.mark.parametrize(
    "path", [p for p in CASES if "error" not in _load(p)], ids=lambda p: p.stem
)
def test_null_block_held_back(path: Path) -> None:
    """0.34 plans for num_blocks - 1 usable blocks: a max-length request fits in them."""
    case = _load(path)
    plan = plan_input(parse_planning_input(case["input"], vllm_version="0.34"))
    for config, facts in zip(plan.kv_cache_configs, plan.workers, strict=True):
        if not config.kv_cache_groups:
            continue
        usable = (config.num_blocks - 1) * facts.pool_bytes_per_block
        assert facts.max_memory_usage_bytes_from_groups <= usable
