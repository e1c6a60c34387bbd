"""``kvpure plan`` as a new user meets it: help, reports, sweeps, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.cli.plan_options import OPTIONS
from tests.conftest import GOLDEN_026

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama3_8b.json")


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for option in OPTIONS:
        for flag in option.flags:
            assert flag in out, flag
    for text in ("--json", "--sweep", "FILE", "config.json", "planning case", "examples:"):
        assert text in out


def test_report_for_a_bundled_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", LLAMA, "--kv-cache-memory", "16GiB"]) == 0
    out = capsys.readouterr().out
    # 16 GiB / (32 layers x 64 KiB) = 8192 blocks of 16 tokens.
    assert "8,192 (8,191 usable" in out
    assert "131,072 tokens" in out
    assert "16.00x requests of 8,192 tokens" in out
    assert "To fit more:" in out


def test_json_report_for_a_config(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", LLAMA, "--kv-cache-memory", "16GiB", "--kv-cache-dtype", "fp8", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_blocks"] == 16384
    assert data["model"]["kv_cache_dtype"] == "float8_e4m3fn"
    assert data["groups"][0]["page_size_bytes"] == 32768


def test_auto_fit(capsys: pytest.CaptureFixture[str]) -> None:
    gemma = str(ROOT / "examples" / "gemma3_12b.json")
    assert main(["plan", gemma, "--kv-cache-memory", "4GiB", "--max-model-len", "auto"]) == 0
    out = capsys.readouterr().out
    assert "auto-fitted; the model allows 131,072" in out


def test_sweep_prints_one_row_per_value(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", LLAMA, "--kv-cache-memory", "16GiB", "--sweep", "max_model_len=2048,8192"])
    assert code == 0
    release, *lines = capsys.readouterr().out.strip().splitlines()
    assert release.startswith("vLLM release: 0.34")
    assert len(lines) == 3
    assert lines[1].startswith("2048")
    assert "64.00x" in lines[1]
    assert "16.00x" in lines[2]


def test_planning_case_json_is_the_planners_golden_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = GOLDEN_026 / "gemma3_12b.json"
    assert main(["plan", str(case), "--vllm", "0.26", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    golden = json.loads(case.read_text())
    assert data == {key: golden[key] for key in ("output", "final_max_model_len", "derived")}


def test_planning_case_error_json(capsys: pytest.CaptureFixture[str]) -> None:
    case = GOLDEN_026 / "llama3_8b_not_enough_memory.json"
    assert main(["plan", str(case), "--vllm", "0.26", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["error"]["vllm_type"] == "ValueError"
    assert "32768" in data["error"]["message"]


def test_planning_case_human_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(GOLDEN_026 / "gpt_oss_20b.json"), "--vllm", "0.26"]) == 0
    out = capsys.readouterr().out
    assert "1,643,116 tokens" in out
    assert "sliding_window (128)" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "no/such/config.json", "--kv-cache-memory", "1GiB"], "No such file"),
        (["plan", str(ROOT / "README.md")], "invalid JSON"),
        (["plan", LLAMA], "--kv-cache-memory is required"),
        (["plan", LLAMA, "--kv-cache-memory", "foo"], "--kv-cache-memory"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--block-size", "0"], "--block-size"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "-tp", "x"], "--tensor-parallel-size"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "-tp", "3"], "tensor_parallel_size"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--kv-cache-dtype", "int2"], "int2"),
        (
            ["plan", LLAMA, "--kv-cache-memory", "1GiB", "--max-model-len", "lots"],
            "--max-model-len",
        ),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--max-model-len", "1M"], "8192"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--attention-backend", "x"], "FLASH_ATTN"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--prefix-caching", "maybe"], "on or off"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--sweep", "colour=1"], "--sweep"),
        (
            ["plan", LLAMA, "--kv-cache-memory", "1GiB", "--sweep", "block_size=16,0"],
            "--block-size",
        ),
        (
            ["plan", LLAMA, "--kv-cache-memory", "100MiB", "--vllm", "0.26"],
            "estimated maximum model length is 800",
        ),
        # 0.34 holds the null block back: one 16-token block less than 0.26's 800, as the
        # llama3_8b_not_enough_memory golden goes from 32768 (0.26) to 32752 (0.34).
        (["plan", LLAMA, "--kv-cache-memory", "100MiB"], "estimated maximum model length is 784"),
        (["plan", LLAMA, "--kv-cache-memory", "1GiB", "--bogus"], "unrecognized arguments"),
        (["plan", str(GOLDEN_026 / "llama3_8b.json"), "-tp", "2"], "config.json"),
        (["plan", str(GOLDEN_026 / "hashes.json")], "neither a model's config.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("kvpure: error: ")
    assert needle in lines[0]
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("architecture", ["NotAModelForCausalLM"])
def test_unknown_architecture_and_missing_field(
    architecture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.loads(Path(LLAMA).read_text())
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps(config | {"architectures": [architecture]}))
    assert main(["plan", str(unknown), "--kv-cache-memory", "1GiB"]) == 2
    err = capsys.readouterr().err
    assert architecture in err
    assert "LlamaForCausalLM" in err
    del config["num_key_value_heads"], config["num_attention_heads"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(config))
    assert main(["plan", str(missing), "--kv-cache-memory", "1GiB"]) == 2
    err = capsys.readouterr().err
    assert "num_attention_heads" in err
    assert len(err.strip().splitlines()) == 1


def test_a_subprocess_run_of_the_installed_command() -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "kvpure", "plan", LLAMA, "--kv-cache-memory", "24GiB"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert "196,608 tokens" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "kvpure", "plan", LLAMA, "--kv-cache-memory", "24GiB", "-pp", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "kvpure: error: --pipeline-parallel-size: must be at least 1 (got 0)"
    ]
    assert bad.stdout == ""


def test_demo_explains_the_bundled_llama(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # 24 GiB / 2 MiB per block = 12288 blocks of 16 tokens.
    assert "12,288 (12,287 usable" in out
    assert "196,608 tokens" in out
    assert "--sweep max_model_len=" in out
    assert "96.00x" in out


def test_hybrid_report_explains_the_raised_block_size(capsys: pytest.CaptureFixture[str]) -> None:
    granite = str(ROOT / "examples" / "granite_4_0_h_small.json")
    assert main(["plan", granite, "--kv-cache-memory", "24GiB", "--max-model-len", "64K"]) == 0
    out = capsys.readouterr().out
    # Granite-4.0-H-Small: conv (8192 + 2*128, 3) + SSM (128, 64, 128) in bf16 = 2147840 B;
    # one attention token 8 x 256 x 2 = 4096 B -> 16 * cdiv(2147840, 65536) = 528 tokens.
    assert "raised from 16 to 528 tokens" in out
    assert "mamba" in out
    assert "2,162,688 (data 2,147,840)" in out


def test_a_model_folder_is_read_through_its_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(Path(LLAMA).read_text())
    assert main(["plan", str(tmp_path), "--kv-cache-memory", "16GiB"]) == 0
    assert "131,072 tokens" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["plan", str(empty), "--kv-cache-memory", "16GiB"]) == 2
    assert "config.json" in capsys.readouterr().err


def test_planning_case_json_text_is_the_planners_rendering(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kvpure.interop.planning import parse_planning_input, plan_input, render_plan

    case = GOLDEN_026 / "t_one_worker_hybrid.json"
    assert main(["plan", str(case), "--vllm", "0.26", "--json"]) == 0
    plan = plan_input(
        parse_planning_input(json.loads(case.read_text())["input"], vllm_version="0.26")
    )
    assert capsys.readouterr().out == json.dumps(render_plan(plan), indent=1) + "\n"
