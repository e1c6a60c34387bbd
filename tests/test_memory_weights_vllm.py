"""Weights from config.json against vLLM's own counts and its logged "Model loading took".

Sources of the expected values:

- ``tests/data/model_configs/vllm_weight_counts.json``: every parameter and buffer of
  vLLM 0.26's own model classes, built on the meta device at TP 1 in bfloat16
  (``tools/model_configs/vllm_weight_counts.py``), summed per top-level module;
- logged weights: vLLM 0.19 on an H100 80GB, "Model loading took X GiB" in the
  llm-d-planner accuracy logs (records in ``tests/data/memory_logs`` with their URLs;
  gpt-oss-20b at TP 1, 13.64 GiB, is from the same campaign's report, see
  docs/memory-profile.md);
- MXFP4 expert shapes: ``Mxfp4MoEMethod.create_weights`` and
  ``mxfp4_round_up_hidden_size_and_intermediate_size`` (vLLM 0.34,
  vllm/model_executor/layers/quantization/mxfp4.py and fused_moe/oracle/mxfp4.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.memory_profile.buffers import rotary_cache_bytes, rotary_caches
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors, language_config
from kvpure.memory_profile.encoders import encoder_shape
from kvpure.memory_profile.quantized_experts import (
    mxfp4_expert_bytes_per_rank,
    mxfp4_experts_per_worker,
)
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import worker_weights
from kvpure.models.config import HFConfig, parse_model_config

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30
COUNTS = json.loads((ROOT / "tests/data/model_configs/vllm_weight_counts.json").read_text())
CONFIG_FILES = {
    "llama4_scout.json": ROOT / "examples/llama4_scout.json",
    "gpt_oss_20b.json": ROOT / "examples/gpt_oss_20b.json",
    "llama3_8b.json": ROOT / "examples/llama3_8b.json",
    "kimi_vl_a3b.json": ROOT / "tests/data/weight_configs/kimi_vl_a3b.json",
}
ENCODER_PARTS = ("vision_tower", "vision_model", "visual", "multi_modal_projector")


def _config(name: str, *, unquantized: bool = False) -> HFConfig:
    path = CONFIG_FILES.get(name, ROOT / "tests/data/model_configs" / name)
    data = json.loads(path.read_text())
    if unquantized:
        data.pop("quantization_config", None)  # the counts were built without it
    return parse_model_config(data)


def _parts(name: str) -> dict[str, dict[str, int]]:
    parts: dict[str, dict[str, int]] = COUNTS["models"][name]["parts"]
    return parts


MULTIMODAL = sorted(n for n in COUNTS["models"] if any(p in _parts(n) for p in ENCODER_PARTS))


@pytest.mark.parametrize("name", MULTIMODAL)
def test_vision_tower_and_projector_equal_vllms_parameter_count(name: str) -> None:
    config = _config(name)
    shape = encoder_shape(config, language_config(config).int_("hidden_size"))
    assert shape is not None
    expected = sum(_parts(name)[p]["params"] for p in ENCODER_PARTS if p in _parts(name))
    assert shape.sharded + shape.replicated == expected


def test_multimodal_families_are_all_counted() -> None:
    families = {COUNTS["models"][n]["architecture"] for n in MULTIMODAL}
    assert {
        "Llama4ForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "KimiVLForConditionalGeneration",
    } <= families


@pytest.mark.parametrize("name", sorted(COUNTS["models"]))
def test_rotary_caches_are_the_language_models_buffers(name: str) -> None:
    """vLLM's language-model buffers are its rotary caches plus a few scalars (< 4 KiB)."""
    config = _config(name, unquantized=True)
    text_buffers = sum(
        part["buffer_bytes"] for key, part in _parts(name).items() if key not in ENCODER_PARTS
    )
    rotary = rotary_cache_bytes(language_config(config), dtype_bytes=2)
    assert 0 <= text_buffers - rotary < 4096


def test_rotary_cache_shapes() -> None:
    # Gemma-3-4B: sliding layers 131072 x 256, full layers linear x 8 (bfloat16).
    gemma = language_config(_config("gemma3_4b_hf.json"))
    assert rotary_caches(gemma, dtype_bytes=2) == ((131072 * 8, 256, 2), (131072, 256, 2))
    # Llama-4-Scout: llama3 scaling keeps max_position_embeddings (10,485,760): 2.5 GiB.
    scout = language_config(_config("llama4_scout.json"))
    assert rotary_cache_bytes(scout, dtype_bytes=2) == 10485760 * 128 * 2
    # gpt-oss: yarn (4096 x 32 positions), float32 whatever the model dtype.
    assert rotary_caches(_config("gpt_oss_20b.json"), dtype_bytes=2) == ((131072, 64, 4),)
    # Qwen2.5-VL: MRoPE caches four times the positions.
    qwen = _config("qwen2_5_vl_7b.json")
    assert rotary_caches(qwen, dtype_bytes=2) == ((128000 * 4, 128, 2),)


@pytest.mark.parametrize("name", sorted(COUNTS["models"]))
def test_config_json_weights_equal_vllms_own_allocation(name: str) -> None:
    """Everything vLLM 0.26 allocates for the model at TP 1, to the byte (part by part:
    tests/test_memory_weights_exact.py)."""
    config = _config(name, unquantized=True)
    expected = sum(p["param_bytes"] + p["buffer_bytes"] for p in _parts(name).values())
    got = worker_weights(config, Parallelism()).bytes_per_worker[0]
    assert got == expected


@pytest.mark.parametrize(
    ("name", "tp", "logged_gib"),
    [
        ("llama4_scout.json", 4, 53.12),
        ("gemma3_4b_hf.json", 1, 8.58),
        ("gpt_oss_20b.json", 2, 7.01),
        ("gpt_oss_20b.json", 1, 13.64),
    ],
)
def test_logged_model_loading_falls_in_the_weights_band(
    name: str, tp: int, logged_gib: float
) -> None:
    weights = worker_weights(_config(name), Parallelism(tp=tp))
    got = weights.bytes_per_worker[0]
    assert abs(got - logged_gib * GIB) <= weights.error_bytes(0) + 0.005 * GIB


def test_kimi_vl_is_counted_as_vllm_026_builds_it_but_vllm_019_loads_more() -> None:
    """Known miss: vLLM 0.19 logs 30.74 GiB for Kimi-VL-A3B; vLLM 0.26 builds 30.58."""
    weights = worker_weights(_config("kimi_vl_a3b.json"), Parallelism())
    got = weights.bytes_per_worker[0] / GIB
    assert 30.74 - 0.2 < got < 30.74 - weights.error_bytes(0) / GIB


def test_mxfp4_quantizes_only_the_routed_experts() -> None:
    config = _config("gpt_oss_20b.json")
    rest = checkpoint_tensors(config, quantization="mxfp4", routed_experts=False)
    assert all(t.dtype == "BF16" for t in rest)
    assert not any(".experts." in t.name for t in rest)
    experts = [
        t
        for t in checkpoint_tensors(config, quantization="mxfp4")
        if t.name.startswith("model.layers.0.mlp.experts.0.") and not t.name.endswith(".bias")
    ]
    params = 3 * 2880 * 2880  # one expert's gate, up and down projections
    # A 4-bit value per parameter and a one-byte E8M0 scale per 32.
    assert sum(t.nbytes for t in experts) / params == 0.5 + 1 / 32


def test_mxfp4_experts_take_vllms_rounded_shapes() -> None:
    """gpt-oss-20b at TP 2: 32 experts, hidden 2880 -> 3072, intermediate 1440 -> 1536."""
    config = _config("gpt_oss_20b.json")
    hidden, inter = 3072, 1536
    w13 = 2 * inter * hidden // 2 + 2 * inter * hidden // 32
    w2 = hidden * inter // 2 + hidden * inter // 32
    bias = (2 * inter + hidden) * 2
    per_layer = mxfp4_expert_bytes_per_rank(
        config, num_experts=32, local_experts=32, tp=2, has_bias=True
    )
    assert per_layer == 32 * (w13 + w2 + bias)
    assert mxfp4_experts_per_worker(config, Parallelism(tp=2)) == (24 * per_layer,) * 2


def test_mxfp4_experts_with_expert_parallelism_and_pipeline_stages() -> None:
    config = _config("gpt_oss_20b.json")
    whole = mxfp4_expert_bytes_per_rank(
        config, num_experts=32, local_experts=1, tp=1, has_bias=True
    )
    # EP 3 over 32 experts: 11, 11, 10 experts per rank; intermediate not split.
    got = mxfp4_experts_per_worker(config, Parallelism(tp=3, ep=3))
    assert got == (24 * 11 * whole, 24 * 11 * whole, 24 * 10 * whole)
    # PP 2: 12 MoE layers per stage.
    staged = mxfp4_experts_per_worker(config, Parallelism(pp=2))
    assert staged == (12 * 32 * whole, 12 * 32 * whole)


def test_mxfp4_headers_count_the_experts_in_vllms_layout() -> None:
    """gpt-oss with its safetensors headers: the packed experts are re-laid out, not copied."""
    config = _config("gpt_oss_20b.json")
    headers = checkpoint_tensors(config, quantization="mxfp4")  # as the checkpoint lists them
    for tp in (1, 2):
        from_headers = worker_weights(config, Parallelism(tp=tp), tensors=headers)
        estimated = worker_weights(config, Parallelism(tp=tp))
        assert from_headers.bytes_per_worker == estimated.bytes_per_worker
        assert not from_headers.exact
        assert from_headers.error_bytes(0) > 0


def test_headers_of_a_text_model_stay_exact_with_the_rotary_cache() -> None:
    config = _config("llama3_8b.json")
    headers = checkpoint_tensors(config)
    weights = worker_weights(config, Parallelism(tp=2), tensors=headers)
    assert weights.exact
    assert weights.error_bytes(0) == 0
    # vLLM 0.26 allocates 16,062,620,160 bytes at TP 1 (vllm_weight_counts.json):
    # the parameters plus the rotary cache (8192 x 128 x 2 B).
    tp1 = worker_weights(config, Parallelism(), tensors=headers).bytes_per_worker[0]
    assert abs(tp1 - 16_062_620_160) < 1024


def test_mistral3_pixtral_tower_by_vllms_layers() -> None:
    """Ministral-3-3B, by hand from vLLM 0.26's pixtral.py and mistral3.py (no biases).

    vLLM 0.26 could not build this config on the meta device (its Pixtral import
    needs another transformers), so the layers are counted from the model files:
    per layer qkv_proj 3h x h, o_proj h x h, gate_up_proj 2i x h, down_proj h x i and
    two RMSNorms; patch_conv 3 x 14 x 14 x h and ln_pre; the projector's RMSNorm,
    patch merger (4h -> h), linear_1 (h -> 3072) and linear_2 (3072 -> 3072).
    """
    h, inter, text = 1024, 4096, 3072
    parallel = 24 * (4 * h * h + 3 * h * inter + 2 * h) + h * text + text * text
    rest = 3 * 14 * 14 * h + h + h + 4 * h * h  # patch_conv, ln_pre, norm, patch merger
    config = _config("ministral_3_3b.json")
    shape = encoder_shape(config, language_config(config).int_("hidden_size"))
    assert shape is not None
    assert (shape.sharded, shape.replicated) == (parallel, rest)


def test_llama4_vision_splits_its_parallel_linears_over_tp() -> None:
    """vLLM 0.26 mllama4.py (mm_encoder_tp_mode "weights"): the patch embedding
    (Llama4UnfoldConvolution), encoder layers, adapter MLP and multi_modal_projector
    are parallel linear layers; only the class token, the position table and the
    pre/post LayerNorms stay whole on each rank."""
    config = _config("llama4_scout.json")
    shape = encoder_shape(config, language_config(config).int_("hidden_size"))
    assert shape is not None
    h = 1408
    assert shape.replicated == h + (24 * 24 + 1) * h + 2 * (2 * h)
