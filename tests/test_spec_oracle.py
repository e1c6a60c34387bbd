"""Every distinct spec of the oracle inputs, built by the real vLLM 0.26.0, against kvpure.

For each: the rendered fields and ``_derived`` page sizes, the kind, the sliding
window, and ``max_memory_usage_bytes`` / ``max_num_blocks_per_req`` under three
settings (see the file's ``meta.settings``).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from kvpure.errors import KVPureError
from kvpure.interop.planning import parse_kv_cache_spec, render_kv_cache_spec
from kvpure.settings import PlannerSettings
from kvpure.specs import get_kv_cache_spec_kind, get_kv_cache_spec_sliding_window
from tests.conftest import DATA_DIR

FACTS: dict[str, Any] = json.loads(
    gzip.decompress((DATA_DIR / "vllm-0.26.0-oracle" / "spec_facts.json.gz").read_bytes())
)
SETTINGS = [
    PlannerSettings(
        max_model_len=s["mml"],
        max_num_batched_tokens=s["mnbt"],
        decode_context_parallel_size=s["dcp"],
        mamba_cache_mode=s["mode"],
        async_scheduling=s["async"],
        pipeline_parallel_size=s["pp"],
        max_num_encoder_input_tokens=1500,
        vllm_version="0.26",
    )
    for s in FACTS["meta"]["settings"]
]
CHUNK = 200
ROWS: list[dict[str, Any]] = FACTS["specs"]


def _value(fn: Any) -> object:
    try:
        return fn()
    except KVPureError as err:
        # vLLM asserts here; kvpure raises a ValueError subclass.
        return {"error": "AssertionError" if isinstance(err, ValueError) else repr(err)}


def test_facts_cover_every_spec_type() -> None:
    types = {row["rendered"]["type"] for row in ROWS}
    assert len(ROWS) > 3000
    assert {"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "SlidingWindowMLASpec",
            "MambaSpec", "ChunkedLocalAttentionSpec", "CrossAttentionSpec", "SinkFullAttentionSpec",
            "HiddenStateCacheSpec", "TQFullAttentionSpec", "RSWASpec",
            "EncoderOnlyAttentionSpec"} <= types  # fmt: skip


@pytest.mark.parametrize("start", range(0, len(ROWS), CHUNK))
def test_specs_match_real_vllm(start: int) -> None:
    for row in ROWS[start : start + CHUNK]:
        spec = parse_kv_cache_spec(row["rendered"], vllm_version="0.26")
        assert render_kv_cache_spec(spec, vllm_version="0.26") == row["rendered"]
        assert get_kv_cache_spec_kind(spec).value == row["kind"]
        assert get_kv_cache_spec_sliding_window(spec) == row["sliding_window"]
        for settings, want in zip(SETTINGS, row["per_settings"], strict=True):
            mml = settings.max_model_len
            memory = _value(lambda sp=spec, s=settings: sp.max_memory_usage_bytes(s))
            blocks = _value(lambda sp=spec, s=settings, m=mml: sp.max_num_blocks_per_req(s, m))
            assert memory == want["max_memory_usage_bytes"]
            assert blocks == want["max_num_blocks_per_req"]
