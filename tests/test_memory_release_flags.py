"""``--vllm`` for any V1 release's memory profile, and the TP > 1 non-torch term per GPU class.

Expected values come from vLLM's sources and logs: vllm 0.11.0
``vllm/v1/worker/gpu_worker.py`` (no CUDA-graph term; ``gpu_memory_utilization``
0.9 in ``vllm/config/cache.py``), vllm 0.21.0 and 0.27.0 ``gpu_worker.py`` (the
CUDA-graph estimate subtracted; 0.92 unset), and the bundled H100 logs
(tests/data/memory_logs: 2.06-2.17 GiB non-torch with TP > 1 from 0.15, 0.29
GiB logged on 0.11 in the issue).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.cli.memory_release import planning_release, split_release_options
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.estimate import (
    COEFFICIENTS,
    non_torch_band_gib,
    non_torch_gib,
    tp_non_torch_measured,
)
from kvpure.memory_profile.releases import V0EngineError, memory_profile_rules
from kvpure.memory_profile.sharding import Parallelism
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
        ("0.10.1", "0.26", "0.10-0.14"),
        ("0.11", "0.26", "0.10-0.14"),
        ("v0.16.0", "0.26", "0.15-0.16"),
        ("0.19.0", "0.26", "0.17-0.20"),
        ("0.22", "0.26", "0.21-0.26"),
        ("0.27.1", "0.33", "0.27-0.33"),
        ("0.31", "0.33", "0.27-0.33"),
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


def test_0_11_is_the_older_formula_not_0_26s(capsys: pytest.CaptureFixture[str]) -> None:
    old = _plan(["--gpu", "H100-80GB", "--vllm", "0.11"], capsys)["memory"][0]
    new = _plan(["--gpu", "H100-80GB", "--vllm", "0.26"], capsys)["memory"][0]
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


def test_tp_non_torch_is_logged_on_hopper_hgx_only() -> None:
    rules = memory_profile_rules("0.19.0")
    h100 = non_torch_gib(COEFFICIENTS, tp=2, pp=1, rules=rules, gpu="NVIDIA H100 80GB HBM3")
    assert h100 == COEFFICIENTS.non_torch_tensor_parallel
    assert tp_non_torch_measured(None)
    assert tp_non_torch_measured("H200")
    low = COEFFICIENTS.non_torch_tensor_parallel_nccl_only
    high = COEFFICIENTS.non_torch_tensor_parallel
    for gpu in ("A100-80GB", "L40S", "RTX-4090", "custom"):
        middle = non_torch_gib(COEFFICIENTS, tp=2, pp=1, rules=rules, gpu=gpu)
        band = non_torch_band_gib(COEFFICIENTS, tp=2, rules=rules, gpu=gpu)
        assert middle - band <= low
        assert high <= middle + band
        # One GPU, and releases before 0.15 (NCCL's state alone), are not widened.
        assert non_torch_gib(COEFFICIENTS, tp=1, pp=1, rules=rules, gpu=gpu) == (
            COEFFICIENTS.non_torch_single
        )
        old = memory_profile_rules("0.11")
        assert non_torch_band_gib(COEFFICIENTS, tp=2, rules=old, gpu=gpu) == (
            COEFFICIENTS.non_torch_band
        )


def test_the_cli_widens_tp_bands_off_hopper(capsys: pytest.CaptureFixture[str]) -> None:
    def half_width(gpu: str, tp: str) -> int:
        m = _plan(["--gpu", gpu, "--tensor-parallel-size", tp, "--vllm", "0.19"], capsys)
        worker = m["memory"][0]
        return int(worker["kv_cache_bytes_high"] - worker["kv_cache_bytes"])

    assert half_width("A100-80GB", "2") > half_width("A100-80GB", "1") + 0.5 * GIB
    assert half_width("H100-80GB", "2") < half_width("H100-80GB", "1") + 0.1 * GIB


def test_serve_settings_take_the_gpu_name() -> None:
    config = parse_model_config(json.loads(LLAMA.read_text()))
    on = ServeSettings(total_gpu_bytes=80 * GIB, vllm_version="0.19", gpu="L40S")
    (a, _) = estimate_memory_budget(config, on, Parallelism(tp=2))
    (b, _) = estimate_memory_budget(
        config, ServeSettings(total_gpu_bytes=80 * GIB), Parallelism(tp=2)
    )
    assert a.non_torch.error_bytes > b.non_torch.error_bytes
