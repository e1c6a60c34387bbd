"""The report's first line names the release planned as and, when it differs, the one named.

``--vllm 0.13`` plans by the oldest reproduced release whose rules cover it
(0.26 for 0.10-0.26: tests/test_memory_release_flags.py) and estimates the
memory with 0.13's own start-up profile (vllm 0.11.0-0.14 ``gpu_worker.py``);
the line, the JSON and the API value say both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.cli.plan_api import plan_deployment

LLAMA = Path(__file__).resolve().parents[1] / "examples" / "llama3_8b.json"
EXACT = "(the nearest release kvpure plans exactly: 0.26, 0.33 or 0.34)"
BOTH = f"vLLM release: memory profile of vLLM 0.13; planning as 0.26 {EXACT}"
NAMED = f"vLLM release: planning vLLM 0.13 as 0.26 {EXACT}"
PLAIN = "vLLM release: 0.26 (--vllm 0.26, 0.33 or 0.34; default 0.34)"


def _first_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["plan", str(LLAMA), *argv]) == 0
    return capsys.readouterr().out.splitlines()[0]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["plan", str(LLAMA), *argv, "--json"]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--gpu", "H100-80GB", "--vllm", "0.13"], BOTH),
        (["--gpu", "H100-80GB", "--vllm", "0.13", "--sweep", "max_num_seqs=128,256"], BOTH),
        (["--gpu", "H100-80GB", "--vllm", "0.26", "--memory-profile-version", "0.13"], BOTH),
        # the memory is given, no profile is estimated: only the release named and planned
        (["--kv-cache-memory", "20GiB", "--vllm", "0.13"], NAMED),
        (["--gpu", "H100-80GB", "--vllm", "0.13", "--sweep", "kv_cache_memory=10GiB,20GiB"], NAMED),
        (["--gpu", "H100-80GB", "--vllm", "0.26"], PLAIN),
        (["--gpu", "H100-80GB", "--vllm", "0.26.0", "--memory-profile-version", "0.26"], PLAIN),
        (["--kv-cache-memory", "20GiB", "--vllm", "0.26"], PLAIN),
    ],
)
def test_cli_first_line(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _first_line(argv, capsys) == line


def test_cli_json_names_the_memory_profile_release(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(["--gpu", "H100-80GB", "--vllm", "0.13"], capsys)
    assert list(data)[:2] == ["vllm_version", "memory_profile_version"]
    assert (data["vllm_version"], data["memory_profile_version"]) == ("0.26", "0.13")
    swept = _json(["--gpu", "H100-80GB", "--vllm", "0.13", "--sweep", "max_num_seqs=128"], capsys)
    assert (swept["vllm_version"], swept["memory_profile_version"]) == ("0.26", "0.13")
    for argv in (["--gpu", "H100-80GB", "--vllm", "0.26"], ["--kv-cache-memory", "20GiB"]):
        assert "memory_profile_version" not in _json(argv, capsys)


def test_api_report_says_both() -> None:
    plan = plan_deployment(LLAMA, gpu="H100-80GB", vllm="0.13")
    assert (plan.vllm_version, plan.memory_profile_version) == ("0.26", "0.13")
    assert plan.to_text().splitlines()[0] == BOTH
    assert plan.to_dict()["memory_profile_version"] == "0.13"
    given = plan_deployment(LLAMA, kv_cache_memory="20GiB", vllm="0.13")
    assert (given.vllm_version, given.memory_profile_version) == ("0.26", None)
    assert given.to_text().splitlines()[0] == NAMED
    same = plan_deployment(LLAMA, gpu="H100-80GB", vllm="0.26")
    assert same.memory_profile_version is None
    assert same.to_text().splitlines()[0] == PLAIN


# vLLM's unset gpu_memory_utilization: 0.9 up to 0.19 (vllm 0.14.0 and 0.19.0
# config/cache.py ``Field(default=0.9)``), 0.92 from 0.20 (vllm 0.20.0, 0.21.0 and
# 0.26.0 ``Field(default=0.92)``)
@pytest.mark.parametrize(
    ("argv", "value", "source"),
    [
        (["--vllm", "0.13"], 0.9, "vllm default"),
        (["--vllm", "0.26", "--memory-profile-version", "0.14"], 0.9, "vllm default"),
        (["--vllm", "0.19"], 0.9, "vllm default"),
        (["--vllm", "0.20"], 0.92, "vllm default"),
        (["--vllm", "0.22"], 0.92, "vllm default"),
        (["--vllm", "0.26"], 0.92, "vllm default"),
        (["--vllm", "0.13", "--gpu-memory-utilization", "0.85"], 0.85, "flag"),
    ],
)
def test_settings_show_the_memory_profile_releases_utilization(
    argv: list[str], value: float, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The estimate sizes memory from the memory profile's release's default, and the
    settings say that value, in the JSON, the text and the API alike."""
    data = _json(["--gpu", "H100-80GB", *argv], capsys)
    settings = data["settings"]
    assert isinstance(settings, dict)
    assert settings["gpu_memory_utilization"] == {"value": value, "source": source}
    assert main(["plan", str(LLAMA), "--gpu", "H100-80GB", *argv]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.strip().startswith("gpu_memory_util"))
    assert row.split(maxsplit=2)[1:] == [f"{value:g}", f"({source})"]
    assert f"gpu_memory_utilization ({value:.2f})" in text  # the budget's own line


def test_api_settings_show_the_memory_profile_releases_utilization() -> None:
    plan = plan_deployment(LLAMA, gpu="H100-80GB", vllm="0.13")
    assert plan.serve is not None
    assert plan.serve["gpu_memory_utilization"].value == 0.9
    assert plan.to_dict()["settings"]["gpu_memory_utilization"]["value"] == 0.9  # type: ignore[index]  # JSON object
