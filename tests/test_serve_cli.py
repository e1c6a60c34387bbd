"""``kvpure plan CONFIG --gpu ...``: the verdict, the fixes, per-GPU memory, settings, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.cli.serve_options import SERVE_OPTIONS, SERVE_SWITCHES
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import plan_deployment
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.verdict import serve_verdict, starts

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
GPT_OSS_120B = str(ROOT / "tests" / "data" / "serve" / "gpt_oss_120b.json")
GIB = 2**30
MIB = 2**20


def layout_of(path: str) -> ModelLayout:
    return model_layout(parse_model_config(json.loads(Path(path).read_text())))


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["plan", *argv, "--json"])
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return code, data


def verdict_of(data: dict[str, object]) -> dict[str, object]:
    verdict = data["verdict"]
    assert isinstance(verdict, dict)
    return verdict


def test_gpt_oss_120b_async_scheduling_example(capsys: pytest.CaptureFixture[str]) -> None:
    # The worked example: 5.38 GiB of KV cache on an H100 is 147,318 tokens
    # without async scheduling and about 139,000 under vLLM 0.26's default (async on:
    # the 18 sliding-window layers keep 2 x 8192 tokens in flight instead of 8192).
    base = [GPT_OSS_120B, "--gpu", "H100", "--kv-cache-memory", "5.38GiB"]
    code, off = run_json([*base, "--no-async-scheduling"], capsys)
    assert code == 0
    assert verdict_of(off)["kv_cache_capacity_tokens"] == 147318
    code, default = run_json(base, capsys)
    assert code == 0
    tokens = verdict_of(default)["kv_cache_capacity_tokens"]
    assert isinstance(tokens, int)
    assert 138_500 <= tokens <= 139_500  # "about 139,000" (issue 12)
    groups = default["groups"]
    assert isinstance(groups, list)
    # SlidingWindowSpec.max_memory_usage_bytes: cdiv(127 + 2 * 8192, 16) + 1 blocks.
    assert [g["blocks_per_request"] for g in groups] == [1033, 8192]
    settings = default["settings"]
    assert isinstance(settings, dict)
    assert settings["async_scheduling"] == {"value": True, "source": "vllm default"}


def test_settings_are_keyed_by_vllm_names_with_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = run_json([LLAMA, "--gpu", "L4", "--kv-cache-memory", "8GiB", "-tp", "2"], capsys)
    assert code == 0
    settings = data["settings"]
    assert isinstance(settings, dict)
    for name in (
        "async_scheduling",
        "max_num_batched_tokens",
        "max_num_seqs",
        "block_size",
        "attention_backend",
        "kv_cache_dtype",
        "enable_prefix_caching",
        "mamba_cache_mode",
        "disable_hybrid_kv_cache_manager",
        "max_model_len",
    ):
        assert set(settings[name]) >= {"value", "source"}, name
    assert settings["max_num_batched_tokens"] == {"value": 2048, "source": "gpu default"}
    assert settings["tensor_parallel_size"] == {"value": 2, "source": "flag"}
    assert settings["max_model_len"] == {"value": 8192, "source": "model config"}
    assert data["num_blocks"] == 8 * GIB // (16 * 32 * 4 * 128 * 2 * 2)  # the plan beside it
    assert verdict_of(data)["starts"] is True


def test_text_report_opens_with_the_verdict_and_lists_settings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", LLAMA, "--gpu", "a100-80gb", "--kv-cache-memory", "16GiB"]) == 0
    out = capsys.readouterr().out
    release, first = out.splitlines()[:2]
    assert release.startswith("vLLM release: 0.34")
    assert (
        first
        == "Verdict: starts; 131,072 tokens of KV cache; 16.00 requests of 8,192 tokens at once."
    )
    assert "max_num_batched_tokens           2,048            (gpu default)" in out
    assert "GPU: A100-80GB (NVIDIA A100-SXM4-80GB" in out


def test_per_gpu_kv_cache_memory_takes_each_workers_figure(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vLLM plans each worker on its own memory and keeps the smallest block count.
    code, both = run_json([LLAMA, "--kv-cache-memory", "12.13GiB,11.33GiB", "-tp", "2"], capsys)
    assert code == 0
    code, low = run_json([LLAMA, "--kv-cache-memory", "11.33GiB", "-tp", "2"], capsys)
    assert both["num_blocks"] == low["num_blocks"]
    code, high = run_json([LLAMA, "--kv-cache-memory", "12.13GiB", "-tp", "2"], capsys)
    assert high["num_blocks"] != low["num_blocks"]
    # parse_memory_bytes: 12.13GiB = 1213 * 2**30 // 100 bytes, exactly.
    assert both["available_memory"] == [1213 * GIB // 100, 1133 * GIB // 100]


def test_the_suggested_max_model_len_is_the_largest_that_starts() -> None:
    layout = layout_of(LLAMA)
    flags = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=2048)
    _, verdict, planned = serve_verdict(layout, flags)
    assert not verdict.starts
    assert planned is None
    fix = verdict.fixes[0]
    assert fix.startswith("--max-model-len ")
    best = int(fix.split()[1])
    # Brute force: plan every length up to the one asked for.
    fitting = [n for n in range(1, 2049) if starts(layout, replace(flags, max_model_len=n))]
    assert fitting == list(range(1, best + 1))
    # vLLM's own estimate in its error message agrees.
    assert verdict.error is not None
    assert f"estimated maximum model length is {best}." in str(verdict.error)


def test_the_suggested_memory_is_the_least_that_starts() -> None:
    layout = layout_of(GPT_OSS_120B)
    flags = ServeFlags(kv_cache_memory_bytes=(3 * GIB,))
    _, verdict, _ = serve_verdict(layout, flags)
    memory = [fix for fix in verdict.fixes if fix.startswith("--kv-cache-memory")]
    mib = int(memory[0].split()[1].removesuffix("MiB"))
    assert starts(layout, replace(flags, kv_cache_memory_bytes=(mib * MIB,)))
    assert not starts(layout, replace(flags, kv_cache_memory_bytes=((mib - 1) * MIB,)))
    fp8 = [fix for fix in verdict.fixes if fix.startswith("--kv-cache-dtype fp8")]
    serve = resolve_serve_settings(layout, replace(flags, kv_cache_dtype="fp8"))
    _, plan = plan_deployment(layout, serve.deployment)
    assert fp8 == [
        f"--kv-cache-dtype fp8  (starts with {plan.workers[0].kv_cache_capacity_tokens:,} tokens)"
    ]


def test_a_deployment_that_does_not_start_prints_the_fixes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", LLAMA, "--kv-cache-memory", "100MiB", "--vllm", "0.26"]) == 2
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("vLLM release: 0.26")
    assert lines[1] == "Verdict: does NOT start (8,192-token requests do not fit)."
    assert "  --max-model-len 800  (the largest that starts)" in lines
    assert any(line.startswith("  --kv-cache-memory 1024MiB") for line in lines)
    assert len(captured.err.strip().splitlines()) == 1
    code, data = run_json([LLAMA, "--kv-cache-memory", "100MiB"], capsys)
    assert code == 2
    assert verdict_of(data)["starts"] is False
    assert "error" in data
    assert "settings" in data


def test_data_parallel_engines_are_planned_alike(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json([LLAMA, "--kv-cache-memory", "16GiB", "-dp", "4"], capsys)
    assert code == 0
    assert verdict_of(data)["data_parallel_size"] == 4
    assert data["num_blocks"] == 8192
    assert "x4 engines" in str(verdict_of(data)["line"])


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--gpu", "H1000"], "unknown GPU; known: H100-80GB"),
        (["--gpu", "H100", "--gpu-memory", "80GiB"], "--gpu-memory"),
        (["--gpu-capability", "8.9"], "--gpu-memory is required"),
        (["--gpu-memory", "48GiB", "--gpu-capability", "eight"], "--gpu-capability"),
        (["--gpu-memory", "48GiB", "--gpu-vendor", "intel"], "vendor"),
        (["--usage-context", "batch"], "--usage-context"),
        (["--kv-transfer-config", "{nope"], "--kv-transfer-config"),
        (["--kv-transfer-config", '{"kv_role":"kv_both"}'], "kv_connector"),
        (["--speculative-config", '{"num_speculative_tokens":3}'], "method"),
        (["-dp", "0"], "--data-parallel-size"),
        (["--max-num-seqs", "x"], "--max-num-seqs"),
        (["-tp", "2", "--kv-cache-memory", "1GiB,1GiB,1GiB"], "one figure per GPU"),
        (["--kv-cache-memory", "1GiB,"], "--kv-cache-memory"),
        (["--block-size", "8", "--gpu", "H100"], "no attention backend"),
        (
            [
                "--speculative-config",
                '{"method":"ngram","num_speculative_tokens":3}',
                "--async-scheduling",
                "--vllm",
                "0.26",  # 0.26's V1 runner refuses it; 0.34 takes any method
            ],
            "--async-scheduling",
        ),
    ],
)
def test_bad_serve_flags_are_one_line_and_exit_2(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", LLAMA, "--kv-cache-memory", "8GiB", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kvpure: error: ")
    assert needle in lines[0]


def test_a_custom_gpu_follows_the_same_rules(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [LLAMA, "--kv-cache-memory", "8GiB", "--gpu-memory", "96GiB", "--gpu-capability", "9.0"]
    code, data = run_json(argv, capsys)
    assert code == 0
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert settings["max_num_batched_tokens"]["value"] == 8192
    code, data = run_json([*argv[:3], "--gpu-memory", "48GiB", "--usage-context", "llm"], capsys)
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert settings["max_num_batched_tokens"]["value"] == 8192
    assert settings["max_num_seqs"]["value"] == 256


def test_help_lists_the_serve_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    for option in SERVE_OPTIONS:
        for flag in option.flags:
            assert flag in out, flag
    for flag, _, _, _ in SERVE_SWITCHES:
        assert flag in out, flag


def test_serve_flags_are_refused_for_a_planning_case(capsys: pytest.CaptureFixture[str]) -> None:
    case = ROOT / "tests" / "data" / "vllm-0.26.0" / "llama3_8b.json"
    assert main(["plan", str(case), "--gpu", "H100"]) == 2
    assert "--gpu" in capsys.readouterr().err


def test_an_mla_model_on_an_l4_gets_triton_mla_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    # vllm/platforms/cuda.py: on 8.9 no FlashAttention MLA (9.x), FlashMLA (9.x/10.x) or
    # FlashInfer MLA (10.x) -> Triton MLA, whose kernels take 16 -> 16-token blocks.
    lite = str(ROOT / "examples" / "deepseek_v2_lite.json")
    code, data = run_json([lite, "--gpu", "L4", "--kv-cache-memory", "9GiB", "-tp", "2"], capsys)
    assert code == 0
    groups = data["groups"]
    assert isinstance(groups, list)
    assert {g["block_size"] for g in groups} == {16}
    model = data["model"]
    assert isinstance(model, dict)
    assert model["attention_backend"] == "TRITON_MLA"


def test_align_mode_needs_a_batch_of_at_least_one_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vllm/config/vllm.py (VllmConfig's block-size checks): in Mamba cache mode "align",
    # block_size <= max_num_batched_tokens, or vLLM refuses to start. Granite-4.0-H-Small's
    # attention block is raised to 528 tokens (16 * cdiv(2147840, 16 * 4096)).
    granite = str(ROOT / "examples" / "granite_4_0_h_small.json")
    argv = ["plan", granite, "--kv-cache-memory", "24GiB", "--max-model-len", "64K"]
    align = ["--enable-prefix-caching", "--mamba-cache-mode", "align"]
    assert main([*argv, *align, "--max-num-batched-tokens", "527"]) == 2
    assert "align needs at least the block size (528 tokens)" in capsys.readouterr().err
    assert main([*argv, *align, "--max-num-batched-tokens", "528"]) == 0
