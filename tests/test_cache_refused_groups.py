"""A KV cache group the replay does not model is refused, naming the group and its spec.

vLLM 0.26 builds a ``CrossAttentionManager`` for an encoder-decoder model's cross
attention (``single_type_kv_cache_manager.spec_manager_map``); the replay models
full-attention, sliding-window, chunked-local and Mamba groups only, so a trace with
one is refused with a typed error (the project's rule for input outside the model).
"""

from __future__ import annotations

import json

import pytest

from kvpure.cache import replay_trace
from kvpure.cache.errors import UnsupportedTraceError
from tests.conftest import GOLDEN_026

EVICTION = GOLDEN_026 / "cache_replay" / "eviction_lru.json"


def _cross_attention_trace(keep_full_attention: bool) -> dict[str, object]:
    trace: dict[str, object] = json.loads(EVICTION.read_text(encoding="utf-8"))["trace"]
    plan_input = trace["plan_input"]
    assert isinstance(plan_input, dict)
    (layers,) = plan_input["kv_cache_specs"]
    name, spec = next(iter(layers.items()))
    cross = {
        key: value
        for key, value in spec.items()
        if key not in ("head_size_v", "sliding_window", "attention_chunk_size", "non_causal")
    }
    cross["type"] = "CrossAttentionSpec"
    plan_input["vllm_config"]["cache_config"]["num_gpu_blocks_override"] *= 4  # room for two
    plan_input["kv_cache_specs"] = [
        {**({name: spec} if keep_full_attention else {}), "cross": cross}
    ]
    return trace


@pytest.mark.parametrize(("keep_full_attention", "group"), [(False, 0), (True, 1)])
def test_a_cross_attention_group_is_refused_by_its_index_and_type(
    keep_full_attention: bool, group: int
) -> None:
    with pytest.raises(UnsupportedTraceError) as info:
        replay_trace(_cross_attention_trace(keep_full_attention), vllm_version="0.26")
    assert info.value.feature == f"kv_cache_groups[{group}] (CrossAttentionSpec)"
