"""End to end: estimate_memory_budget replayed with the settings each public log states.

Weights come from config.json (the estimated path), as when no checkpoint is at
hand; the logged KV memory must fall inside the budget's range. Config values
are those of the public checkpoints (Hugging Face model pages); logged figures
are in tests/data/memory_logs with their sources.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.profile_logs import GIB, ProfileLog, load_profile_logs
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import parse_model_config
from tests.test_memory_params import _LOGGED_MODELS

ROOT = Path(__file__).resolve().parent.parent
LOGS = {
    log.name.removesuffix(".json"): log
    for log in load_profile_logs(ROOT / "tests/data/memory_logs")
}
LLAMA = json.loads((ROOT / "examples" / "llama3_8b.json").read_text())
CONFIGS: dict[str, dict[str, object]] = {
    "meta-llama/Llama-3.1-8B-Instruct": LLAMA,
    **{
        model: {"architectures": ["X"], "torch_dtype": "bfloat16", **fields}
        for model, (fields, _) in _LOGGED_MODELS.items()
    },
    "Qwen/Qwen2-7B-Instruct": json.loads(
        (ROOT / "tests" / "data" / "model_configs" / "qwen2_7b.json").read_text()
    ),
    "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8": {
        "architectures": ["X"],
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "compressed-tensors"},
        **_LOGGED_MODELS["Qwen/Qwen2.5-7B-Instruct"][0],
    },
}
RUNTIME = {"llama31_8b_fp32_tp1": ("float32", None), "llama31_8b_runtime_fp8_tp1": ("auto", "fp8")}


def _logged_kv(log: ProfileLog) -> float:
    if log.kv_cache_gib is not None:
        return log.kv_cache_gib
    assert log.weights_gib is not None
    assert log.activation_gib is not None
    assert log.non_torch_gib is not None
    requested = math.ceil(log.total_gpu_memory_gib * GIB * log.gpu_memory_utilization) / GIB
    return requested - log.weights_gib - log.activation_gib - log.non_torch_gib


REPLAYED = sorted(
    name
    for name, log in LOGS.items()
    if log.model in CONFIGS and (log.kv_cache_gib is not None or log.weights_gib is not None)
)


def _replay(name: str) -> tuple[float, float, float]:
    log = LOGS[name]
    dtype, quantization = RUNTIME.get(name, ("auto", None))
    settings = ServeSettings(
        total_gpu_bytes=round(log.total_gpu_memory_gib * GIB),
        gpu_memory_utilization=log.gpu_memory_utilization,
        max_num_batched_tokens=log.max_num_batched_tokens,
        max_num_seqs=log.max_num_seqs,
        dtype=dtype,
        quantization=quantization,
        vllm_version=log.vllm_version,
        gpu_capability=log.compute_capability,
        flashinfer_sampler=log.flashinfer_sampler,
    )
    parallel = Parallelism(tp=log.tensor_parallel_size, pp=log.pipeline_parallel_size)
    budget = estimate_memory_budget(parse_model_config(CONFIGS[log.model]), settings, parallel)[0]
    low, high = budget.kv_cache_bytes_low / GIB, budget.kv_cache_bytes_high / GIB
    return low, high, _logged_kv(log)


@pytest.mark.parametrize("name", REPLAYED)
def test_logged_kv_memory_falls_in_the_replayed_range(name: str) -> None:
    low, high, logged = _replay(name)
    assert low - 0.005 <= logged <= high + 0.005


def test_replay_covers_enough_logs_with_a_narrow_band() -> None:
    assert len(REPLAYED) >= 12
    half_widths = [(high - low) / 2 for low, high, _ in map(_replay, REPLAYED)]
    assert statistics.median(half_widths) <= 0.5


def test_documented_replay_figures() -> None:
    rows = [(LOGS[name].split, *_replay(name)) for name in REPLAYED]
    inside = sum(low - 0.005 <= logged <= high + 0.005 for _, low, high, logged in rows)
    held = [
        abs((low + high) / 2 - logged) for split, low, high, logged in rows if split == "holdout"
    ]
    width = statistics.median((high - low) / 2 for _, low, high, _ in rows)
    line = (
        f"replayed {len(rows)} logs, {inside} inside the range; held out {len(held)}: "
        f"median {statistics.median(held):.2f} GiB, max {max(held):.2f}\nGiB off; "
        f"median half-width {width:.2f} GiB."
    )
    doc = (ROOT / "docs" / "memory-profile.md").read_text()
    assert line in doc, line
