"""Benchmark: a ``kvpure cache`` memory sweep, serial against ``--jobs N`` processes.

The workload: ``--requests`` prompts (default 600) of a shared system prompt
(one of 8, 512 tokens) and 512 tokens of their own, 32 output tokens each,
on Llama 3 8B at block size 16 with max_num_seqs 8, swept over four memory
figures (small ones evict): five replays of the whole workload (four figures
and the unbounded run). The same sweep runs serially and with 2 and 5
processes; the figure is the wall-clock ratio jobs/serial (below 1.0: the
pool is faster), best of 2 rounds, and the rows are checked equal.

On a machine with fewer free cores than jobs the ratio says so: the runs
are independent, so the pool can only win by the cores it gets.

Run: ``python bench/bench_cache_sweep_jobs.py`` (``--quick`` for 150 requests).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

from kvpure.cache.workload import WorkloadRequest
from kvpure.cli.cache_sweep import SweepInput, run_sweep

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ["96MiB", "192MiB", "384MiB", "1GiB"]


def _workload(count: int) -> tuple[WorkloadRequest, ...]:
    rng = random.Random(11)
    shared = [[rng.randrange(1, 120_000) for _ in range(512)] for _ in range(8)]
    return tuple(
        WorkloadRequest(
            prompt_token_ids=(
                *rng.choice(shared),
                *(rng.randrange(1, 120_000) for _ in range(512)),
            ),
            output_len=32,
        )
        for _ in range(count)
    )


def _timed(sweep: SweepInput, jobs: int) -> tuple[float, str]:
    best = float("inf")
    shown = ""
    for _ in range(2):
        start = time.perf_counter()
        rows = run_sweep(sweep, FIGURES, jobs=jobs)
        best = min(best, time.perf_counter() - start)
        shown = repr(rows)
    return best, shown


def main() -> None:
    quick = "--quick" in sys.argv
    count = 150 if quick else 600
    for i, arg in enumerate(sys.argv):
        if arg == "--requests" and i + 1 < len(sys.argv):
            count = int(sys.argv[i + 1])
    config = json.loads((ROOT / "examples" / "llama3_8b.json").read_text(encoding="utf-8"))
    options = {"kv_cache_memory": "1GiB", "max_model_len": "2048"}
    sweep = SweepInput(_workload(count), config, options, 8)
    print(f"{count} requests x 1,024 prompt tokens, {len(FIGURES)} figures + the unbounded run")
    print(f"cores available: {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f}")
    serial, expected = _timed(sweep, 1)
    print(f"serial:  {serial:7.2f} s")
    for jobs in (2, 5):
        elapsed, shown = _timed(sweep, jobs)
        same = "same rows" if shown == expected else "ROWS DIFFER"
        print(f"jobs {jobs}:  {elapsed:7.2f} s   ratio {elapsed / serial:.2f}   {same}")
        if shown != expected:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
