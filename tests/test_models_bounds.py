"""config.json values that are impossible or would exhaust memory are typed errors
naming the field the user wrote, before anything is built."""

from __future__ import annotations

from typing import Any

import pytest

from kvpure import Deployment, capacity_report, model_layout, parse_model_config
from kvpure.errors import InvalidFieldError

LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


def _plan(**changes: Any) -> None:
    layout = model_layout(parse_model_config({**LLAMA, **changes}))
    capacity_report(layout, Deployment(kv_cache_memory_bytes=24 * 2**30))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"num_key_value_heads": 64}, "num_key_value_heads"),
        ({"num_key_value_heads": 5}, "num_key_value_heads"),
        ({"hidden_size": 4097}, "hidden_size"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers"),
        ({"num_hidden_layers": 10**6}, "num_hidden_layers"),
        ({"max_position_embeddings": 0}, "max_position_embeddings"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 1e308}}, "rope_scaling.factor"),
        ({"max_position_embeddings": 10**30}, "max_position_embeddings"),
    ],
)
def test_impossible_shapes_name_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        _plan(**changes)
    assert info.value.field == f"config.json {field}"


def test_a_plain_config_still_plans() -> None:
    _plan()


@pytest.mark.parametrize("value", [True, False])
def test_a_bool_is_not_a_count(value: bool) -> None:
    from kvpure import FullAttentionSpec, KVDtype

    with pytest.raises(InvalidFieldError) as info:
        FullAttentionSpec(block_size=value, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
    assert info.value.field == "block_size"
