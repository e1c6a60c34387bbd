"""Comparisons shared by the planning golden tests (hand-made and generated goldens)."""

from __future__ import annotations

import json
from typing import Any

from kvpure.interop.planning import parse_kv_cache_spec, render_kv_cache_spec


def assert_plan_matches(result: dict[str, Any], case: dict[str, Any]) -> None:
    """``result`` (a rendered plan) equals the golden ``case`` field by field, in key order."""
    assert result["final_max_model_len"] == case["final_max_model_len"]
    assert len(result["output"]) == len(case["output"])
    for got, want in zip(result["output"], case["output"], strict=True):
        assert got == want
    assert result["derived"] == case["derived"]
    # Key order as vLLM's rendering: JSON text equal, not only dict-equal.
    assert json.dumps(result["output"]) == json.dumps(case["output"])
    assert json.dumps(result["derived"]) == json.dumps(case["derived"])


def assert_input_specs_round_trip(case: dict[str, Any]) -> None:
    """Every input spec reads and renders back as vLLM wrote it, ``_derived`` included."""
    for worker in case["input"]["kv_cache_specs"]:
        for spec_obj in worker.values():
            rendered = render_kv_cache_spec(
                parse_kv_cache_spec(spec_obj, vllm_version="0.26"), vllm_version="0.26"
            )
            assert json.dumps(rendered) == json.dumps(spec_obj)
