"""Block counts stay exact integers for memory figures past float precision.

vLLM 0.26 divides with Python ints (``get_num_blocks`` in
vllm/v1/core/kv_cache_utils.py: ``int(available_memory // page_size //
num_layers)``), so its count is exact at any size; a float division would
round once the quotient passes 2**53. The expected counts below are that
formula applied to the Llama-3-8B golden layout (32 full-attention layers of
65,536-byte pages, as the golden's ``kv_cache_specs`` give them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.interop.planning import parse_planning_input, plan_input

CASE = Path(__file__).parent / "data" / "vllm-0.26.0" / "llama3_8b.json"
PAGE_BYTES = 65_536
NUM_LAYERS = 32


@pytest.mark.parametrize("memory", [2**62 - 1, 2**80 - 1])
def test_the_block_count_is_vllms_integer_division(memory: int) -> None:
    data = json.loads(CASE.read_text())["input"]
    data["available_memory"] = [memory]
    plan = plan_input(parse_planning_input(data, vllm_version="0.26"))
    config = plan.kv_cache_configs[0]
    spec = config.kv_cache_groups[0].kv_cache_spec
    assert spec.page_size_bytes == PAGE_BYTES
    assert len(config.kv_cache_groups[0].layer_names) == NUM_LAYERS
    expected = memory // PAGE_BYTES // NUM_LAYERS
    assert config.num_blocks == expected
    assert config.num_blocks != int(memory / PAGE_BYTES // NUM_LAYERS)  # float would differ
    assert all(t.size == expected * PAGE_BYTES for t in config.kv_cache_tensors)
