"""``kvpure.plan_deployment`` and ``kvpure plan CONFIG --json`` give one answer (issue 23).

The property test draws flag sets at random and runs the command line in
process (``kvpure.cli.main``) and the API on the same flags: the printed JSON
is ``plan_deployment(...).to_json()``, and a refused input is the same error.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvpure
from kvpure.cli import main
from kvpure.cli.plan_api import plan_options
from kvpure.errors import InvalidFieldError, KVPureError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GIB = 2**30

_FLAG_OF = {
    "tensor_parallel_size": "--tensor-parallel-size",
    "max_model_len": "--max-model-len",
    "kv_cache_dtype": "--kv-cache-dtype",
    "block_size": "--block-size",
    "max_num_seqs": "--max-num-seqs",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "usage_context": "--usage-context",
}


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def argv_of(model: str, flags: dict[str, Any]) -> list[str]:
    argv = ["plan", str(EXAMPLES / model), "--json"]
    for name, value in flags.items():
        if value is None:
            continue
        if name == "gpu":
            argv += ["--gpu", value]
        elif name == "vllm":
            argv += ["--vllm", value]
        elif name == "kv_cache_memory":
            argv += ["--kv-cache-memory", value]
        elif name == "async_scheduling":
            argv.append("--async-scheduling" if value else "--no-async-scheduling")
        elif name == "prefix_caching":
            argv += ["--prefix-caching", "on" if value else "off"]
        else:
            argv += [_FLAG_OF[name], str(value)]
    return argv


FLAGS = st.fixed_dictionaries(
    {
        "gpu": st.sampled_from([None, "H100-80GB", "L4", "B200", "A100-40GB", "MI300X"]),
        "vllm": st.sampled_from([None, "0.26", "0.33", "0.34", "0.34.0"]),
        "kv_cache_memory": st.sampled_from([None, "2GiB", "12GiB", "40GiB"]),
        "max_model_len": st.sampled_from([None, 1024, 8192, "auto", "32K"]),
        "tensor_parallel_size": st.sampled_from([None, 1, 2]),
        "async_scheduling": st.sampled_from([None, True, False]),
        "prefix_caching": st.sampled_from([None, True, False]),
        "kv_cache_dtype": st.sampled_from([None, "fp8", "auto"]),
        "block_size": st.sampled_from([None, 16, 32]),
        "max_num_seqs": st.sampled_from([None, 8, 256]),
        "usage_context": st.sampled_from([None, "llm"]),
        "gpu_memory_utilization": st.sampled_from([None, 0.85]),
    }
)
MODELS = st.sampled_from(
    ["llama3_8b.json", "gemma3_12b.json", "gpt_oss_20b.json", "granite_4_0_h_small.json"]
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=MODELS, flags=FLAGS)
def test_the_cli_prints_what_the_api_returns(model: str, flags: dict[str, Any]) -> None:
    code, out, err = run_cli(argv_of(model, flags))
    kwargs = {name: value for name, value in flags.items() if value is not None}
    refused: KVPureError | None = None
    try:
        plan = kvpure.plan_deployment(EXAMPLES / model, **kwargs)
    except KVPureError as error:
        refused = error
    if refused is not None:
        # A refused input: the same one line, exit 2, nothing on stdout.
        assert (code, out) == (2, "")
        assert err.strip() == f"kvpure: error: {str(refused).splitlines()[0]}"
        return
    assert out == plan.to_json() + "\n"
    assert code == plan.exit_code
    assert json.loads(out)["vllm_version"] == plan.vllm_version


def test_a_config_mapping_plans_like_its_file() -> None:
    config = json.loads((EXAMPLES / "gemma3_12b.json").read_text())
    by_map = kvpure.plan_deployment(config, kv_cache_memory="20GiB", max_model_len="32K")
    by_file = kvpure.plan_deployment(
        EXAMPLES / "gemma3_12b.json", kv_cache_memory=20 * GIB, max_model_len=32768
    )
    assert by_map.to_json() == by_file.to_json()
    assert by_map.report is not None
    # Async scheduling on, as vLLM's default and the CLI: 89,562 tokens at 20 GiB, 32K.
    assert by_map.report.kv_cache_capacity_tokens == 89_562
    assert by_map.serve is not None
    assert by_map.serve["async_scheduling"].value is True
    # The library path (Deployment) resolves the same default.
    layout = kvpure.model_layout(kvpure.parse_model_config(config))
    report = kvpure.capacity_report(
        layout, kvpure.Deployment(kv_cache_memory_bytes=20 * GIB, max_model_len=32768)
    )
    assert report.kv_cache_capacity_tokens == 89_562


def test_the_text_is_the_commands_text() -> None:
    _, out, _ = run_cli(
        ["plan", str(EXAMPLES / "llama3_8b.json"), "--kv-cache-memory", "24GiB", "--vllm", "0.33"]
    )
    plan = kvpure.plan_deployment(EXAMPLES / "llama3_8b.json", kv_cache_memory="24GiB", vllm="0.33")
    assert out == plan.to_text() + "\n"
    assert plan.to_text().splitlines()[0].startswith("vLLM release: 0.33")
    assert plan.starts
    assert plan.verdict is not None
    assert plan.verdict.tokens == 196_608


def test_unknown_and_mistyped_flags_name_the_flag() -> None:
    with pytest.raises(InvalidFieldError, match="not a kvpure plan flag"):
        kvpure.plan_deployment(EXAMPLES / "llama3_8b.json", kv_cache_memory="8GiB", bogus=1)
    with pytest.raises(InvalidFieldError, match="on/off"):
        plan_options({"max_model_len": True})
    assert plan_options({"kv_cache_memory": [GIB, "2GiB"], "async_scheduling": False}) == {
        "kv_cache_memory": f"{GIB}B,2GiB",
        "async_scheduling": "off",
    }


def test_the_kv_memory_band_is_the_one_plan_estimates() -> None:
    # kvpure cache --gpu (branch trace) replays at these figures: the same as plan's estimate.
    band = kvpure.estimate_kv_cache_memory(
        EXAMPLES / "llama3_8b.json", gpu="H100-80GB", vllm="0.26", tensor_parallel_size=2
    )
    assert band.vllm_version == "0.26"
    assert band.gpu_memory_utilization == 0.92
    argv = ["plan", str(EXAMPLES / "llama3_8b.json"), "--gpu", "H100-80GB", "--vllm", "0.26"]
    _, out, _ = run_cli([*argv, "-tp", "2", "--json"])
    memory = json.loads(out)["memory"]
    assert band.low == tuple(m["kv_cache_bytes_low"] for m in memory)
    assert band.central == tuple(m["kv_cache_bytes"] for m in memory)
    assert band.high == tuple(m["kv_cache_bytes_high"] for m in memory)
    assert band.low < band.central < band.high
    assert band.kv_cache_memory_option("high") == ",".join(f"{b}B" for b in band.high)
    with pytest.raises(InvalidFieldError, match="replaces the estimate"):
        kvpure.estimate_kv_cache_memory(
            EXAMPLES / "llama3_8b.json", gpu="L4", kv_cache_memory="8GiB"
        )
