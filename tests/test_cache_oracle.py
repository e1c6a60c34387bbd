"""Random traces over every modelled group kind, against the real vLLM 0.26.0 KVCacheManager.

``tests/data/vllm-0.26.0-oracle/cache_replay_random.json.gz`` holds traces
from ``tools/vllm_oracle/gen_cache_traces.py`` (full attention, sliding
window, chunked local, R-SWA, Mamba "align" and not, hybrids with equal and
different block sizes, EAGLE, prefix caching off; watermarks, the
full-sequence gate, report mode "full", skipped prefix-cache reads) and what
vLLM's own manager did on each (``tools/vllm_oracle/cache_replay_vllm.py``).
"""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import pytest

from kvpure.cache import replay_trace
from tests.conftest import DATA_DIR

ORACLE: dict[str, Any] = json.loads(
    gzip.decompress((DATA_DIR / "vllm-0.26.0-oracle" / "cache_replay_random.json.gz").read_bytes())
)
CASES: list[dict[str, Any]] = ORACLE["cases"]
CHUNK = 25


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


def test_the_cases_cover_every_modelled_kind() -> None:
    kinds = {case["trace"]["name"].rsplit("_", 1)[0] for case in CASES}
    assert {
        "full",
        "sw",
        "chunk",
        "full_sw_bs",
        "full_mamba",
        "sw_mamba",
        "eagle_full_sw",
        "rswa_sw",
    } <= kinds
    assert len(CASES) >= 100


@pytest.mark.parametrize("start", range(0, len(CASES), CHUNK))
def test_replay_agrees_with_vllm(start: int) -> None:
    for case in CASES[start : start + CHUNK]:
        got = replay_trace(case["trace"], vllm_version="0.26")
        name = case["trace"]["name"]
        _same(got["records"], case["vllm"]["records"], f"{name}.records")
        _same(got["final_state"], case["vllm"]["final_state"], f"{name}.final_state")
