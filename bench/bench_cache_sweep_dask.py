"""Benchmark: a ``kvpure cache`` memory sweep, serial against ``--jobs N`` and a Dask cluster.

The workload of ``bench_cache_sweep_jobs.py`` (``--requests`` prompts, default
600, of a shared 512-token system prompt and 512 tokens of their own, Llama 3
8B, max_num_seqs 8), written to a JSONL file and read as the CLI reads it (a
spool file, which the Dask path uploads to each worker), swept over four
memory figures: five replays. Side by side, in one process:

- serial (``jobs=1``) and the process pool (``jobs=N``, ``--workers N``, 2);
- ``dask_scheduler="local"``, ``jobs=N``: a LocalCluster of N worker
  processes started and stopped by the call (its start-up counted);
- a LocalCluster of N worker processes started once, its address passed
  (``--dask-scheduler tcp://...``): what a running cluster costs per sweep.

Each figure is the wall-clock ratio to serial (below 1.0: faster), best of 2
rounds but the cold cluster (one round); every row set is checked equal to
the serial one. On a machine with fewer free cores than workers the ratio
says so: the replays are independent, so a cluster wins only by its cores.

Run: ``python bench/bench_cache_sweep_dask.py`` (``--quick`` for 150 requests,
``--requests N``, ``--workers N``).
Needs ``pip install 'kvpure[distributed]'`` (says so and exits 0 without it).
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kvpure.cli.cache_sweep import SweepInput, run_sweep
from kvpure.cli.workload_files import read_workload

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ["96MiB", "192MiB", "384MiB", "1GiB"]


def _write_workload(path: Path, count: int) -> None:
    rng = random.Random(11)
    shared = [[rng.randrange(1, 120_000) for _ in range(512)] for _ in range(8)]
    with path.open("w", encoding="utf-8") as out:
        for _ in range(count):
            ids = [*rng.choice(shared), *(rng.randrange(1, 120_000) for _ in range(512))]
            out.write(json.dumps({"prompt_token_ids": ids, "output_len": 32}) + "\n")


def _best(rounds: int, sweep: Callable[[], object]) -> tuple[float, str]:
    best = float("inf")
    shown = ""
    for _ in range(rounds):
        start = time.perf_counter()
        rows = sweep()
        best = min(best, time.perf_counter() - start)
        shown = repr(rows)
    return best, shown


def main() -> None:
    try:
        from distributed import LocalCluster
    except ImportError:
        print("skipped: needs pip install 'kvpure[distributed]'")
        return
    quick = "--quick" in sys.argv
    count = 150 if quick else 600
    workers = 2
    for i, arg in enumerate(sys.argv):
        if arg == "--requests" and i + 1 < len(sys.argv):
            count = int(sys.argv[i + 1])
        if arg == "--workers" and i + 1 < len(sys.argv):
            workers = int(sys.argv[i + 1])
    config = json.loads((ROOT / "examples" / "llama3_8b.json").read_text(encoding="utf-8"))
    options = {"kv_cache_memory": "1GiB", "max_model_len": "2048"}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "workload.jsonl"
        _write_workload(path, count)
        workload = read_workload(str(path), None, trace_block_size=512)
        sweep = SweepInput(workload.requests, config, options, 8)
        print(f"{count} requests x 1,024 prompt tokens, {len(FIGURES)} figures + the unbounded run")
        cores = len(os.sched_getaffinity(0))
        print(f"cores available: {cores}, load average {os.getloadavg()[0]:.1f}")
        serial, expected = _best(2, lambda: run_sweep(sweep, FIGURES))
        print(f"serial:                      {serial:7.2f} s")
        runs: list[tuple[str, int, Callable[[], object]]] = [
            (f"jobs {workers} (process pool)", 2, lambda: run_sweep(sweep, FIGURES, jobs=workers)),
            (
                f"dask local, {workers} workers, cold",
                1,
                lambda: run_sweep(sweep, FIGURES, jobs=workers, dask_scheduler="local"),
            ),
        ]
        for name, rounds, run in runs:
            elapsed, shown = _best(rounds, run)
            same = "same rows" if shown == expected else "ROWS DIFFER"
            print(f"{name:28} {elapsed:7.2f} s   ratio {elapsed / serial:.2f}   {same}")
            if shown != expected:
                raise SystemExit(1)
        start = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
            started = time.perf_counter() - start
            address = cluster.scheduler_address
            elapsed, shown = _best(2, lambda: run_sweep(sweep, FIGURES, dask_scheduler=address))
        same = "same rows" if shown == expected else "ROWS DIFFER"
        name = "dask cluster already up"
        print(f"{name:28} {elapsed:7.2f} s   ratio {elapsed / serial:.2f}   {same}")
        print(f"(that cluster took {started:.2f} s to start)")
        if shown != expected:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
