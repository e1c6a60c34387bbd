"""Benchmark: planning the 36 shared vLLM 0.26 goldens, kvpure beside vLLM 0.26 (the BASELINE).

Every planning case of the goldens (``/work/shared/golden/vllm-0.26.0`` when it is
there, else the copy in ``tests/data/vllm-0.26.0``; ``--golden-dir`` picks another)
is planned in this one process by both:

- kvpure: ``kvpure.get_kv_cache_configs(settings, specs, memory)``, the public,
  type-checked function, on values read from the case once, before timing;
- BASELINE: vLLM 0.26.0's own ``get_kv_cache_configs`` (via
  ``tools/vllm_oracle/run_vllm.py``) on vLLM spec objects built from the same case
  once, before timing, and a fresh config object per call (vLLM lowers
  ``max_model_len`` in place when it auto-fits).

The three cases vLLM refuses (not enough memory, ...) are timed too: both
raise, and the raise is part of the work. vLLM's info logs are silenced for the
run (printing them would time the terminal).

One pass plans all cases; kvpure and vLLM take turns pass by pass, so both see
the same machine load. Each round reports the ratio of the two totals (best
pass of each, and the median pass of each); ``--rounds`` repeats the rounds and
prints the range of the ratios (shared machines are noisy). A second row
times the whole path from the case's JSON objects (reading the input and
planning) on both sides.

vLLM must be importable: put vLLM 0.26.0's sources and its dependencies on the
path, e.g. ``PYTHONPATH=src:/work/vllm/0.26.0:/work/oracle_deps``. Without vLLM
the bench prints kvpure's own times and says that the BASELINE rows are skipped.

Run: ``python -m bench.bench_planning_goldens [--passes 30] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvpure import get_kv_cache_configs
from kvpure.errors import KVPureError
from kvpure.interop.planning import parse_planning_input

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path("/work/shared/golden/vllm-0.26.0")
COPIED = ROOT / "tests" / "data" / "vllm-0.26.0"
GOAL = 0.5

Case = dict[str, Any]
Pass = Callable[[], None]


def load_cases(folder: Path) -> list[tuple[str, Case]]:
    """Every planning case in ``folder`` (files with an ``input.kv_cache_specs``), by name."""
    cases: list[tuple[str, Case]] = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "kv_cache_specs" in data.get("input", {}):
            cases.append((path.stem, data["input"]))
    return cases


def kvpure_passes(cases: list[tuple[str, Case]]) -> tuple[Pass, Pass]:
    """(plan every case from parsed values, read and plan every case from JSON)."""
    parsed = [parse_planning_input(case, vllm_version="0.26") for _, case in cases]

    def plan_all() -> None:
        for one in parsed:
            with contextlib.suppress(KVPureError):
                get_kv_cache_configs(one.settings, one.kv_cache_specs, one.available_memory)

    def read_and_plan_all() -> None:
        for _, case in cases:
            one = parse_planning_input(case, vllm_version="0.26")
            with contextlib.suppress(KVPureError):
                get_kv_cache_configs(one.settings, one.kv_cache_specs, one.available_memory)

    return plan_all, read_and_plan_all


def vllm_passes(cases: list[tuple[str, Case]]) -> tuple[Pass, Pass] | None:
    """vLLM 0.26's passes over the same cases; None (with a message) where vLLM is missing."""
    sys.path.append(str(ROOT / "tools" / "vllm_oracle"))
    try:
        import run_vllm  # type: ignore[import-not-found]  # optional: vLLM on the path
    except Exception as err:  # vLLM or one of its dependencies missing: no baseline
        print(f"vLLM 0.26 is not importable ({type(err).__name__}: {err}): BASELINE rows skipped")
        return None
    logging.getLogger("vllm").setLevel(logging.WARNING)
    configs = [case["vllm_config"] for _, case in cases]
    memories = [list(case["available_memory"]) for _, case in cases]
    specs = [
        [
            {name: run_vllm.parse_spec(s) for name, s in worker.items()}
            for worker in case["kv_cache_specs"]
        ]
        for _, case in cases
    ]
    plan = run_vllm.ku.get_kv_cache_configs
    make_config = run_vllm.Cfg
    parse_spec = run_vllm.parse_spec

    def plan_all() -> None:
        for config, worker_specs, memory in zip(configs, specs, memories, strict=True):
            with contextlib.suppress(Exception):  # vLLM's refusals (ValueError, AssertionError)
                plan(make_config(config), worker_specs, memory)

    def read_and_plan_all() -> None:
        for _, case in cases:
            try:
                worker_specs = [
                    {name: parse_spec(s) for name, s in worker.items()}
                    for worker in case["kv_cache_specs"]
                ]
                plan(make_config(case["vllm_config"]), worker_specs, list(case["available_memory"]))
            except Exception:  # vLLM's refusals
                pass

    return plan_all, read_and_plan_all


def _seconds(run: Pass) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def one_round(ours: Pass, theirs: Pass | None, passes: int) -> tuple[list[float], list[float]]:
    """Pass times of kvpure and of the BASELINE, taking turns (after one warm-up each)."""
    ours()
    if theirs is not None:
        theirs()
    mine: list[float] = []
    base: list[float] = []
    for _ in range(passes):
        mine.append(_seconds(ours))
        if theirs is not None:
            base.append(_seconds(theirs))
    return mine, base


def _span(values: list[float], digits: int = 2) -> str:
    return f"{min(values):.{digits}f} - {max(values):.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--golden-dir", type=Path, default=SHARED if SHARED.is_dir() else COPIED)
    parser.add_argument("--passes", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    cases = load_cases(options.golden_dir)
    ours = kvpure_passes(cases)
    theirs = vllm_passes(cases)
    print(
        f"{len(cases)} planning cases from {options.golden_dir}; BASELINE = vLLM 0.26.0's "
        f"get_kv_cache_configs; {options.passes} passes per round, {options.rounds} rounds"
    )
    header = (
        f"| {'measure (one pass = every case)':<42} | {'kvpure ms':>13} | {'vLLM ms':>13} "
        f"| {'ratio (best)':>12} | {'ratio (median)':>14} | {'goal':>5} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    labels = ("plan (inputs read before timing)", "read the JSON input and plan")
    for index, label in enumerate(labels):
        mine_ms: list[float] = []
        base_ms: list[float] = []
        best: list[float] = []
        median: list[float] = []
        for _ in range(options.rounds):
            mine, base = one_round(ours[index], theirs[index] if theirs else None, options.passes)
            mine_ms.append(min(mine) * 1e3)
            if base:
                base_ms.append(min(base) * 1e3)
                best.append(min(mine) / min(base))
                median.append(statistics.median(mine) / statistics.median(base))
        cells = (
            _span(mine_ms),
            _span(base_ms) if base_ms else "skipped",
            _span(best) if best else "-",
            _span(median) if median else "-",
        )
        print(
            f"| {label:<42} | {cells[0]:>13} | {cells[1]:>13} | {cells[2]:>12} "
            f"| {cells[3]:>14} | {GOAL:>5} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
