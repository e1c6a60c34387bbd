"""``--vllm`` for any V1 release's memory profile, and the non-torch term per release and GPU.

Expected values come from vLLM's sources and logs: vllm 0.11.0
``vllm/v1/worker/gpu_worker.py`` (no CUDA-graph term; ``gpu_memory_utilization``
0.9 in ``vllm/config/cache.py``), vllm 0.21.0 and 0.27.0 ``gpu_worker.py`` (the
CUDA-graph estimate subtracted; 0.92 unset), vllm 0.15.0-0.34.0
``vllm/config/vllm.py`` (``enable_allreduce_rms_fusion``), and the bundled H100
logs (tests/data/memory_logs).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.cli.memory_release import planning_release, split_release_options
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.estimate import (
    COEFFICIENTS,
    NCCL_PCIE_MULTI_BAND_GIB,
    NCCL_UNLOGGED_BAND_GIB,
    NCCL_WITHOUT_NVLS_GIB,
    non_torch_band_gib,
    non_torch_gib,
)
from kvpure.memory_profile.profile_logs import ModelShape, load_profile_logs
from kvpure.memory_profile.releases import V0EngineError, memory_profile_rules
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.unmodelled import UnmodelledMemoryError
from kvpure.models.config import parse_model_config

GIB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]
LLAMA = ROOT / "examples" / "llama3_8b.json"


def _plan(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["plan", str(LLAMA), *argv, "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize(
    ("vllm", "planned", "profile"),
    [
        ("0.10.1", "0.26", "0.10-0.13"),
        ("0.11", "0.26", "0.10-0.13"),
        ("0.14.0", "0.26", "0.14"),
        ("v0.16.0", "0.26", "0.15-0.16"),
        ("0.17", "0.26", "0.17"),
        ("0.18.0", "0.26", "0.18"),
        ("0.19.0", "0.26", "0.19"),
        ("0.20.0", "0.26", "0.20"),
        ("0.21", "0.26", "0.21"),
        ("0.22", "0.26", "0.22"),
        ("0.23.0", "0.26", "0.23"),
        ("0.24", "0.26", "0.24"),
        ("0.25", "0.26", "0.25"),
        ("0.27.1", "0.33", "0.27"),
        ("0.28", "0.33", "0.28"),
        ("0.31", "0.33", "0.29-0.33"),
        ("0.34", "0.34", "0.34"),
    ],
)
def test_vllm_names_any_v1_release_for_the_memory_profile(
    vllm: str, planned: str, profile: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _plan(["--gpu", "H100-80GB", "--vllm", vllm], capsys)
    memory = data["memory"][0]
    assert data["vllm_version"] == planned
    assert memory["memory_profile"] == profile
    same = _plan(["--gpu", "H100-80GB", "--memory-profile-version", vllm], capsys)
    assert same["memory"][0]["kv_cache_bytes"] == memory["kv_cache_bytes"]


def test_0_11_is_the_older_formula_not_0_21s(capsys: pytest.CaptureFixture[str]) -> None:
    old = _plan(["--gpu", "H100-80GB", "--vllm", "0.11"], capsys)["memory"][0]
    new = _plan(["--gpu", "H100-80GB", "--vllm", "0.21"], capsys)["memory"][0]
    assert old["gpu_memory_utilization"] == 0.9  # 0.11's unset value
    assert new["gpu_memory_utilization"] == 0.92
    assert old["cuda_graph_subtracted"] is False
    assert new["cuda_graph_subtracted"] is True
    assert old["activation_bytes"] > new["activation_bytes"]  # the larger sampler peak


@pytest.mark.parametrize("vllm", ["0.9.2", "0.8", "v0.6.3"])
def test_v0_is_refused_in_one_line(vllm: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(LLAMA), "--gpu", "H100", "--vllm", vllm]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvpure: error: --vllm")
    assert "V0 engine" in err
    assert "\n" not in err


@pytest.mark.parametrize("vllm", ["0.40", "abc", "1.2"])
def test_unknown_names_keep_the_known_list(vllm: str) -> None:
    with pytest.raises(InvalidFieldError) as err:
        split_release_options({"vllm": vllm})
    assert "known: 0.26, 0.33, 0.34" in str(err.value)
    with pytest.raises(V0EngineError):
        split_release_options({"vllm": "0.9"})


def test_reproduced_releases_and_an_explicit_profile_are_kept() -> None:
    assert split_release_options({"vllm": "0.33.0"}) == {"vllm": "0.33.0"}
    assert split_release_options({}) == {}
    kept = split_release_options({"vllm": "0.19", "memory_profile_version": "0.16"})
    assert kept == {"vllm": "0.26", "memory_profile_version": "0.16"}
    assert planning_release((0, 10)) == "0.26"
    assert planning_release((0, 27)) == "0.33"


@pytest.mark.parametrize(
    ("version", "tp", "pp", "capability", "fused"),
    [
        ("0.16.0", 2, 1, (9, 0), False),  # 0.16.0 config/vllm.py: fuse_allreduce_rms False
        ("0.17.0", 2, 1, (9, 0), True),  # 0.17.0 OPTIMIZATION_LEVEL_02: on for 9.0 / 10.0
        ("0.17.0", 2, 2, (9, 0), False),  # ... and PP 1 only
        ("0.18.0", 2, 1, (10, 3), False),  # 0.18.0: is_device_capability(100) only
        ("0.19.0", 2, 1, (10, 3), True),  # 0.19.0: is_device_capability_family(100)
        ("0.19.0", 2, 2, (9, 0), False),  # ... still PP 1 only
        ("0.20.0", 2, 2, (10, 0), False),  # 0.20.0: PP 1 only too
        ("0.21.0", 2, 1, (10, 3), True),  # 0.21.0: is_device_capability_family(100)
        ("0.21.0", 2, 2, (9, 0), True),
        ("0.23.0", 2, 2, (9, 0), False),  # 0.23.0: pipeline_parallel_size == 1 again
        ("0.23.0", 2, 1, (10, 3), True),
        ("0.24.0", 2, 2, (9, 0), True),  # 0.24.0: the PP condition dropped again
        ("0.26", 4, 1, (8, 0), False),  # A100
        ("0.26", 2, 1, (8, 9), False),  # L40S, RTX 4090
        ("0.26", 2, 1, (12, 0), False),  # RTX 5090, RTX PRO 6000
        ("0.26", 1, 1, (9, 0), False),
    ],
)
def test_the_fused_all_reduce_follows_each_releases_rule(
    version: str, tp: int, pp: int, capability: tuple[int, int], fused: bool
) -> None:
    rules = memory_profile_rules(version)
    assert rules.fuses_all_reduce(tp=tp, pp=pp, capability=capability) is fused
    got = non_torch_gib(COEFFICIENTS, tp=tp, pp=pp, rules=rules, capability=capability)
    if tp > 1:
        hopper_or_blackwell = capability == (9, 0) or capability[0] == 10
        expected = (
            COEFFICIENTS.non_torch_tensor_parallel
            if fused
            else COEFFICIENTS.non_torch_tensor_parallel_nccl_only
            if hopper_or_blackwell
            else NCCL_WITHOUT_NVLS_GIB
        )
        assert got == expected


def test_one_gpus_non_torch_grows_in_0_18() -> None:
    # The campaign's Qwen3-14B runs: 0.13 GiB on 0.15-0.17, 0.25 on 0.18.
    for version, expected in (("0.11", 0.13), ("0.17.0", 0.13), ("0.18.0", 0.25)):
        rules = memory_profile_rules(version)
        assert non_torch_gib(COEFFICIENTS, tp=1, pp=1, rules=rules) == expected


def test_unlogged_interconnects_widen_the_tp_band() -> None:
    rules = memory_profile_rules("0.26")
    hopper = non_torch_band_gib(COEFFICIENTS, tp=2, rules=rules, capability=(9, 0))
    pcie = non_torch_band_gib(COEFFICIENTS, tp=2, rules=rules, capability=(8, 9))
    assert pcie - hopper == pytest.approx(NCCL_UNLOGGED_BAND_GIB)
    assert non_torch_band_gib(COEFFICIENTS, tp=1, rules=rules, capability=(8, 9)) == hopper


@pytest.mark.parametrize("capability", [(7, 5), (8, 6), (8, 9), (12, 0)])
def test_more_than_two_pcie_only_gpus_widen_the_band_further(capability: tuple[int, int]) -> None:
    # vLLM 0.26 custom_all_reduce.py: "Custom allreduce is disabled because it's not supported
    # on more than two PCIe-only GPUs"; NCCL then carries every all-reduce. The one such log
    # (TP 4 RTX PRO 6000, vLLM 0.27.1) holds 1.70 GiB of non-torch memory against 0.30.
    rules = memory_profile_rules("0.27")
    hopper = non_torch_band_gib(COEFFICIENTS, tp=4, rules=rules, capability=(9, 0))
    two = non_torch_band_gib(COEFFICIENTS, tp=2, rules=rules, capability=capability)
    four = non_torch_band_gib(COEFFICIENTS, tp=4, rules=rules, capability=capability)
    assert two - hopper == pytest.approx(NCCL_UNLOGGED_BAND_GIB)
    assert four - hopper == pytest.approx(NCCL_PCIE_MULTI_BAND_GIB)
    assert NCCL_PCIE_MULTI_BAND_GIB >= 1.70 - 0.30
    # A100 boards (8.0) are NVSwitch meshes in their SXM form: the TP 2 figure's band.
    a100 = non_torch_band_gib(COEFFICIENTS, tp=4, rules=rules, capability=(8, 0))
    assert a100 - hopper == pytest.approx(NCCL_UNLOGGED_BAND_GIB)


def test_the_cli_charges_nccl_alone_off_hopper(capsys: pytest.CaptureFixture[str]) -> None:
    def non_torch(gpu: str) -> int:
        argv = ["--gpu", gpu, "--tensor-parallel-size", "2", "--vllm", "0.26"]
        return int(_plan(argv, capsys)["memory"][0]["non_torch_bytes"])

    assert non_torch("H100-80GB") == round(COEFFICIENTS.non_torch_tensor_parallel * GIB)
    assert non_torch("H200") == round(COEFFICIENTS.non_torch_tensor_parallel * GIB)
    # Off Hopper NCCL sets up no NVLS buffers: 0.30 GiB (vLLM 0.10.1 A100 TP 2 logs).
    assert non_torch("A100-80GB") == round(NCCL_WITHOUT_NVLS_GIB * GIB)
    assert non_torch("L40S") == round(NCCL_WITHOUT_NVLS_GIB * GIB)


def test_a100_tp2_logs_set_the_off_hopper_nccl_figure() -> None:
    # requested - weights - KV of the two A100 TP 2 logs (0.67 GiB) less their TP 1
    # twins' (0.54-0.55 GiB, non-torch 0.13 there) leaves 0.25-0.30 GiB for NCCL.
    logs = {
        log.name: log
        for log in load_profile_logs(ROOT / "tests" / "data" / "memory_logs")
        if log.model == "Qwen/Qwen2-7B-Instruct" and log.total_gpu_memory_gib > 70
    }
    rest = {}
    for name, log in logs.items():
        requested = math.ceil(log.total_gpu_memory_gib * GIB * log.gpu_memory_utilization) / GIB
        assert log.weights_gib is not None
        assert log.kv_cache_gib is not None
        rest[name] = requested - log.weights_gib - log.kv_cache_gib
    tp2 = [v for k, v in rest.items() if "tp2" in k]
    tp1 = [v for k, v in rest.items() if "tp2" not in k]
    assert len(tp2) == len(tp1) == 2
    increase = statistics.mean(tp2) - statistics.mean(tp1) + 0.13
    assert abs(increase - NCCL_WITHOUT_NVLS_GIB) <= 0.06


def test_serve_settings_take_the_gpu_capability() -> None:
    config = parse_model_config(json.loads(LLAMA.read_text()))
    pcie = ServeSettings(total_gpu_bytes=80 * GIB, vllm_version="0.19", gpu_capability=(8, 9))
    hopper = ServeSettings(total_gpu_bytes=80 * GIB, vllm_version="0.19")
    (a, _) = estimate_memory_budget(config, pcie, Parallelism(tp=2))
    (b, _) = estimate_memory_budget(config, hopper, Parallelism(tp=2))
    assert a.non_torch_bytes < b.non_torch_bytes
    assert a.non_torch.error_bytes > b.non_torch.error_bytes


def test_mxfp4_experts_keep_no_fused_moe_caches() -> None:
    # gpt-oss logs its sampler's peak alone: 7.38 GiB on vLLM 0.11 (llm-d-benchmark),
    # 2.87 GiB at TP 2 on 0.19 (llm-d-planner); bf16 MoE models add the caches.
    from kvpure.memory_profile.estimate import activation_gib, moe_workspace_gib

    shape = ModelShape(
        vocab_size=201088,
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=24,
        num_experts=32,
        num_experts_per_tok=4,
        moe_intermediate_size=2880,
    )

    def peak(quantization: str, release: str = "0.11.0") -> float:
        return activation_gib(
            COEFFICIENTS,
            shape,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            tp=1,
            last_stage=True,
            rules=memory_profile_rules(release),
            quantization=quantization,
        )

    assert abs(peak("mxfp4") - 7.38) <= COEFFICIENTS.activation_band
    caches = COEFFICIENTS.moe_factor * moe_workspace_gib(8192, shape, 1)
    # From 0.14 the bf16 experts' workspace persists through the sampler's run.
    assert peak("none", "0.14.0") - peak("mxfp4", "0.14.0") == pytest.approx(caches)
    # In 0.10-0.13 it is a per-layer temporary: the sampler's peak dominates alone.
    assert peak("none") == peak("mxfp4")


def test_fused_moe_caches_add_to_the_sampler_peak_from_0_14_only() -> None:
    """vLLM 0.13.0 ``UnquantizedFusedMoEMethod.forward_cuda`` calls ``fused_experts`` (caches
    freed per layer); 0.14.0 calls the modular kernel, whose workspace the persistent
    ``WorkspaceManager`` keeps. Qwen3-30B-A3B on an H100 with vLLM 0.10.2 logs 5.58 GiB of
    peak activation: the sampler's 5.67 alone, not 6.09 with the caches on top."""
    from kvpure.memory_profile.estimate import activation_gib, moe_workspace_gib

    shape = ModelShape(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=48,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    )

    def peak(release: str) -> float:
        return activation_gib(
            COEFFICIENTS,
            shape,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            tp=1,
            last_stage=True,
            rules=memory_profile_rules(release),
        )

    assert not memory_profile_rules("0.13.0").moe_workspace_persists
    assert memory_profile_rules("0.14.0").moe_workspace_persists
    assert abs(peak("0.10.2") - 5.58) <= COEFFICIENTS.activation_band
    caches = COEFFICIENTS.moe_factor * moe_workspace_gib(8192, shape, 1)
    assert peak("0.14.0") - peak("0.13.0") == pytest.approx(caches)


def test_flashinfer_sampling_drops_the_larger_sampler_peak(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vLLM 0.10.1.1 on one A100 80GB, Qwen2-7B-Instruct at utilization 0.5, whose log says
    # "Using FlashInfer for top-p & top-k sampling." and "Available KV cache memory:
    # 24.83 GiB" (dennislee22/vLLM-benchmarking, log/vllm-7B-1gpuA10080GB-0.5GRAM.log).
    qwen2 = ROOT / "tests" / "data" / "model_configs" / "qwen2_7b.json"
    argv = ["--gpu", "A100-80GB", "--vllm", "0.10.1", "--gpu-memory-utilization", "0.5"]

    def kv_range(*extra: str) -> tuple[float, float]:
        assert main(["plan", str(qwen2), *argv, *extra, "--json"]) == 0
        memory = json.loads(capsys.readouterr().out)["memory"][0]
        return memory["kv_cache_bytes_low"] / GIB, memory["kv_cache_bytes_high"] / GIB

    low, high = kv_range("--flashinfer-sampler")
    assert low <= 24.83 <= high
    assert kv_range()[1] < 24.83  # the PyTorch sort's float32 copies, charged by default


@pytest.mark.parametrize(
    ("config", "layers"),
    [
        ("qwen3_5_4b.json", "gated delta net"),
        ("qwen3_next_80b_a3b.json", "gated delta net"),
        ("kimi_linear_48b_a3b.json", "KDA"),
    ],
)
def test_linear_attention_hybrids_are_refused_in_one_line(
    config: str, layers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Their memory profile is not modelled (their weights are counted, but their
    # profiling peak was never fitted); the KV plan with --kv-cache-memory stays
    # available.
    path = str(ROOT / "tests" / "data" / "model_configs" / config)
    assert main(["plan", path, "--gpu", "L40S"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"its {layers} layers" in err
    assert "--kv-cache-memory" in err
    with pytest.raises(UnmodelledMemoryError):
        estimate_memory_budget(
            parse_model_config(json.loads(Path(path).read_text())),
            ServeSettings(total_gpu_bytes=48 * GIB),
        )
    assert main(["plan", path, "--gpu", "L40S", "--kv-cache-memory", "10GiB"]) == 0


def test_the_cuda_graph_estimate_follows_the_graphs_captured() -> None:
    # vLLM 0.26 (LukeJYK/AutoScientists vllm.log), Qwen3-Coder-30B-A3B with
    # --max-num-seqs 16: "Profiling CUDA graph memory: PIECEWISE=7 (largest=32), FULL=5
    # (largest=16)" and "Estimated CUDA graph memory: 0.15 GiB total"; the per-layer size
    # is fitted at 1024 sequences (51 + 51 graphs).
    from kvpure.memory_profile.estimate import REFERENCE_GRAPHS, cuda_graph_gib, cudagraph_count
    from kvpure.memory_profile.profile_logs import load_profile_logs

    assert cudagraph_count(16, 2048) == 7 + 5
    assert cudagraph_count(1024, 8192) == REFERENCE_GRAPHS == 51 + 51
    (log,) = (
        g
        for g in load_profile_logs(ROOT / "tests" / "data" / "memory_logs")
        if g.name == "qwen3_coder_30b_a3b_a100_v0_26.json"
    )
    assert log.cuda_graph_gib == 0.15
    got = cuda_graph_gib(
        COEFFICIENTS,
        log.shape,
        pp=1,
        max_num_seqs=log.max_num_seqs,
        max_num_batched_tokens=log.max_num_batched_tokens,
    )
    assert abs(got - 0.15) <= COEFFICIENTS.cuda_graph_band
    assert abs(cuda_graph_gib(COEFFICIENTS, log.shape, pp=1) - 0.15) > 0.9  # all 102 graphs


def test_nccl_at_tp_8_on_an_nvswitch_board_holds_more_than_at_tp_2() -> None:
    """Qwen3-32B at TP 8 on eight H100 80GB, vLLM 0.10.0 (fit split), sets 2.2 GiB; the same
    node's Qwen3-235B-A22B-FP8 TP 8 log is held out. TP 2 keeps 0.11's 0.55 GiB, off Hopper
    and Blackwell NCCL sets up no NVLS buffers, and the fused all-reduce's class is apart."""
    from kvpure.memory_profile.estimate import NCCL_TP8_NVSWITCH_GIB

    old = memory_profile_rules("0.11.0")
    assert non_torch_gib(COEFFICIENTS, tp=8, pp=1, rules=old) == NCCL_TP8_NVSWITCH_GIB == 2.2
    assert non_torch_gib(COEFFICIENTS, tp=2, pp=1, rules=old) == 0.55
    assert non_torch_gib(COEFFICIENTS, tp=8, pp=1, rules=old, capability=(8, 0)) == (
        NCCL_WITHOUT_NVLS_GIB
    )
    new = memory_profile_rules("0.19.0")
    assert non_torch_gib(COEFFICIENTS, tp=8, pp=1, rules=new) == 2.1
    wide = non_torch_band_gib(COEFFICIENTS, tp=8, rules=old)
    assert wide == COEFFICIENTS.non_torch_band + NCCL_UNLOGGED_BAND_GIB
    assert non_torch_band_gib(COEFFICIENTS, tp=2, rules=old) == COEFFICIENTS.non_torch_band
    log = next(
        x
        for x in load_profile_logs(ROOT / "tests" / "data" / "memory_logs")
        if x.name == "qwen3_32b_h100_v0_10_0_tp8.json"
    )
    assert log.split == "fit"
