"""The memory profile per vLLM release: one rules record per range, each rule read from vLLM.

Expected values come from the releases' own sources (unpacked wheels):
vllm 0.11.0 ``vllm/v1/worker/gpu_worker.py`` (no CUDA-graph term) and
``vllm/config/cache.py`` (``gpu_memory_utilization: float = 0.9``); vllm 0.21.0
``gpu_worker.py`` (``cudagraph_memory_estimate_applied`` subtracted), ``envs.py``
(``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "1") and
``config/cache.py`` (default 0.92); vllm 0.27.0 ``vllm/utils/mem_utils.py``
(``non_kv_cache_memory = total_consumed + transient_peak_headroom``); vllm 0.34.0
``vllm/v1/worker/extensible_kv_cache.py`` (``measure_kv_cache_bytes``,
``KV_CACHE_MARGIN_FLOOR_BYTES``, ``KV_CACHE_MARGIN_FRACTION``) and
``vllm/config/cache.py`` (``resolved_gpu_memory_utilization``: 1.0).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.extensible import CONTEXT_GIB, measure_kv_cache_bytes
from kvpure.memory_profile.releases import (
    MEMORY_PROFILE_RULES,
    V0EngineError,
    memory_profile_rules,
    parse_version,
)
from kvpure.memory_profile.render import render_vllm_log
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import HFConfig, parse_model_config

GIB = 1 << 30
H100 = round(79.19 * GIB)
ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT / "examples" / "llama3_8b.json"


def _llama() -> HFConfig:
    return parse_model_config(json.loads(LLAMA.read_text()))


@pytest.mark.parametrize(
    ("version", "releases", "graphs", "consumed", "extensible", "unset_util"),
    [
        ("0.10.1", "0.10-0.13", False, False, False, 0.9),
        ("0.11.0", "0.10-0.13", False, False, False, 0.9),
        ("0.14.0", "0.14", False, False, False, 0.9),
        ("0.16.0", "0.15-0.16", False, False, False, 0.9),
        ("0.17.0", "0.17", False, False, False, 0.9),
        ("0.18.0", "0.18", False, False, False, 0.9),
        ("0.19.0", "0.19", False, False, False, 0.9),
        ("0.20", "0.20", True, False, False, 0.92),
        ("0.21.0", "0.21", True, False, False, 0.92),
        ("0.22.0", "0.22", True, False, False, 0.92),
        ("0.23.0", "0.23", True, False, False, 0.92),
        ("0.24.0", "0.24", True, False, False, 0.92),
        ("0.25.0", "0.25", True, False, False, 0.92),
        ("0.26", "0.26", True, False, False, 0.92),
        ("0.27.0", "0.27", True, True, False, 0.92),
        ("0.28.0", "0.28", True, True, False, 0.92),
        ("v0.33.0", "0.29-0.33", True, True, False, 0.92),
        ("0.34", "0.34", True, True, True, 1.0),
    ],
)
def test_each_release_takes_its_own_formula(
    version: str, releases: str, graphs: bool, consumed: bool, extensible: bool, unset_util: float
) -> None:
    rules = memory_profile_rules(version)
    assert rules.releases == releases
    assert rules.cuda_graph_subtracted is graphs
    assert rules.non_kv_from_consumed is consumed
    assert rules.extensible_kv_cache is extensible
    assert rules.unset_gpu_memory_utilization == unset_util


def test_the_ranges_tile_0_10_to_0_34_and_each_record_differs_from_the_last() -> None:
    minors = [m for r in MEMORY_PROFILE_RULES for m in range(r.first[1], r.last[1] + 1)]
    assert minors == list(range(10, 35))
    changed = {f.name for f in fields(MEMORY_PROFILE_RULES[0])} - {"releases", "first", "last"}
    for older, newer in itertools.pairwise(MEMORY_PROFILE_RULES):
        assert any(getattr(older, n) != getattr(newer, n) for n in changed), newer.releases


def test_v0_releases_are_refused_in_one_line_that_says_so() -> None:
    with pytest.raises(V0EngineError) as info:
        parse_version("0.9.2")
    message = str(info.value)
    assert "\n" not in message
    assert "V0 engine" in message
    assert "vllm_version" in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidFieldError, match=r"0\.10 to 0\.34"):
        memory_profile_rules("0.35.0")


def test_0_34_margin_constants_are_vllms() -> None:
    rules = memory_profile_rules("0.34")
    # extensible_kv_cache.py: KV_CACHE_MARGIN_FLOOR_BYTES = (3 if rocm else 1) << 30
    assert rules.margin_floor(rocm=False) * GIB == 1 << 30
    assert rules.margin_floor(rocm=True) * GIB == 3 << 30
    assert rules.margin_fraction == 0.75  # KV_CACHE_MARGIN_FRACTION


def _vllm_measure(
    init_free: int, free: int, committed: int, requested: int, peak: int, growth: int, floor: int
) -> int:
    """vLLM 0.34's measure_kv_cache_bytes, transcribed as the oracle (then clamped at 0)."""
    non_kv_used = init_free - free - committed
    headroom = free + committed
    margin = max(floor, int(peak * 0.75))
    available = min(requested - non_kv_used, headroom - margin)
    available -= max(peak, growth)
    return max(available, 0)


@given(
    init_free=st.integers(10 * GIB, 200 * GIB),
    used=st.integers(0, 9 * GIB),
    requested=st.integers(1 * GIB, 200 * GIB),
    peak=st.integers(0, 8 * GIB),
    growth=st.integers(0, 8 * GIB),
    rocm=st.booleans(),
)
def test_measure_matches_vllms_function(
    init_free: int, used: int, requested: int, peak: int, growth: int, rocm: bool
) -> None:
    floor = (3 if rocm else 1) << 30
    got, margin = measure_kv_cache_bytes(
        init_free_bytes=init_free,
        non_kv_used_bytes=used,
        requested_bytes=requested,
        transient_peak_bytes=peak,
        torch_reserve_growth_bytes=growth,
        margin_floor_bytes=floor,
        margin_fraction=0.75,
    )
    # committed = 0: free = init_free - used.
    assert max(got, 0) == _vllm_measure(
        init_free, init_free - used, 0, requested, peak, growth, floor
    )
    assert margin == max(floor, int(peak * 0.75))


def test_0_34_unset_utilization_is_one_and_the_device_bound_applies() -> None:
    settings = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34")
    (b,) = estimate_memory_budget(_llama(), settings)
    assert b.gpu_memory_utilization == 1.0
    assert b.requested_bytes == H100
    assert b.extensible_kv_cache
    transient = b.activation_bytes + b.cuda_graph_bytes
    assert b.margin_bytes == max(1 << 30, int(transient * 0.75))
    non_kv = b.weights_bytes + b.non_torch_bytes + b.cuda_graph_bytes
    headroom = H100 - round(CONTEXT_GIB * GIB) - non_kv
    assert b.kv_cache_bytes == headroom - b.margin_bytes - transient
    # An explicit utilization below the device bound caps it instead.
    capped = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=0.5, vllm_version="0.34")
    (c,) = estimate_memory_budget(_llama(), capped)
    assert c.kv_cache_bytes == math.ceil(H100 * 0.5) - non_kv - transient
    assert "extensible KV cache: margin" in render_vllm_log(b)


def test_0_34_on_rocm_keeps_a_3_gib_floor() -> None:
    cuda = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34")
    rocm = ServeSettings(
        total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34", rocm=True
    )
    (a,) = estimate_memory_budget(_llama(), cuda)
    (b,) = estimate_memory_budget(_llama(), rocm)
    assert b.margin_bytes == 3 << 30
    assert a.kv_cache_bytes - b.kv_cache_bytes == (3 << 30) - a.margin_bytes


@pytest.mark.parametrize(
    ("version", "subtracted_on_rocm"),
    # gpu_worker.determine_available_memory estimates CUDA graphs only where
    # not current_platform.is_rocm() in 0.20.0, is_cuda() in 0.21.0-0.25.0,
    # is_cuda_alike() (ROCm too) from 0.26.0
    [("0.20.0", False), ("0.21.0", False), ("0.25", False), ("0.26", True), ("0.33", True)],
)
def test_rocm_subtracts_cuda_graphs_from_0_26(version: str, subtracted_on_rocm: bool) -> None:
    # gpt-oss (MoE, not in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES) keeps the V1 runner
    # through 0.28, whose profile_cudagraph_memory makes the estimate.
    moe = parse_model_config(json.loads((ROOT / "examples" / "gpt_oss_20b.json").read_text()))
    cuda = ServeSettings(total_gpu_bytes=H100, vllm_version=version)
    rocm = ServeSettings(total_gpu_bytes=H100, vllm_version=version, rocm=True)
    (a,) = estimate_memory_budget(moe, cuda)
    (b,) = estimate_memory_budget(moe, rocm)
    assert a.cuda_graph_subtracted is True
    assert b.cuda_graph_subtracted is subtracted_on_rocm
    assert a.cuda_graph.bytes > 0
    expected_gap = 0 if subtracted_on_rocm else a.cuda_graph.bytes
    assert b.kv_cache_bytes - a.kv_cache_bytes == expected_gap


@pytest.mark.parametrize("version", ["0.11.0", "0.19.0", "0.20.0", "0.21", "0.26", "0.33", "0.34"])
def test_enforce_eager_charges_no_cuda_graphs(version: str) -> None:
    graphs = ServeSettings(total_gpu_bytes=H100, vllm_version=version)
    eager = ServeSettings(total_gpu_bytes=H100, vllm_version=version, enforce_eager=True)
    (g,) = estimate_memory_budget(_llama(), graphs)
    (e,) = estimate_memory_budget(_llama(), eager)
    assert e.cuda_graph_bytes == 0
    assert e.cuda_graph.exact
    subtracted = g.cuda_graph_subtracted  # Llama runs Model Runner V2 in 0.26: no estimate
    if memory_profile_rules(version).extensible_kv_cache:
        assert e.kv_cache_bytes > g.kv_cache_bytes
    elif subtracted:
        assert e.kv_cache_bytes - g.kv_cache_bytes == g.cuda_graph_bytes
    else:
        assert e.kv_cache_bytes == g.kv_cache_bytes
    assert "--enforce-eager" in render_vllm_log(e)


def test_old_releases_take_the_larger_sampler_peak_and_nccl_only_non_torch() -> None:
    old = ServeSettings(total_gpu_bytes=H100, vllm_version="0.11.0")
    new = ServeSettings(total_gpu_bytes=H100, vllm_version="0.19.0")
    (a, _) = estimate_memory_budget(_llama(), old, Parallelism(tp=2))
    (b, _) = estimate_memory_budget(_llama(), new, Parallelism(tp=2))
    assert a.activation_bytes > b.activation_bytes
    assert a.non_torch_bytes < b.non_torch_bytes
    # Thin data before 0.15: the band is wider (docs/memory-profile.md says so).
    assert a.kv_cache_bytes_high - a.kv_cache_bytes > b.kv_cache_bytes_high - b.kv_cache_bytes


def test_cli_enforce_eager_and_memory_profile_version(capsys: pytest.CaptureFixture[str]) -> None:
    # 0.21: the V1 runner for every model, and the graph estimate subtracted.
    argv = ["plan", str(LLAMA), "--gpu", "H100-80GB", "--memory-profile-version", "0.21", "--json"]
    assert main(argv) == 0
    graphs = json.loads(capsys.readouterr().out)["memory"][0]
    assert main([*argv, "--enforce-eager"]) == 0
    eager = json.loads(capsys.readouterr().out)["memory"][0]
    assert eager["enforce_eager"] is True
    assert eager["cuda_graph_bytes"] == 0
    assert eager["kv_cache_bytes"] - graphs["kv_cache_bytes"] == graphs["cuda_graph_bytes"]
    assert graphs["memory_profile"] == "0.21"
    assert graphs["gpu_memory_utilization"] == 0.92  # vLLM 0.21's unset value


def test_cli_refuses_v0_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", str(LLAMA), "--gpu", "H100", "--memory-profile-version", "0.8.5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvpure: error: --memory-profile-version")
    assert "V0 engine" in err
    assert "\n" not in err


def test_memory_case_takes_the_vllm_version_parameter() -> None:
    from kvpure.cli.plan_memory import memory_case
    from kvpure.models.architectures import model_layout

    config = _llama()
    case = memory_case(
        config, model_layout(config), {"gpu": "H100-80GB"}, model_folder=None, vllm_version="0.33"
    )
    assert case.workers[0].budget.memory_profile == "0.29-0.33"
    default = memory_case(config, model_layout(config), {"gpu": "H100-80GB"}, model_folder=None)
    assert default.workers[0].budget.memory_profile == "0.34"


def test_0_20_is_the_first_release_to_subtract_cuda_graphs_and_ask_0_92() -> None:
    """The 0.19/0.20 boundary, read in the two wheels: vllm 0.19.0 ``envs.py`` reads
    ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` with default "0" (the estimate is logged,
    ``cudagraph_memory_estimate_applied`` is 0) and ``config/cache.py`` has
    ``Field(default=0.9)``; vllm 0.20.0 defaults the variable to "1" and utilization to
    0.92, and ``Worker.determine_available_memory`` subtracts the applied estimate."""
    old = ServeSettings(total_gpu_bytes=H100, vllm_version="0.19.0", gpu_memory_utilization=0.9)
    new = ServeSettings(total_gpu_bytes=H100, vllm_version="0.20.0", gpu_memory_utilization=0.9)
    (a,) = estimate_memory_budget(_llama(), old)
    (b,) = estimate_memory_budget(_llama(), new)
    assert (a.cuda_graph_subtracted, b.cuda_graph_subtracted) == (False, True)
    assert a.kv_cache_bytes - b.kv_cache_bytes == b.cuda_graph_bytes > 0
    unset = ServeSettings(total_gpu_bytes=H100, vllm_version="0.20.0", gpu_memory_utilization=None)
    (c,) = estimate_memory_budget(_llama(), unset)
    assert c.gpu_memory_utilization == 0.92
    assert c.requested_bytes == math.ceil(H100 * 0.92)


@pytest.mark.parametrize(
    ("version", "architecture", "moe", "quantized", "v2"),
    # vllm/config/vllm.py VllmConfig._is_default_v2_model_runner_model and
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in each wheel; use_v2_model_runner in 0.29.0.
    [
        ("0.21.0", "Qwen3ForCausalLM", False, False, False),  # no V2 default yet
        ("0.22.0", "Qwen3ForCausalLM", False, False, True),
        ("0.22.0", "LlamaForCausalLM", False, False, False),
        ("0.23.0", "LlamaForCausalLM", False, False, True),
        ("0.23.0", "LlamaForCausalLM", False, True, False),  # not model_config.is_quantized
        ("0.24.0", "Qwen2MoeForCausalLM", True, False, True),
        ("0.24.0", "Gemma2ForCausalLM", False, False, False),
        ("0.25.0", "Gemma2ForCausalLM", False, False, True),  # or not model_config.is_moe
        ("0.25.0", "MixtralForCausalLM", True, False, False),
        ("0.28.0", "MixtralForCausalLM", True, False, False),
        ("0.29.0", "MixtralForCausalLM", True, False, True),
    ],
)
def test_model_runner_v2_defaults_per_release(
    version: str, architecture: str, moe: bool, quantized: bool, v2: bool
) -> None:
    rules = memory_profile_rules(version)
    got = rules.runs_model_runner_v2(architectures=(architecture,), moe=moe, quantized=quantized)
    assert got is v2


def test_model_runner_v2_estimates_no_cuda_graphs_before_0_29() -> None:
    """vllm 0.22.0-0.28.0 ``vllm/v1/worker/gpu/model_runner.py``:
    ``profile_cudagraph_memory`` returns 0 ("It is TBD whether we keep this API");
    0.29.0 returns ``_profile_cudagraph_memory(self)``."""
    for version, subtracted in (("0.21", True), ("0.25", False), ("0.28", False), ("0.29", True)):
        settings = ServeSettings(total_gpu_bytes=H100, vllm_version=version)
        (budget,) = estimate_memory_budget(_llama(), settings)
        assert budget.cuda_graph_subtracted is subtracted, version
        assert budget.model_runner_v2 is (version != "0.21"), version
    settings = ServeSettings(total_gpu_bytes=H100, vllm_version="0.26")
    (v2,) = estimate_memory_budget(_llama(), settings)
    assert "Model Runner V2" in render_vllm_log(v2)
