"""The forward term's MLP width from config.json (``model_traits.dense_mlp_width``).

Expected widths are read from vLLM 0.26's model files: qwen3_moe.py and mixtral.py build
a sparse MoE block in every layer and no dense MLP; gpt_oss.py likewise; deepseek_v2.py
builds ``DeepseekV2MLP`` of ``intermediate_size`` for the first ``first_k_dense_replace``
layers; qwen2_moe.py adds a shared expert of ``shared_expert_intermediate_size``;
kimi_k2 (DeepSeek-V3) keeps one dense first layer; granitemoe.py routes every layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.memory_profile.budget import model_shape
from kvpure.memory_profile.checkpoint_tensors import language_config
from kvpure.memory_profile.model_traits import dense_mlp_width
from kvpure.models.config import HFConfig, parse_model_config

CONFIGS = Path(__file__).resolve().parent / "data" / "model_configs"


def _config(name: str) -> HFConfig:
    return parse_model_config(json.loads((CONFIGS / name).read_text()))


@pytest.mark.parametrize(
    ("name", "width"),
    [
        ("qwen3_30b_a3b.json", 0),
        ("mixtral_8x7b.json", 0),
        ("granite_3_1_3b_a800m.json", 0),
        ("deepseek_v2_lite.json", 10944),
        ("qwen1_5_moe_a2_7b.json", 5632),
        ("kimi_k2_instruct.json", 18432),
        ("llama3_1_8b.json", 14336),
    ],
)
def test_the_widest_mlp_run_densely(name: str, width: int) -> None:
    config = _config(name)
    assert dense_mlp_width(language_config(config)) == width
    shape = model_shape(config)
    assert shape.dense_mlp_width == width


def test_a_dense_model_keeps_intermediate_size() -> None:
    shape = model_shape(_config("llama3_1_8b.json"))
    assert shape.dense_intermediate_size is None
    assert shape.dense_mlp_width == shape.intermediate_size == 14336


def test_shared_experts_set_the_width_when_every_layer_routes() -> None:
    base = json.loads((CONFIGS / "qwen3_30b_a3b.json").read_text())
    shared = parse_model_config({**base, "n_shared_experts": 2})
    assert dense_mlp_width(shared) == 2 * base["moe_intermediate_size"]
    dense_first = parse_model_config({**base, "mlp_only_layers": [0]})
    assert dense_mlp_width(dense_first) == base["intermediate_size"]
    llama4 = {**base, "model_type": "llama4_text", "intermediate_size_mlp": 16384}
    assert dense_mlp_width(parse_model_config(llama4)) == base["moe_intermediate_size"]
