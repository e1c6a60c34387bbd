"""The memory budget: vLLM's subtraction, exact and estimated terms, the log rendering."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors
from kvpure.memory_profile.estimate import COEFFICIENTS
from kvpure.memory_profile.render import render_vllm_log
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import HFConfig, parse_model_config

GIB = 1 << 30
H100 = round(79.19 * GIB)  # what vLLM logs as an H100 80GB's total memory
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _llama() -> HFConfig:
    return parse_model_config(json.loads((EXAMPLES / "llama3_8b.json").read_text()))


def test_kv_is_requested_minus_the_terms_and_the_band_adds_their_errors_in_quadrature() -> None:
    settings = ServeSettings(
        total_gpu_bytes=H100, gpu_memory_utilization=0.95, vllm_version="0.19.0"
    )
    (budget,) = estimate_memory_budget(_llama(), settings)
    # vLLM's request_memory (vllm/v1/worker/utils.py): ceil(total x utilization).
    assert budget.requested_bytes == math.ceil(H100 * 0.95)
    used = budget.weights_bytes + budget.activation_bytes + budget.non_torch_bytes
    assert budget.kv_cache_bytes == budget.requested_bytes - used
    assert not budget.cuda_graph_subtracted
    terms = (budget.weights, budget.activation, budget.non_torch)
    band = math.ceil(math.sqrt(sum(t.error_bytes**2 for t in terms)))
    assert (budget.kv_cache_bytes_low, budget.kv_cache_bytes_high) == (
        budget.kv_cache_bytes - band,
        budget.kv_cache_bytes + band,
    )
    # vLLM 0.19 logged 58.11 GiB for Llama-3.1-8B at these settings (llm-d-planner report).
    assert budget.kv_cache_bytes_low <= 58.11 * GIB <= budget.kv_cache_bytes_high


def test_cuda_graphs_are_subtracted_from_0_20() -> None:
    # vllm 0.19.0 envs.py: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0";
    # vllm 0.20.0: "1", and gpu_worker.determine_available_memory subtracts the estimate.
    old = estimate_memory_budget(
        _llama(), ServeSettings(total_gpu_bytes=H100, vllm_version="0.19.1")
    )[0]
    new = estimate_memory_budget(
        _llama(), ServeSettings(total_gpu_bytes=H100, vllm_version="0.21.0")
    )[0]
    assert new.cuda_graph_subtracted
    assert not old.cuda_graph_subtracted
    assert old.kv_cache_bytes - new.kv_cache_bytes == new.cuda_graph_bytes
    assert new.cuda_graph_bytes == round(COEFFICIENTS.cuda_graph_per_layer * 32 * GIB)


def test_weights_from_tensors_are_exact_and_per_worker() -> None:
    config = _llama()
    tensors = checkpoint_tensors(config)
    settings = ServeSettings(total_gpu_bytes=H100, vllm_version="0.19.0")
    budgets = estimate_memory_budget(config, settings, Parallelism(tp=2, pp=2), tensors=tensors)
    assert [b.worker for b in budgets] == [0, 1, 2, 3]
    assert all(b.weights.exact and b.weights.error_bytes == 0 for b in budgets)
    # Only the last stage runs the sampler over the vocabulary's logits.
    assert budgets[0].activation_bytes < budgets[3].activation_bytes
    # Tensor-parallel workers carry NCCL buffers.
    # vLLM 0.17-0.20 (config/vllm.py, enable_allreduce_rms_fusion) keeps the fused
    # all-reduce off with PP > 1: NCCL's state alone.
    assert budgets[0].non_torch_bytes == round(
        COEFFICIENTS.non_torch_tensor_parallel_nccl_only * GIB
    )


def test_json_names_every_field_and_marks_terms() -> None:
    settings = ServeSettings(total_gpu_bytes=H100, vllm_version="0.26")
    (budget,) = estimate_memory_budget(_llama(), settings)
    data = budget.to_json()
    for key in (
        "total_bytes",
        "gpu_memory_utilization",
        "weights_bytes",
        "activation_bytes",
        "non_torch_bytes",
        "cuda_graph_bytes",
        "kv_cache_bytes",
        "kv_cache_bytes_low",
        "kv_cache_bytes_high",
    ):
        assert key in data
    terms = data["terms"]
    assert isinstance(terms, dict)
    assert set(terms) == {"weights", "activation", "non_torch", "cuda_graph"}
    assert terms["weights"] == {"exact": False, "error_bytes": budget.weights.error_bytes}


def test_rendering_uses_vllms_words() -> None:
    settings = ServeSettings(total_gpu_bytes=H100, vllm_version="0.26")
    (budget,) = estimate_memory_budget(_llama(), settings)
    text = render_vllm_log(budget)
    assert "total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB" in text
    assert "Model loading took 14.96 GiB memory (estimated" in text
    assert "Available KV cache memory: " in text
    assert "torch peak memory increase" in text
    assert "non-torch forward increase memory" in text


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"vllm_version": "0.9.2"}, "vllm_version"),
        ({"vllm_version": "0.35.0"}, "vllm_version"),
        ({"vllm_version": "latest"}, "vllm_version"),
        ({"total_gpu_bytes": 0}, "total_gpu_bytes"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"total_gpu_bytes": H100}
    base.update(kwargs)
    with pytest.raises(InvalidFieldError, match=field):
        ServeSettings(**base)  # type: ignore[arg-type]  # the mixed-value dict is the point
