"""Small variants of the bundled configs, part by part, equal to vLLM 0.26's own allocation.

Expected values: ``tests/data/model_configs/vllm_weight_counts_small.json``, every
parameter and buffer of vLLM 0.26's model classes built on the meta device at TP 1 in
bfloat16 (``tools/model_configs/vllm_weight_counts.py``) for the configs of
``tests/data/model_configs/small/`` (``tools/model_configs/small_variants.py``): the
bundled MoE configs with a few experts a layer (fast enough for mutation testing), and
configs with one family option flipped or left to its default (no query compression,
Cohere's q/k norms, Falcon-H1's and Jamba's Mamba options, Jamba's expert placement,
Qwen3-MoE's ``mlp_only_layers`` and ``decoder_sparse_step``, Nemotron-H without conv
biases and without ``n_groups`` or with ``mamba_n_groups``, Whisper's encoder and decoder
depths apart).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.memory_profile.buffers import model_buffers, rotary_cache_bytes
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors, language_config
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import worker_weights
from kvpure.models.config import HFConfig, parse_model_config
from tests.test_memory_weights_exact import _kvpure_parts, vllm_part_bytes

DATA = Path(__file__).resolve().parent / "data/model_configs"
COUNTS = json.loads((DATA / "vllm_weight_counts_small.json").read_text())["models"]


def _config(name: str) -> HFConfig:
    return parse_model_config(json.loads((DATA / "small" / name).read_text()))


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_part_equals_vllms_allocation(name: str) -> None:
    vllm = vllm_part_bytes(COUNTS[name]["parts"])
    config = _config(name)
    assert _kvpure_parts(config, set(COUNTS[name]["parts"])) == vllm
    assert worker_weights(config, Parallelism()).bytes_per_worker[0] == sum(vllm.values())


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_the_rotary_caches_are_the_language_models_buffers(name: str) -> None:
    """vLLM's buffers are its rotary caches, the model's own (Falcon-H1's MuP vectors...)
    and a few scalars (< 4 KiB): no rotary cache for the families its Transformers backend
    runs (OLMo-1 and -2: Hugging Face's rotary)."""
    buffers = sum(p["buffer_bytes"] for p in COUNTS[name]["parts"].values())
    text = language_config(_config(name))
    rotary = rotary_cache_bytes(text, dtype_bytes=2)
    own = sum(t.nbytes for t in model_buffers(text))
    assert 0 <= buffers - rotary - own < 4096


def test_every_variant_was_counted_by_vllm() -> None:
    assert {p.name for p in (DATA / "small").glob("*.json")} == set(COUNTS)


def test_float32_parameters_keep_four_bytes_under_any_served_dtype() -> None:
    """vLLM keeps Kimi-K2's e_score_correction_bias (noaux_tc) and Mamba's A in float32,
    so serving in float16 instead of bfloat16 changes no byte."""
    kimi = _config("kimi_k2_small.json")
    bf16 = worker_weights(kimi, Parallelism()).bytes_per_worker[0]
    assert worker_weights(kimi, Parallelism(), dtype="float16").bytes_per_worker[0] == bf16
    biases = [t for t in checkpoint_tensors(kimi) if t.name.endswith("e_score_correction_bias")]
    assert len(biases) == 2  # one per MoE layer (3 layers, the first dense)
    assert all(t.dtype == "F32" and t.shape == (8,) for t in biases)


def test_minimax_m2_without_use_routing_bias_has_none() -> None:
    """minimax_m2.py reads ``getattr(config, "use_routing_bias", False)``: a config.json
    without the key is counted as vLLM counted the one that sets it false."""
    data = json.loads((DATA / "small/minimax_m2_plain.json").read_text())
    del data["use_routing_bias"]
    parts = COUNTS["minimax_m2_plain.json"]["parts"]
    vllm = {k: v["param_bytes"] + v["buffer_bytes"] for k, v in parts.items()}
    assert _kvpure_parts(parse_model_config(data), set(parts)) == vllm


def test_olmo_1_has_no_norm_weights_and_hugging_faces_rotary_on_the_last_stage() -> None:
    """vLLM 0.26 builds OLMo-1 through its Transformers backend (meta-device dump of
    ``olmo_1.json``): no norm parameter (transformers' ``OlmoLayerNorm`` has none), and two
    float32 buffers, ``model.rotary_emb.inv_freq`` and ``original_inv_freq`` of 64
    (head_dim 128 / 2), instead of vLLM's attention scales; base.py keeps the modules
    after the decoder layers (norm, rotary_emb) on the last pipeline stage."""
    config = _config("olmo_1.json")
    assert not [t.name for t in checkpoint_tensors(config) if "norm" in t.name]
    buffers = model_buffers(language_config(config))
    assert [(t.name, t.dtype, t.shape) for t in buffers] == [
        ("model.rotary_emb.inv_freq", "F32", (64,)),
        ("model.rotary_emb.original_inv_freq", "F32", (64,)),
    ]
    whole = worker_weights(config, Parallelism()).bytes_per_worker[0]
    first, last = worker_weights(config, Parallelism(pp=2)).bytes_per_worker
    assert first + last == whole
    layer = 2 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert first == 100352 * 4096 * 2 + layer
    assert last == layer + 100352 * 4096 * 2 + 2 * 64 * 4
