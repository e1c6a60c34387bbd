"""Weights from config.json, part by part, equal to what vLLM 0.34's own classes allocate.

The families vLLM 0.26 could not build on CPU (``vllm.third_party`` is absent from the
unpacked wheel, and more: docs/memory-profile.md) are built by vLLM 0.34's model classes
instead, on the meta device at TP 1 in bfloat16
(``tools/model_configs/vllm_weight_counts.py`` run with vLLM 0.34's source, its
``vllm/third_party`` unpacked too): ``tests/data/model_configs/vllm_weight_counts_034.json``
keeps every parameter and buffer summed per top-level module. Qwen3-Next and Qwen3.5 /
Qwen3.6 (dense and MoE) hold gated-delta-net layers
(:mod:`kvpure.memory_profile.gdn_layers`); vLLM 0.34 builds Qwen3.5's MRoPE cache with one
row per position (0.26: four), so the comparison passes ``mrope_positions_factor=1``.
DeepSeek-V3.2 adds its sparse indexer and the indexer's own rotary; Ministral-3 its
Pixtral rotary's frequency buffers; InternLM2.5's LM head is vLLM's ``output`` module;
Kimi-Linear its KDA layers (:func:`kvpure.memory_profile.gdn_layers.kimi_delta_attention`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors
from kvpure.memory_profile.sharding import (
    Parallelism,
    ShardKind,
    classify,
)
from kvpure.memory_profile.weights import worker_weights
from kvpure.models.config import HFConfig, parse_model_config
from tests.test_memory_weights_exact import _kvpure_parts, vllm_part_bytes

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/model_configs"
COUNTS = json.loads((DATA / "vllm_weight_counts_034.json").read_text())

MROPE_FACTOR_034 = 1
"""vLLM 0.34's ``mrope_positions_factor`` for Qwen3-VL / Qwen3.5 without video pruning."""


def _config(name: str) -> HFConfig:
    data = json.loads((DATA / name).read_text())
    data.pop("quantization_config", None)  # the counts were built without it
    return parse_model_config(data)


NOT_YET: dict[str, str] = {
    "gemma3n_e4b.json": "Gemma-3n's per-layer intermediate sizes, AltUp, LAuReL and "
    "per-layer embeddings, and its audio tower, are not in kvpure's layout",
}
"""Models vLLM 0.34 built whose count kvpure does not reach yet (strict xfails)."""


def _params() -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[n]))
        if n in NOT_YET
        else n
        for n in sorted(COUNTS["models"])
    ]


@pytest.mark.parametrize("name", _params())
def test_each_part_equals_vllm_034s_allocation(name: str) -> None:
    vllm = vllm_part_bytes(COUNTS["models"][name]["parts"])
    config = _config(name)
    names = set(COUNTS["models"][name]["parts"])
    assert _kvpure_parts(config, names, mrope_positions_factor=MROPE_FACTOR_034) == vllm
    total = worker_weights(config, Parallelism(), mrope_positions_factor=MROPE_FACTOR_034)
    assert total.bytes_per_worker[0] == sum(vllm.values())


def test_the_034_counts_name_their_release() -> None:
    assert COUNTS["vllm_version"] == "0.34.0"
    assert COUNTS["tensor_parallel_size"] == 1
    assert set(COUNTS["models"]) == {
        "qwen3_next_80b_a3b.json",
        "qwen3_5_4b.json",
        "qwen3_6_35b_a3b.json",
        "ministral_3_3b.json",
        "gemma3n_e4b.json",
        "internlm2_5_7b.json",
        "deepseek_v3_2_exp.json",
        "kimi_linear_48b_a3b.json",
    }  # InternLM (v1): vLLM dropped InternLMForCausalLM after 0.23


def test_a_gated_delta_net_layer_by_hand() -> None:
    """By hand from vLLM 0.34's ``Qwen3NextGatedDeltaNet`` for Qwen3-Next-80B-A3B (16 key
    heads of 128, 32 value heads of 128, kernel 4, hidden 2048): in_proj_qkvz 12288 rows,
    in_proj_ba 64, conv1d 8192 x 4, A_log (float32) and dt_bias 32, norm 128, out_proj
    2048 x 4096."""
    tensors = checkpoint_tensors(_config("qwen3_next_80b_a3b.json"))
    layer = {t.name.removeprefix("model.layers.0."): t for t in tensors if ".layers.0." in t.name}
    mixer = {k: v.shape for k, v in layer.items() if k.startswith("linear_attn.")}
    assert mixer == {
        "linear_attn.in_proj_qkvz.weight": (12288, 2048),
        "linear_attn.in_proj_ba.weight": (64, 2048),
        "linear_attn.conv1d.weight": (8192, 1, 4),
        "linear_attn.dt_bias": (32,),
        "linear_attn.A_log": (32,),
        "linear_attn.norm.weight": (128,),
        "linear_attn.out_proj.weight": (2048, 4096),
    }
    attention = {t.name: t.shape for t in tensors if t.name.startswith("model.layers.3.self_attn")}
    assert attention["model.layers.3.self_attn.q_proj.weight"] == (2 * 16 * 256, 2048)  # gated


def test_gated_delta_net_projections_split_over_tp() -> None:
    """vLLM builds in_proj_qkvz / in_proj_ba (Qwen3.5's checkpoint: in_proj_qkv, _z, _b,
    _a) as column-parallel layers and out_proj as a row-parallel one."""
    p = "model.layers.0.linear_attn"
    for name in (
        "in_proj_qkvz",
        "in_proj_ba",
        "in_proj_qkv",
        "in_proj_z",
        "in_proj_b",
        "in_proj_a",
    ):
        assert classify(f"{p}.{name}.weight") is ShardKind.COLUMN
    assert classify(f"{p}.out_proj.weight") is ShardKind.ROW
    assert classify(f"{p}.norm.weight") is ShardKind.REPLICATED


def test_the_mrope_factor_is_the_only_release_difference_on_qwen3_vl() -> None:
    """vLLM 0.34 built Qwen3-VL-8B with the same bytes as 0.26 but for its MRoPE cache:
    262,144 positions x 128 rotary dims x 2 B, once instead of four times (201,326,592 B
    less; the tool's control run, docs/memory-profile.md)."""
    old = json.loads((DATA / "vllm_weight_counts.json").read_text())["models"]["qwen3_vl_8b.json"]
    total_026 = sum(p["param_bytes"] + p["buffer_bytes"] for p in old["parts"].values())
    config = _config("qwen3_vl_8b.json")
    got = worker_weights(config, Parallelism(), mrope_positions_factor=MROPE_FACTOR_034)
    assert got.bytes_per_worker[0] == total_026 - 201_326_592
