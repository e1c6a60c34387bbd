"""Benchmark: the peak memory of ``kvpure cache`` as the workload grows.

Workloads of N requests (prompts of 4,000 tokens: one of 8 shared 1,000-token
system prompts and a 3,000-token unique tail; 100 output tokens) run through
``kvpure cache --json`` (Llama 3 8B, a 4 GiB pool that evicts, the actual and
the unbounded run) in a fresh process each, and its ``peak_rss_bytes`` is read.

BASELINE: the same process reading and parsing the same workload file
(``kvpure.cli.workload_files.read_workload``) without replaying it. The
difference is what the replays add over holding the workload; the ratio
peak/baseline is printed. Peak RSS is ``getrusage``'s ``ru_maxrss`` in both.

Run: ``python bench/bench_cache_workload_memory.py`` (``--quick`` for smaller workloads).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLAMA = str(ROOT / "examples" / "llama3_8b.json")

_PARSE_ONLY = """
import sys
from kvpure.cli.peak_memory import peak_rss_bytes
from kvpure.cli.workload_files import read_workload
workload = read_workload(sys.argv[1], None)
print(len(workload.requests), peak_rss_bytes())
"""


def _workload(path: Path, count: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    systems = [[rng.randrange(128_000) for _ in range(1000)] for _ in range(8)]
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(count):
            prompt = rng.choice(systems) + [rng.randrange(128_000) for _ in range(3000)]
            handle.write(json.dumps({"prompt_token_ids": prompt, "output_len": 100}) + "\n")


def _cache_peak(path: Path) -> tuple[int, float]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvpure",
            "cache",
            str(path),
            "--model",
            LLAMA,
            "--kv-cache-memory",
            "4GiB",
            "--max-model-len",
            "8192",
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    data = json.loads(out)
    return int(data["peak_rss_bytes"]), float(data["actual"]["hit_rate"])


def _parse_peak(path: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _PARSE_ONLY, str(path)], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[1])


def main() -> None:
    sizes = (100, 200, 400) if "--quick" in sys.argv else (500, 1000, 2000)
    mib = 2**20
    print(f"{'requests':>8} {'parse only':>11} {'kvpure cache':>13} {'added':>9} {'ratio':>6} hits")
    with tempfile.TemporaryDirectory() as folder:
        for count in sizes:
            path = Path(folder) / f"w{count}.jsonl"
            _workload(path, count)
            base = _parse_peak(path)
            peak, rate = _cache_peak(path)
            print(
                f"{count:>8} {base / mib:>9.0f}Mi {peak / mib:>11.0f}Mi "
                f"{(peak - base) / mib:>7.0f}Mi {peak / base:>6.2f} {rate:.1%}"
            )


if __name__ == "__main__":
    main()
