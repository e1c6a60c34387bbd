"""The ``kvpure`` command behaves as uv, ruff and git do at its front door."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvpure
from kvpure.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "kvpure", *args], input=stdin, capture_output=True, check=False
    )


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"kvpure {kvpure.__version__}"


def test_a_bare_kvpure_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kvpure")
    assert "plan" in err
    assert "hash" in err


def test_parser_errors_have_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 2
    err = capsys.readouterr().err
    assert err.count("kvpure:") == 1
    assert err.startswith("kvpure: error: plan: ")
    assert len(err.strip().splitlines()) == 1


def test_a_size_without_a_unit_is_refused_naming_the_units(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", str(EXAMPLES / "llama3_8b.json"), "--kv-cache-memory", "24"]) == 2
    err = capsys.readouterr().err
    assert "--kv-cache-memory: needs a unit" in err
    assert "GiB" in err


def test_dash_reads_standard_input() -> None:
    request = (EXAMPLES / "request.json").read_bytes()
    from_stdin = _run("hash", "-", "--seed", "0", "--json", stdin=request)
    from_file = _run("hash", str(EXAMPLES / "request.json"), "--seed", "0", "--json")
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert json.loads(from_stdin.stdout) == json.loads(from_file.stdout)
    config = (EXAMPLES / "llama3_8b.json").read_bytes()
    plan = _run("plan", "-", "--kv-cache-memory", "24GiB", "--json", stdin=config)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["kv_cache_capacity_tokens"] == 196_608


def test_a_closed_pipe_ends_quietly() -> None:
    command = (
        f"{sys.executable} -m kvpure plan {EXAMPLES / 'llama3_8b.json'} "
        "--kv-cache-memory 24GiB --sweep max_model_len=1024,2048,4096,8192 | head -c 1"
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, check=False
    )
    assert done.stderr == b""
    assert done.returncode == 0


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfe{\x00}\x00", b"not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, b"nests deeper"),
        (b'{"architectures": ["LlamaForCausalLM"], "x": ' + b"9" * 5000 + b"}", b"digits"),
        (b"{not json", b"invalid JSON"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path: Path, content: bytes, needle: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    done = _run("plan", str(path), "--kv-cache-memory", "24GiB")
    assert done.returncode == 2
    assert needle in done.stderr
    assert done.stderr.startswith(b"kvpure: error: ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_byte_order_mark_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / "llama3_8b.json").read_bytes())
    assert _run("plan", str(path), "--kv-cache-memory", "24GiB").returncode == 0


def test_the_extension_switch_gives_the_same_hashes() -> None:
    import os

    request = str(EXAMPLES / "request.json")
    args = [sys.executable, "-m", "kvpure", "hash", request, "--seed", "0", "--json"]
    for algo in ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"):
        plain = subprocess.run(
            [*args, "--algo", algo],
            capture_output=True,
            check=True,
            env={**os.environ, "KVPURE_NO_EXTENSION": "1"},
        )
        default = subprocess.run([*args, "--algo", algo], capture_output=True, check=True)
        assert plain.stdout == default.stdout


@pytest.mark.parametrize("command", ["plan", "hash", "events", "cache-replay", "demo"])
def test_help_shows_no_rest_markup(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    assert ":func:" not in out
    assert out.startswith(f"usage: kvpure {command}")


def test_deep_mixed_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"a": [' * 40 + "0" + "]}" * 40)  # 80 levels, no run of 65 brackets
    done = _run("plan", str(path), "--kv-cache-memory", "24GiB")
    assert done.returncode == 2
    assert b"nests deeper than 64 levels" in done.stderr


def test_brackets_inside_strings_do_not_count(tmp_path: Path) -> None:
    config = json.loads((EXAMPLES / "llama3_8b.json").read_text())
    config["note"] = "[" * 100 + '\\"{' * 100
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert _run("plan", str(path), "--kv-cache-memory", "24GiB").returncode == 0
