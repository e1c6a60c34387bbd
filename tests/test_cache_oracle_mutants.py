"""Hand-made traces against the real vLLM 0.26.0 KVCacheManager (issue 24's mutation round).

``tests/data/vllm-0.26.0-oracle/cache_replay_mutants.json`` holds the traces of
``tools/vllm_oracle/gen_mutant_cache_traces.py`` and what vLLM 0.26.0's own manager
did on each (``tools/vllm_oracle/cache_replay_vllm.py``). Each trace reaches a corner
of the cache managers that the random traces of ``test_cache_oracle.py`` miss (its
``description`` says which). A trace's ``oracle_overrides`` replaces fields of the
replay config that no trace can set; the oracle replaced the same fields before
building vLLM's manager.
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import replace
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from tests.conftest import DATA_DIR

# the module, not the function of the same name that kvpure.cache exports
replay_module = importlib.import_module("kvpure.cache.replay")

ORACLE: dict[str, Any] = json.loads(
    (DATA_DIR / "vllm-0.26.0-oracle" / "cache_replay_mutants.json").read_text(encoding="utf-8")
)
CASES: dict[str, dict[str, Any]] = {case["trace"]["name"]: case for case in ORACLE["cases"]}


def _same(got: Any, want: Any, path: str) -> None:
    if isinstance(want, float) or isinstance(got, float):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15), path
    elif isinstance(want, dict):
        assert isinstance(got, dict), path
        for key, value in want.items():
            _same(got[key], value, f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list), path
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{path}[{i}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def test_every_case_was_replayed_by_vllm() -> None:
    assert ORACLE["meta"]["vllm_version"] == "0.26.0"
    assert all("records" in case["vllm"] for case in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_agrees_with_vllm(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    overrides: dict[str, Any] = case["trace"].get("oracle_overrides") or {}
    if overrides:

        def derive_and_override(*args: Any, **kwargs: Any) -> ReplayConfig:
            return replace(replay_config_from_plan_input(*args, **kwargs), **overrides)

        monkeypatch.setattr(replay_module, "replay_config_from_plan_input", derive_and_override)
    got = replay_trace(case["trace"], vllm_version="0.26")
    _same(got["records"], case["vllm"]["records"], f"{name}.records")
    _same(got["final_state"], case["vllm"]["final_state"], f"{name}.final_state")
