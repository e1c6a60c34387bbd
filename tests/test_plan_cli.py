"""``kvpure plan``: golden JSON out, readable report, one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.cli import main
from tests.conftest import GOLDEN_026


def test_json_output_equals_golden(capsys: pytest.CaptureFixture[str]) -> None:
    path = GOLDEN_026 / "gemma3_12b.json"
    assert main(["plan", str(path), "--vllm", "0.26", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = json.loads(path.read_text())
    assert got == {k: want[k] for k in ("output", "final_max_model_len", "derived")}


def test_bare_input_object_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = json.loads((GOLDEN_026 / "llama3_8b_pp2.json").read_text())
    path = tmp_path / "input.json"
    path.write_text(json.dumps(case["input"]))
    assert main(["plan", str(path), "--vllm", "0.26", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == case["output"]


def test_planning_error_is_json_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    path = GOLDEN_026 / "mimo_dflash_padding_unsupported.json"
    assert main(["plan", str(path), "--vllm", "0.26", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    want = json.loads(path.read_text())["error"]
    assert error["type"] == "PageSizeUnificationError"
    assert error["vllm_type"] == want["type"] == "NotImplementedError"
    assert error["message"] == want["message"]


def test_readable_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(GOLDEN_026 / "gemma3_12b.json"), "--vllm", "0.26"]) == 0
    out = capsys.readouterr().out
    assert "num_blocks: 20480" in out
    assert "136,040 tokens" in out
    assert out.count("group ") == 6


def _bad_case(tmp_path: Path, edit: str) -> Path:
    case = json.loads((GOLDEN_026 / "t_one_worker_full.json").read_text())
    inp = case["input"]
    spec = inp["kv_cache_specs"][0]["layer_1"]
    if edit == "head_size":
        spec["head_size"] = 0
    elif edit == "type":
        spec["type"] = "NoSuchSpec"
    elif edit == "dtype":
        spec["dtype"] = "float12"
    elif edit == "missing":
        del spec["num_kv_heads"]
    elif edit == "workers":
        inp["available_memory"].append(1)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(inp))
    return path


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ("head_size", "kv_cache_specs[0].layer_1.head_size"),
        ("type", "kv_cache_specs[0].layer_1.type"),
        ("dtype", "kv_cache_specs[0].layer_1.dtype"),
        ("missing", "kv_cache_specs[0].layer_1.num_kv_heads"),
        ("workers", "available_memory"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str, field: str
) -> None:
    assert main(["plan", str(_bad_case(tmp_path, edit)), "--vllm", "0.26", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert field in err


def test_missing_file_and_bad_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path / "nope.json"), "--vllm", "0.26"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["plan", str(bad), "--vllm", "0.26"]) == 2
    assert capsys.readouterr().err.count("kvpure: error") == 2
