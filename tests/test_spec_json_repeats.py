"""The planning-case reader reads a repeated layer spec once, and never lets a repeat
hide a value of the wrong type: ``==`` holds 1, 1.0 and True equal, the reader does not.

Each layer after the first is compared with the previous layer's object, key by key and
type by type, before its spec is shared; anything else is read on its own. Expected
errors are the reader's own typed errors for the same value given alone.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.interop.planning import parse_planner_settings, parse_planning_input
from kvpure.interop.spec_json import parse_kv_cache_spec, parse_layer_specs
from kvpure.settings import PlannerSettings
from tests.conftest import DATA_DIR

CASE: dict[str, Any] = json.loads((DATA_DIR / "vllm-0.26.0" / "llama3_8b.json").read_text())[
    "input"
]
LAYERS: dict[str, Any] = CASE["kv_cache_specs"][0]
FIRST = next(iter(LAYERS))
SECOND = list(LAYERS)[1]


def _with_second(**changes: object) -> dict[str, Any]:
    layers = copy.deepcopy(LAYERS)
    layers[SECOND].update(changes)
    return layers


def test_repeated_layers_share_one_spec() -> None:
    specs = parse_layer_specs(LAYERS, "kv_cache_specs[0]", vllm_version="0.26")
    assert len(specs) == len(LAYERS) == 32
    assert all(spec is specs[FIRST] for spec in specs.ordered_values())
    assert specs[FIRST] == parse_kv_cache_spec(LAYERS[FIRST], vllm_version="0.26")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("head_size", 128.0, "must be an integer"),
        ("num_kv_heads", 8.0, "must be an integer"),
        ("non_causal", 0, "must be true or false"),
        ("indexes_kv_by_block_stride", 1, "must be true or false"),
    ],
)
def test_an_equal_value_of_another_type_is_refused(field: str, value: object, reason: str) -> None:
    layers = _with_second(**{field: value})
    assert layers[SECOND] == LAYERS[FIRST]  # equal by ==: only the type differs
    with pytest.raises(InvalidFieldError) as caught:
        parse_layer_specs(layers, "kv_cache_specs[0]", vllm_version="0.26")
    assert caught.value.field == f"kv_cache_specs[0].{SECOND}.{field}"
    assert reason in str(caught.value)


def test_keys_in_another_order_are_compared_key_by_key() -> None:
    swapped = dict(reversed(list(LAYERS[FIRST].items())))
    swapped["non_causal"] = 0
    layers = copy.deepcopy(LAYERS)
    layers[SECOND] = swapped
    with pytest.raises(InvalidFieldError, match="must be true or false"):
        parse_layer_specs(layers, vllm_version="0.26")
    layers[SECOND] = dict(reversed(list(LAYERS[FIRST].items())))
    specs = parse_layer_specs(layers, vllm_version="0.26")
    assert specs[SECOND] == specs[FIRST]


def test_derived_page_sizes_are_not_read() -> None:
    layers = _with_second(_derived={"page_size_bytes": 1})
    specs = parse_layer_specs(layers, vllm_version="0.26")
    assert specs[SECOND] == specs[FIRST]


def test_a_different_layer_after_a_repeat_is_read() -> None:
    layers = _with_second(num_kv_heads=4)
    specs = parse_layer_specs(layers, vllm_version="0.26")
    assert specs[SECOND].num_kv_heads == 4  # type: ignore[attr-defined]  # an attention spec
    third = list(LAYERS)[2]
    assert specs[third] == specs[FIRST]


def test_settings_left_out_take_the_defaults() -> None:
    config = {
        "cache_config": {"block_size": 16},
        "parallel_config": {},
        "scheduler_config": {"max_num_batched_tokens": 2048},
        "model_config": {"max_model_len": 4096},
    }
    settings = parse_planner_settings(config, vllm_version="0.26")
    defaults = PlannerSettings()
    assert settings.enable_prefix_caching == defaults.enable_prefix_caching
    assert settings.tensor_parallel_size == defaults.tensor_parallel_size == 1
    assert settings.block_size == 16
    assert settings.max_num_batched_tokens == 2048
    assert settings.max_model_len == 4096


@pytest.mark.parametrize(
    ("section", "key", "value", "reason"),
    [
        ("cache_config", "block_size", "16", "must be an integer"),
        ("cache_config", "block_size", True, "must be an integer"),
        ("cache_config", "enable_prefix_caching", 1, "must be true or false"),
        ("cache_config", "cache_dtype", 3, "must be a string"),
        ("cache_config", "block_size", None, "must not be null"),
    ],
)
def test_settings_errors_name_the_field(section: str, key: str, value: object, reason: str) -> None:
    case = copy.deepcopy(CASE)
    case["vllm_config"][section][key] = value
    with pytest.raises(InvalidFieldError) as caught:
        parse_planning_input(case, vllm_version="0.26")
    assert caught.value.field == f"vllm_config.{section}.{key}"
    assert reason in str(caught.value)


def test_a_missing_section_is_named() -> None:
    case = copy.deepcopy(CASE)
    del case["vllm_config"]["model_config"]
    with pytest.raises(InvalidFieldError) as caught:
        parse_planning_input(case, vllm_version="0.26")
    assert caught.value.field == "vllm_config.model_config"
