"""Weights from config.json, part by part, equal to what vLLM 0.26's own classes allocate.

Expected values: ``tests/data/model_configs/vllm_weight_counts.json`` (nine models,
multimodal ones among them) and ``vllm_weight_counts_more.json`` (30 more bundled
configs): every parameter and buffer of vLLM 0.26's model class, built on the meta
device at TP 1 in bfloat16 (``tools/model_configs/vllm_weight_counts.py``), summed per
top-level module (``model``, ``lm_head``; ``language_model`` and the vision tower and
projector). kvpure's count of each part, the parameters from config.json plus the
buffers (rotary caches, attention scales...), must equal vLLM's to the byte (the vision
tower and projector are compared together); a model it could not yet count would be a
strict xfail naming what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.buffers import model_buffers, rotary_cache_bytes
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors, language_config
from kvpure.memory_profile.encoders import (
    encoder_buffer_bytes,
    encoder_bytes_per_rank,
    encoder_shape,
)
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.sharding import Parallelism, ShardingLayout, worker_weight_bytes
from kvpure.memory_profile.weights import weights_layout, worker_weights
from kvpure.models.config import HFConfig, parse_model_config

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/model_configs"
FIRST = json.loads((DATA / "vllm_weight_counts.json").read_text())["models"]
MORE = json.loads((DATA / "vllm_weight_counts_more.json").read_text())
COUNTS = {**FIRST, **MORE["models"]}
CONFIG_FILES = {
    "llama4_scout.json": ROOT / "examples/llama4_scout.json",
    "gpt_oss_20b.json": ROOT / "examples/gpt_oss_20b.json",
    "llama3_8b.json": ROOT / "examples/llama3_8b.json",
    "kimi_vl_a3b.json": ROOT / "tests/data/weight_configs/kimi_vl_a3b.json",
}
ENCODER_PARTS = ("vision_tower", "vision_model", "visual", "multi_modal_projector")


def _config(name: str) -> HFConfig:
    data = json.loads(CONFIG_FILES.get(name, DATA / name).read_text())
    data.pop("quantization_config", None)  # the counts were built without it
    return parse_model_config(data)


def _bytes(tensors: list[TensorInfo], layout: ShardingLayout) -> int:
    return worker_weight_bytes(tuple(tensors), layout, Parallelism(), served_dtype_bytes=2)[0]


def _kvpure_parts(
    config: HFConfig, names: set[str], *, mrope_positions_factor: int = 4
) -> dict[str, int]:
    """kvpure's bytes by vLLM's top-level part (``names``: vLLM's, its LM head ``lm_head``
    or, in internlm2.py, ``output``; the vision tower's parts as one ``encoder``)."""
    text = language_config(config)
    layout = weights_layout(config)
    tensors = list(checkpoint_tensors(config)) + list(model_buffers(text))
    head = [t for t in tensors if t.name.startswith("lm_head.")]
    language = "language_model" if "language_model" in names else "model"
    separate_head = "lm_head" in names or "output" in names
    if separate_head:
        tensors = [t for t in tensors if not t.name.startswith("lm_head.")]
    rotary = rotary_cache_bytes(text, dtype_bytes=2, mrope_positions_factor=mrope_positions_factor)
    parts = {language: _bytes(tensors, layout) + rotary}
    if separate_head:
        parts["lm_head"] = _bytes(head, layout)
    shape = encoder_shape(config, text.int_("hidden_size", 0))
    if shape is not None:
        parts["encoder"] = encoder_bytes_per_rank(shape, tp=1, dtype_bytes=2)
        parts["encoder"] += encoder_buffer_bytes(config, dtype_bytes=2)
    return parts


def vllm_part_bytes(parts: dict[str, dict[str, int]]) -> dict[str, int]:
    """vLLM's parameter and buffer bytes by the part names of :func:`_kvpure_parts`."""
    found: dict[str, int] = {}
    for part, sizes in parts.items():
        key = "encoder" if part in ENCODER_PARTS else part
        key = "lm_head" if key == "output" else key  # internlm2.py names its LM head so
        found[key] = found.get(key, 0) + sizes["param_bytes"] + sizes["buffer_bytes"]
    return found


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_part_equals_vllms_allocation(name: str) -> None:
    vllm = vllm_part_bytes(COUNTS[name]["parts"])
    config = _config(name)
    assert _kvpure_parts(config, set(COUNTS[name]["parts"])) == vllm
    assert worker_weights(config, Parallelism()).bytes_per_worker[0] == sum(vllm.values())


def test_the_counts_cover_the_families() -> None:
    assert MORE["vllm_version"] == "0.26.0"
    assert len(MORE["models"]) == 30
    assert len(COUNTS) == 39


def test_whisper_splits_its_linear_layers_but_not_its_embeddings() -> None:
    """By hand from vLLM 0.26 whisper.py at TP 2: the qkv/q/kv projections and fc1 split
    their outputs, out_proj/fc2 their inputs (biases whole); the convolutions, position
    tables, LayerNorms and the plain nn.Embedding of the vocabulary stay whole."""
    d, ffn, layers, mel, vocab = 1280, 5120, 32, 128, 51866
    whole = (d * mel * 3 + d) + (3 * d * d + d) + 1500 * d + vocab * d + 448 * d
    whole += layers * (4 * d + 2 * d) + 2 * d  # encoder norms, out_proj and fc2 biases
    whole += layers * (6 * d + 3 * d) + 2 * d  # decoder norms and row-parallel biases
    encoder = 3 * d * d + 3 * d + d * d + ffn * d + ffn + d * ffn
    decoder = encoder + (d * d + d) + (2 * d * d + 2 * d) + d * d
    split = layers * (encoder + decoder) // 2
    scales = layers * 2 * 16  # decoder self- and cross-attention scale buffers
    got = worker_weights(_config("whisper_large_v3.json"), Parallelism(tp=2)).bytes_per_worker
    assert got == ((whole + split) * 2 + scales,) * 2


def test_a_bad_hybrid_pattern_is_a_typed_error() -> None:
    data = json.loads((DATA / "nemotron_nano_9b_v2.json").read_text())
    data["hybrid_override_pattern"] = "M-X"
    with pytest.raises(InvalidFieldError, match="hybrid_override_pattern"):
        checkpoint_tensors(parse_model_config(data))


def test_float32_parameters_keep_four_bytes_under_any_served_dtype() -> None:
    """vLLM keeps Kimi-K2's e_score_correction_bias (noaux_tc) and Mamba's A in float32."""
    kimi = _config("kimi_k2_instruct.json")
    bf16 = worker_weights(kimi, Parallelism()).bytes_per_worker[0]
    fp16 = worker_weights(kimi, Parallelism(), dtype="float16").bytes_per_worker[0]
    assert bf16 == fp16
    biases = [t for t in checkpoint_tensors(kimi) if t.name.endswith("e_score_correction_bias")]
    assert len(biases) == 60  # one per MoE layer (61 layers, the first dense)
    assert all(t.dtype == "F32" and t.shape == (384,) for t in biases)
