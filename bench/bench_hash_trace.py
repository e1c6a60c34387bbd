"""Benchmark: a Mooncake-shaped hash-id trace through ``kvpure cache``, against the token path.

The trace is generated (``bench/make_hash_id_trace.py``: the conversation
trace's published shape, 12,031 requests, about 145 M prompt tokens; no
network). Three runs, each a fresh ``kvpure cache --json`` process on a
Llama-3.1-8B-shaped model (``max_position_embeddings`` 131072) with a
20 GiB pool:

- TRACE: the hash-id trace read natively (derived block keys, streamed,
  the unbounded figure from the seen trace blocks);
- TOKENS: the same requests converted to token ids (the mapping of
  :mod:`kvpure.cache.hash_trace`), read by this checkout (streamed, but parsing
  every token id and hashing every block);
- BASELINE (``--baseline-src DIR``): the token file through another checkout's
  ``src`` (e.g. ``/work/main/src``: today's token path, which holds the
  parsed workload and replays the unbounded run on a pool of every block).

Each prints CPU seconds (user + system of the process) and peak RSS; the hit
counts of all runs must agree. The token runs are slow and large at full
size: ``--requests N`` takes the first N requests of the trace for them (the
TRACE run always reads the same N).

Run: ``python bench/bench_hash_trace.py [--requests 1000] [--baseline-src /work/main/src]
[--memory 20GiB] [--sweep 20GiB,40GiB,70GiB,130GiB,196GiB --jobs 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.make_hash_id_trace import generate  # noqa: E402
from kvpure.cache.hash_trace import parse_trace_line  # noqa: E402


def _model(folder: Path) -> Path:
    config = json.loads((ROOT / "examples" / "llama3_8b.json").read_text(encoding="utf-8"))
    config["max_position_embeddings"] = 131072
    path = folder / "llama31_8b.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _subset(trace: Path, out: Path, count: int, tokens: Path | None) -> None:
    with trace.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        token_out = tokens.open("w", encoding="utf-8") if tokens is not None else None
        for index, line in enumerate(src):
            if index >= count:
                break
            dst.write(line)
            if token_out is not None:
                data = json.loads(line)
                request = parse_trace_line(data, "t", 512, index)
                token_out.write(
                    json.dumps(
                        {
                            "prompt_token_ids": list(request.prompt_token_ids),
                            "output_len": request.output_len,
                            "arrival_time": data["timestamp"],
                        }
                    )
                    + "\n"
                )
        if token_out is not None:
            token_out.close()


def _run(
    src: Path, workload: Path, model: Path, extra: list[str]
) -> tuple[float, dict[str, object]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-m", "kvpure", "cache", str(workload), "--model", str(model),
         "--max-model-len", "131072", "--json", *extra],
        check=True, capture_output=True, text=True, env=env,
    ).stdout  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    data: dict[str, object] = json.loads(out)
    return cpu, data


def _hits(data: dict[str, object]) -> object:
    rows = data.get("sweep_memory")
    if isinstance(rows, list):
        return [
            (r["actual"]["prefix_cache_hits"], r["unbounded"]["prefix_cache_hits"]) for r in rows
        ]
    actual, unbounded = data["actual"], data["unbounded"]
    assert isinstance(actual, dict)
    assert isinstance(unbounded, dict)
    return actual["prefix_cache_hits"], unbounded["prefix_cache_hits"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12_031)
    parser.add_argument("--token-requests", type=int, default=1_000)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--memory", default="20GiB")
    parser.add_argument("--sweep", default=None)
    parser.add_argument("--jobs", default="1")
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--no-tokens", action="store_true", help="skip the token runs")
    args = parser.parse_args()
    extra = ["--kv-cache-memory", args.memory, "--jobs", args.jobs]
    if args.sweep:
        extra += ["--sweep-memory", args.sweep]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = _model(folder)
        trace = folder / "trace.jsonl"
        totals = generate(trace, args.requests, 0, args.scale, 126_000)
        print(f"trace: {totals['requests']:,} requests, {totals['tokens']:,} prompt tokens, "
              f"infinite-cache hits {totals['infinite_cache_hits']:,}")  # fmt: skip
        cpu, data = _run(ROOT / "src", trace, model, extra)
        peak = int(str(data["peak_rss_bytes"])) / 2**20
        print(f"TRACE  {args.requests:>6} requests: {cpu:7.1f} s CPU, "
              f"peak {peak:7.0f} MiB, hits {_hits(data)}")  # fmt: skip
        if args.no_tokens:
            return
        small, tokens = folder / "small.jsonl", folder / "tokens.jsonl"
        _subset(trace, small, args.token_requests, tokens)
        runs = [("TRACE", ROOT / "src", small), ("TOKENS", ROOT / "src", tokens)]
        if args.baseline_src is not None:
            runs.append(("BASELINE", args.baseline_src, tokens))
        for name, src, workload in runs:
            cpu, data = _run(src, workload, model, extra)
            peak = int(str(data["peak_rss_bytes"])) / 2**20
            print(f"{name:<8} {args.token_requests:>6} requests: {cpu:7.1f} s CPU, "
                  f"peak {peak:7.0f} MiB, hits {_hits(data)}")  # fmt: skip


if __name__ == "__main__":
    main()
