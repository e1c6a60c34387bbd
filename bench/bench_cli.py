"""Benchmark: the ``kvpure`` command's start-up, against a bare interpreter (the BASELINE).

Rows (wall and CPU time of a whole process, medians of ``--runs`` runs, after one
warm-up; the CPU time, user + system of the child, is the figure a loaded shared
machine disturbs least):

- ``kvpure --help``: goal <= 100 ms;
- ``kvpure plan examples/llama3_8b.json --kv-cache-memory 24GiB``: goal <= 250 ms;
- BASELINE: ``python -c pass`` with the same interpreter, taking turns with
  the rows so that all see the same machine load.

Each row is printed with its baseline side by side and the difference (what
kvpure adds to a bare start). ``--rounds`` repeats the whole measurement and
prints the range of the medians over the rounds (shared machines are noisy).
The command runs as ``python -m kvpure`` (the same import path as the
installed ``kvpure`` script). Whether byte code is cached matters: the
interpreter's own setting is used and printed (``PYTHONDONTWRITEBYTECODE``
makes every run compile kvpure's sources again).

Run: ``python -m bench.bench_cli [--runs 10] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ROWS: tuple[tuple[str, tuple[str, ...], float], ...] = (
    ("kvpure --help", ("-m", "kvpure", "--help"), 0.100),
    (
        "kvpure plan examples/llama3_8b.json --kv-cache-memory 24GiB",
        ("-m", "kvpure", "plan", "examples/llama3_8b.json", "--kv-cache-memory", "24GiB"),
        0.250,
    ),
)
BASELINE: tuple[str, ...] = ("-c", "pass")


def _wall(args: tuple[str, ...]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``python *args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


Medians = tuple[float, float, float, float]


def one_round(runs: int) -> dict[str, Medians]:
    """Per row, medians over ``runs`` turns: (wall, baseline wall, CPU, baseline CPU)."""
    found: dict[str, Medians] = {}
    for label, args, _goal in ROWS:
        _wall(args)  # warm-up (byte code, page cache)
        _wall(BASELINE)
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        for _ in range(runs):
            ours.append(_wall(args))
            theirs.append(_wall(BASELINE))
        found[label] = (
            statistics.median(w for w, _ in ours),
            statistics.median(w for w, _ in theirs),
            statistics.median(c for _, c in ours),
            statistics.median(c for _, c in theirs),
        )
    return found


def _span(values: list[float]) -> str:
    return f"{min(values) * 1000:>5.0f} - {max(values) * 1000:<5.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    env_bytecode = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(
        f"Python {sys.version.split()[0]}; BASELINE = `python -c pass`; median of "
        f"{options.runs} runs per round, {options.rounds} rounds; byte-code cache {env_bytecode}"
    )
    rounds = [one_round(options.runs) for _ in range(options.rounds)]
    header = (
        f"| {'measure (ms; range of the medians)':<60} | {'wall':>13} | {'baseline wall':>13} "
        f"| {'CPU':>13} | {'baseline CPU':>13} | {'goal':>5} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for label, _args, goal in ROWS:
        cells = [_span([found[label][i] for found in rounds]) for i in range(4)]
        print(
            f"| {label:<60} | "
            + " | ".join(f"{cell:>13}" for cell in cells)
            + f" | {goal * 1000:>5.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
