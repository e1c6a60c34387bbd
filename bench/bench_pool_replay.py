"""Benchmark: the trace replay's CPU time and peak memory, this checkout against a baseline.

A Mooncake-shaped hash-id trace is generated (``bench/make_hash_id_trace.py``:
12,031 requests, about 145 M prompt tokens; ``--scale 1.4``: about 200 M, the
tool&agent trace's size; no network) and replayed by ``kvpure cache --json``
on a Llama-3.1-8B-shaped model, once at one memory figure and once as a
five-figure sweep, by two checkouts in turn: BASELINE (``--baseline-src``,
e.g. ``/work/main/src``) and THIS (this checkout's ``src``: the block pool's C
loops, GC pacing, the sweep's figures in one pass). Runs alternate
(baseline, this, baseline, this, ...) so both see the same machine load.

Each run is a fresh process: its CPU seconds (user + system, from ``wait4``)
and its peak RSS (``peak_rss_bytes`` of the report). The script prints each
run, the range of each side and the ratio of the medians, and checks that both
sides report the same hit counts.

Run: ``python bench/bench_pool_replay.py --baseline-src /work/main/src [--runs 2]
[--scale 1.0] [--only point|sweep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.make_hash_id_trace import generate  # noqa: E402

SWEEP = "20GiB,40GiB,70GiB,130GiB,196GiB"


def _model(folder: Path) -> Path:
    config = json.loads((ROOT / "examples" / "llama3_8b.json").read_text(encoding="utf-8"))
    config["max_position_embeddings"] = 131072
    path = folder / "llama31_8b.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _run(src: Path, trace: Path, model: Path, extra: list[str]) -> tuple[float, float, object]:
    """CPU seconds, peak MiB and the hit counts of one ``kvpure cache`` process."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kvpure", "cache", str(trace), "--model", str(model),
             "--max-model-len", "131072", "--json", *extra],
            stdout=out, env=env,
        )  # fmt: skip
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            raise SystemExit(f"{src}: kvpure cache exited {process.returncode}")
        out.seek(0)
        data = json.loads(out.read())
    cpu = usage.ru_utime + usage.ru_stime
    peak = int(data["peak_rss_bytes"]) / 2**20
    rows = data.get("sweep_memory", [data])
    hits = [(r["actual"]["prefix_cache_hits"], r["unbounded"]["prefix_cache_hits"]) for r in rows]
    return cpu, peak, hits


def _span(values: list[float]) -> str:
    return f"{min(values):6.1f}-{max(values):6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--requests", type=int, default=12_031)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", choices=["point", "sweep"], default=None)
    args = parser.parse_args()
    cases = {
        "point": ["--kv-cache-memory", "20GiB"],
        "sweep": ["--kv-cache-memory", "20GiB", "--sweep-memory", SWEEP],
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model, trace = _model(folder), folder / "trace.jsonl"
        totals = generate(trace, args.requests, 0, args.scale, 126_000)
        print(f"trace: {totals['requests']:,} requests, {totals['tokens']:,} prompt tokens")
        for case, extra in cases.items():
            if args.only not in (None, case):
                continue
            sides = {"BASELINE": args.baseline_src, "THIS": ROOT / "src"}
            cpu: dict[str, list[float]] = {side: [] for side in sides}
            peak: dict[str, list[float]] = {side: [] for side in sides}
            answers: set[str] = set()
            for run in range(args.runs):
                for side, src in sides.items():
                    seconds, mib, hits = _run(src, trace, model, extra)
                    cpu[side].append(seconds)
                    peak[side].append(mib)
                    answers.add(json.dumps(hits))
                    print(f"{case:<5} run {run + 1} {side:<8} {seconds:7.1f} s CPU "
                          f"{mib:7.0f} MiB peak", flush=True)  # fmt: skip
            for side in sides:
                print(f"{case:<5} {side:<8} CPU {_span(cpu[side])} s, "
                      f"peak {_span(peak[side])} MiB")  # fmt: skip
            ratio = statistics.median(cpu["BASELINE"]) / statistics.median(cpu["THIS"])
            print(f"{case:<5} CPU ratio baseline/this (medians): {ratio:.2f}x; "
                  f"same hit counts: {len(answers) == 1}")  # fmt: skip


if __name__ == "__main__":
    main()
