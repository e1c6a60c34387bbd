"""``kvpure cache``: the PNG curve (--plot), the process pool (--jobs) and the progress bar.

The process pool must not change a single number: every JSON output with
``--jobs N`` is compared to the serial run's, byte for byte, on a workload
whose small figures evict (the hit counts themselves are pinned by hand in
tests/test_cache_workload.py).
"""

from __future__ import annotations

import io
import json
import random
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.cli.cache_plot import PLOT_DPI, PLOT_SIZE_INCHES
from kvpure.cli.progress import ProgressBar, progress_bar

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")


def _workload(tmp_path: Path, count: int = 24) -> str:
    rng = random.Random(3)
    shared = [[rng.randrange(1, 30000) for _ in range(96)] for _ in range(3)]
    path = tmp_path / "w.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for _ in range(count):
            ids = rng.choice(shared) + [rng.randrange(1, 30000) for _ in range(40)]
            out.write(json.dumps({"prompt_token_ids": ids, "output_len": 8}) + "\n")
    return str(path)


def _sweep(path: str, *extra: str, figures: str = "8MiB,24MiB,40MiB,64MiB") -> list[str]:
    return [
        "cache", path, "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "1GiB",
        "--max-num-seqs", "2", "--sweep-memory", figures, *extra,
    ]  # fmt: skip


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_writes_a_png_of_the_stated_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "curve.png"
    assert (
        main([*_sweep(_workload(tmp_path), "--max-model-len", "256"), "--plot", str(target)]) == 0
    )
    assert f"curve: {target}" in capsys.readouterr().out
    expected = (round(PLOT_SIZE_INCHES[0] * PLOT_DPI), round(PLOT_SIZE_INCHES[1] * PLOT_DPI))
    assert _png_size(target) == expected == (800, 500)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--plot", "{tmp}/curve.svg"), "--plot: must name a .png file"),
        (("--plot", "{tmp}/no/such/curve.png"), "its folder does not exist"),
        (("--jobs", "0"), "--jobs"),
    ],
)
def test_bad_plot_and_jobs_options_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: tuple[str, ...], needle: str
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    assert main([*_sweep(_workload(tmp_path, 2), "--max-model-len", "256"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert needle in err


def test_plot_needs_a_sweep(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _workload(tmp_path, 2)
    args = ["cache", path, "--vllm", "0.26", "--model", LLAMA, "--kv-cache-memory", "1GiB"]
    assert main([*args, "--plot", str(tmp_path / "c.png")]) == 2
    assert "give --sweep-memory too" in capsys.readouterr().err


def test_without_matplotlib_the_error_names_the_plot_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = _sweep(_workload(tmp_path, 2), "--max-model-len", "256")
    assert main([*args, "--plot", str(tmp_path / "c.png")]) == 2
    assert "pip install 'kvpure[plot]'" in capsys.readouterr().err


def _facts(out: str) -> dict[str, Any]:
    """The JSON report less ``peak_rss_bytes`` (a measurement, different each run)."""
    data: dict[str, Any] = json.loads(out)
    assert isinstance(data.pop("peak_rss_bytes"), int)
    return data


@pytest.mark.parametrize(
    ("max_model_len", "figures"),
    [("256", "8MiB,24MiB,40MiB,64MiB"), ("-1", "24MiB,40MiB,64MiB")],
)
def test_jobs_give_the_serial_results(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, max_model_len: str, figures: str
) -> None:
    # "-1" fits the model length to each figure: one unbounded run per figure.
    path = _workload(tmp_path)
    args = _sweep(path, "--max-model-len", max_model_len, "--json", figures=figures)
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--jobs", "3"]) == 0
    assert _facts(capsys.readouterr().out) == _facts(serial)
    rows = json.loads(serial)["sweep_memory"]
    served = [r for r in rows if "error" not in r]
    assert len(served) >= 2
    assert len({r["actual"]["prefix_cache_hits"] for r in served}) >= 2  # the curve moves
    assert any(r["hits_lost_to_eviction"] > 0 for r in served)


def test_jobs_on_a_single_figure_give_the_serial_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _workload(tmp_path)
    args = [
        "cache",
        path,
        "--vllm",
        "0.26",
        "--model",
        LLAMA,
        "--kv-cache-memory",
        "40MiB",
        "--max-model-len",
        "256",
    ]
    assert main([*args, "--max-num-seqs", "2", "--json"]) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--max-num-seqs", "2", "--json", "--jobs", "2"]) == 0
    assert _facts(capsys.readouterr().out) == _facts(serial)


def test_the_bar_counts_to_the_total_and_clears_its_line() -> None:
    stream = io.StringIO()
    bar = ProgressBar(10, stream)
    for _ in range(10):
        bar(1)
    assert bar.line().endswith("100% 10/10 requests")
    assert "[" + "#" * 30 + "]" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r" + " " * len(bar.line()) + "\r")


def test_no_bar_off_a_terminal_unless_asked() -> None:
    assert progress_bar(5, forced=False, stream=io.StringIO()) is None
    assert progress_bar(5, forced=True, stream=io.StringIO()) is not None


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_progress_flag_draws_on_stderr_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jobs: str
) -> None:
    args = _sweep(_workload(tmp_path, 6), "--max-model-len", "256", "--json", "--jobs", jobs)
    assert main(args) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""
    assert main([*args, "--progress"]) == 0
    shown = capsys.readouterr()
    assert _facts(shown.out) == _facts(quiet.out)
    # 4 figures + one unbounded run, 6 requests each
    assert "100% 30/30 requests" in shown.err
    assert shown.err.endswith("\r")
