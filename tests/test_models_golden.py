"""Bundled config.json files + the goldens' settings -> exactly the goldens' specs and plans.

Each golden planning case of a realistic model (vLLM 0.26.0's own output)
is reproduced from the bundled config.json with the deployment options the
case used: the specs (layer order and every field), the planner settings,
and then the plan (output, final max_model_len and derived facts) equal the
golden's, number for number. The golden specs are read with
``kvpure.interop.planning``, independently of the derivation under test.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli.plan_options import deployment_from_options
from kvpure.errors import KVPureValueError
from kvpure.interop.planning import parse_planning_input, render_plan
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs
from kvpure.planning.planner import get_kv_cache_configs
from tests.conftest import GOLDEN_026

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_026 / name).read_text())
    return data


def llama31_like() -> dict[str, Any]:
    """Llama-3-8B with Llama-3.1's 128K context (llama3 RoPE scaling: no length factor)."""
    return example("llama3_8b.json") | {
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "factor": 8.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    }


def mamba_hybrid_like() -> dict[str, Any]:
    """A Granite-4.0-H family config with the golden hybrid's layout.

    32 layers, attention at 7, 15, 23, 31 (8 KV heads of 128), Mamba2 mixers
    elsewhere with 128 heads of 64, d_state 128, 8 groups, expand 2 over
    hidden 4096: conv state (8192 + 2*8*128, 4 - 1) = (10240, 3), SSM state
    (128, 64, 128).
    """
    return example("granite_4_0_h_small.json") | {
        "num_hidden_layers": 32,
        "mamba_n_groups": 8,
        "layer_types": ["attention" if i % 8 == 7 else "mamba" for i in range(32)],
    }


GIB = 2**30

# (golden case, config, deployment options as typed on the command line)
CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("llama3_8b.json", example("llama3_8b.json"), {"kv_cache_memory": "16GiB"}),
    (
        "llama3_8b_pp2.json",
        example("llama3_8b.json"),
        {"kv_cache_memory": "6GiB", "pipeline_parallel_size": "2"},
    ),
    (
        "llama3_8b_autofit_max_model_len.json",
        llama31_like(),
        {"kv_cache_memory": "6GiB", "max_model_len": "auto"},
    ),
    (
        "gemma3_12b.json",
        example("gemma3_12b.json"),
        {"kv_cache_memory": "20GiB", "max_model_len": "32768"},
    ),
    ("gpt_oss_20b.json", example("gpt_oss_20b.json"), {"kv_cache_memory": "40GiB"}),
    ("deepseek_v3_mla.json", example("deepseek_v3.json"), {"kv_cache_memory": "40GiB"}),
    (
        "mamba_hybrid_4attn_28mamba.json",
        mamba_hybrid_like(),
        {"kv_cache_memory": "24GiB", "max_model_len": "65536"},
    ),
]


def derive(config: dict[str, Any], options: dict[str, str]) -> DerivedSpecs:
    layout = model_layout(parse_model_config(config))
    # The goldens are vLLM 0.26's, with async scheduling off (their scheduler_config says so).
    deployment = deployment_from_options(options, vllm_version="0.26", async_scheduling=False)
    return derive_kv_cache_specs(layout, deployment)


@pytest.mark.parametrize(("case", "config", "options"), CASES, ids=[c[0] for c in CASES])
def test_derived_specs_equal_the_goldens(
    case: str, config: dict[str, Any], options: dict[str, str]
) -> None:
    data = golden(case)
    expected = parse_planning_input(data["input"], vllm_version="0.26")
    derived = derive(config, options)
    assert len(derived.kv_cache_specs) == len(expected.kv_cache_specs)
    for mine, theirs in zip(derived.kv_cache_specs, expected.kv_cache_specs, strict=True):
        assert mine.names == theirs.names
        assert mine.ordered_values() == theirs.ordered_values()
    # The golden records vLLM's config after auto-fit edited max_model_len in place.
    settings = derived.settings
    if expected.settings.auto_fit_max_model_len:
        assert settings.max_model_len == 131072
        settings = settings.with_max_model_len(expected.settings.max_model_len)
    # The goldens are 0.26's (their input names no release; the reader's default is 0.34).
    assert settings == replace(expected.settings, vllm_version="0.26")


@pytest.mark.parametrize(("case", "config", "options"), CASES, ids=[c[0] for c in CASES])
def test_plans_from_derived_specs_equal_the_goldens(
    case: str, config: dict[str, Any], options: dict[str, str]
) -> None:
    data = golden(case)
    derived = derive(config, options)
    memory = tuple(data["input"]["available_memory"])
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, memory)
    rendered = render_plan(plan)
    assert rendered["output"] == data["output"]
    assert rendered["final_max_model_len"] == data["final_max_model_len"]
    assert rendered["derived"] == data["derived"]


def test_not_enough_memory_is_the_goldens_error() -> None:
    data = golden("llama3_8b_not_enough_memory.json")
    derived = derive(llama31_like(), {"kv_cache_memory": "4GiB", "max_model_len": "131072"})
    expected = parse_planning_input(data["input"], vllm_version="0.26")
    assert derived.kv_cache_specs == expected.kv_cache_specs
    assert derived.settings == replace(expected.settings, vllm_version="0.26")
    with pytest.raises(KVPureValueError) as info:
        get_kv_cache_configs(derived.settings, derived.kv_cache_specs, derived.available_memory)
    message = str(info.value)
    for fact in ("(131072)", "16.0 GiB", "4.0 GiB", "32768"):
        assert fact in data["error"]["message"]
        assert fact in message


def test_pipeline_stages_split_like_vllm_for_the_pp2_golden() -> None:
    derived = derive(
        example("llama3_8b.json"), {"kv_cache_memory": "6GiB", "pipeline_parallel_size": "2"}
    )
    assert derived.pp_layer_ranges == ((0, 16), (16, 32))
