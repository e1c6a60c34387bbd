"""Weights from config.json, part by part, equal to what vLLM 0.26's own classes allocate.

Expected values: ``tests/data/model_configs/vllm_weight_counts_more.json``, every
parameter and buffer of vLLM 0.26's model class for 29 more bundled configs, built on
the meta device at TP 1 in bfloat16 (``tools/model_configs/vllm_weight_counts.py``),
summed per top-level module (``model``, ``lm_head``). kvpure's count of each part, the
parameters from config.json plus the buffers (rotary caches, attention scales), must
equal vLLM's to the byte (a model it could not yet count would be a strict xfail naming
what is missing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.memory_profile.buffers import model_buffers, rotary_cache_bytes
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors, language_config
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.sharding import Parallelism, ShardingLayout, worker_weight_bytes
from kvpure.memory_profile.weights import weights_layout, worker_weights
from kvpure.models.config import HFConfig, parse_model_config

ROOT = Path(__file__).resolve().parent.parent
COUNTS = json.loads((ROOT / "tests/data/model_configs/vllm_weight_counts_more.json").read_text())

NOT_YET: dict[str, str] = {}
"""Models whose count still differs from vLLM's, with what kvpure misses (strict xfails):
none of the 29 at present."""


def _config(name: str) -> HFConfig:
    data = json.loads((ROOT / "tests/data/model_configs" / name).read_text())
    data.pop("quantization_config", None)  # the counts were built without it
    return parse_model_config(data)


def _bytes(tensors: list[TensorInfo], layout: ShardingLayout) -> int:
    return worker_weight_bytes(tuple(tensors), layout, Parallelism(), served_dtype_bytes=2)[0]


def _kvpure_parts(config: HFConfig) -> dict[str, int]:
    text = language_config(config)
    layout = weights_layout(config)
    tensors = list(checkpoint_tensors(config)) + list(model_buffers(text))
    head = [t for t in tensors if t.name.startswith("lm_head.")]
    rest = [t for t in tensors if not t.name.startswith("lm_head.")]
    parts = {"model": _bytes(rest, layout) + rotary_cache_bytes(text, dtype_bytes=2)}
    if head and not layout.tie_word_embeddings:
        parts["lm_head"] = _bytes(head, layout)
    return parts


def _params() -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[n]))
        if n in NOT_YET
        else n
        for n in sorted(COUNTS["models"])
    ]


@pytest.mark.parametrize("name", _params())
def test_each_part_equals_vllms_allocation(name: str) -> None:
    vllm = {
        part: sizes["param_bytes"] + sizes["buffer_bytes"]
        for part, sizes in COUNTS["models"][name]["parts"].items()
    }
    config = _config(name)
    assert _kvpure_parts(config) == vllm
    assert worker_weights(config, Parallelism()).bytes_per_worker[0] == sum(vllm.values())


def test_the_counts_cover_the_families() -> None:
    assert COUNTS["vllm_version"] == "0.26.0"
    assert len(COUNTS["models"]) == 29
