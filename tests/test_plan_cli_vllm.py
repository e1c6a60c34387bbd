"""``kvpure plan CASE.json --vllm X``: the release chosen by flag > file key > default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from tests.test_golden_planning_034 import GOLDEN_034, assert_same

CASE = GOLDEN_034 / "llama3_8b_autofit_max_model_len.json"


def _case() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CASE.read_text())
    return data


def _write(tmp_path: Path, obj: object) -> Path:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(obj))
    return path


def test_json_is_the_0_34_golden_shape_with_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(CASE), "--vllm", "0.34", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = _case()
    assert list(got) == ["vllm_version", "final_max_model_len", "output", "derived"]
    assert got["vllm_version"] == "0.34"
    for key in ("final_max_model_len", "output", "derived"):
        assert_same(got[key], want[key], key)
    assert got["final_max_model_len"] == 49136  # vLLM 0.34: one block lower than 0.26's 49152


@pytest.mark.parametrize(
    ("flag", "file_key", "expected"),
    [
        (None, None, "0.34"),
        (None, "0.33", "0.33"),
        (None, "0.33.0", "0.33"),
        ("0.34.0", "0.33", "0.34"),
        ("0.33", None, "0.33"),
    ],
)
def test_flag_beats_the_file_key_beats_the_default(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str | None,
    file_key: str | None,
    expected: str,
) -> None:
    case = _case()
    if file_key is not None:
        case["vllm_version"] = file_key
    args = ["plan", str(_write(tmp_path, case)), "--json"]
    if flag is not None:
        args += ["--vllm", flag]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["vllm_version"] == expected


def test_a_bare_input_carries_its_key_beside_vllm_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = {**_case()["input"], "vllm_version": "0.33"}
    assert main(["plan", str(_write(tmp_path, bare)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm_version"] == "0.33"


def test_meta_is_never_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = _case()
    case["meta"] = {**case["meta"], "vllm_version": "0.26"}
    assert main(["plan", str(_write(tmp_path, case)), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vllm_version"] == "0.34"


def test_unknown_flag_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(CASE), "--vllm", "0.99", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "kvpure: error: --vllm: unknown vLLM version '0.99' (known: 0.26, 0.33, 0.34)\n"
    )


def test_unknown_file_key_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = {**_case(), "vllm_version": "0.30"}
    assert main(["plan", str(_write(tmp_path, case)), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("kvpure: error: vllm_version: unknown vLLM version '0.30'")


def test_help_lists_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0
    assert "--vllm VERSION" in capsys.readouterr().out


def test_text_report_names_the_release_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(CASE), "--vllm", "0.33"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "planned as vLLM 0.33"


def test_planning_error_under_0_34_has_the_0_34_hint(capsys: pytest.CaptureFixture[str]) -> None:
    path = GOLDEN_034 / "llama3_8b_not_enough_memory.json"
    assert main(["plan", str(path), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    want = json.loads(path.read_text())["error"]
    assert error["type"] == "InsufficientKVCacheMemoryError"
    assert (error["vllm_type"], error["message"]) == (want["type"], want["message"])
