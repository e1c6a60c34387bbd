"""``kvpure cache WORKLOAD.jsonl --model CONFIG.json --kv-cache-memory SIZE``: prefix-cache hits.

WORKLOAD.jsonl holds one request a line: ``{"prompt_token_ids": [...],
"output_len": N, "lora_name": ..., "cache_salt": ...}`` (only the token ids
are required; ``-`` reads standard input). Each request is driven through
kvpure's exact replay of vLLM 0.26's KV cache manager; requests are admitted
in file order while fewer than --max-num-seqs run and the manager admits
them, each decodes its output at once, and when admission is refused the
oldest running request finishes first (no preemption, no chunked prefill).

The report gives the prompt tokens looked up and hit (vLLM's
prefix_cache_queries / prefix_cache_hits), the hits of an unbounded cache,
the hits lost to eviction, and the shared-prefix tokens that cannot hit
because they are shorter than a block. --sweep-memory re-runs per memory
figure and draws the hit-rate curve; --json prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kvpure.cache.workload import (
    CONCURRENCY_MODEL,
    DEFAULT_MAX_NUM_SEQS,
    RunResult,
    WorkloadReport,
    WorkloadRequest,
    analyze_workload,
    parse_request,
)
from kvpure.cli.input_files import parse_json_text, read_input_bytes, read_json
from kvpure.cli.option_values import parse_memory_bytes, parse_positive_int
from kvpure.cli.plan_options import OPTIONS, deployment_from_options
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.errors import ModelConfigError

__all__ = ["format_report", "parse_workload", "register", "report_to_json", "run"]

_OPTION_NAMES = (
    "kv_cache_memory",
    "block_size",
    "max_model_len",
    "kv_cache_dtype",
    "num_gpu_blocks_override",
    "mamba_cache_mode",
)
_BAR_WIDTH = 40

_EPILOG = """\
example:
  kvpure cache workload.jsonl --model examples/llama3_8b.json --kv-cache-memory 24GiB
  kvpure cache workload.jsonl --model examples/llama3_8b.json --kv-cache-memory 1GiB \\
      --sweep-memory 256MiB,512MiB,1GiB
"""


def register(sub: Any) -> None:
    """Add the ``cache`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "cache",
        help="analyze a workload's prefix-cache hits against a KV cache size",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("workload", metavar="WORKLOAD.jsonl", help="requests, one JSON a line")
    parser.add_argument("--model", required=True, metavar="CONFIG.json", help="config.json")
    for option in OPTIONS:
        if option.name in _OPTION_NAMES:
            parser.add_argument(
                *option.flags, dest=f"opt_{option.name}", metavar=option.metavar, help=option.help
            )
    parser.add_argument(
        "--max-num-seqs",
        metavar="N",
        default=str(DEFAULT_MAX_NUM_SEQS),
        help=f"most requests running at once (default {DEFAULT_MAX_NUM_SEQS})",
    )
    parser.add_argument(
        "--sweep-memory",
        metavar="SIZE,SIZE,...",
        help="re-run once per KV cache memory figure and draw the hit-rate curve",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


def parse_workload(path: str, text: str) -> tuple[WorkloadRequest, ...]:
    """Every non-blank line of a JSON-lines workload; errors name the line and field."""
    requests: list[WorkloadRequest] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        requests.append(parse_request(parse_json_text(where, line), where))
    if not requests:
        raise InvalidFieldError(field=path, value="", reason="holds no requests (one JSON a line)")
    return tuple(requests)


def _read_workload(path: str) -> tuple[WorkloadRequest, ...]:
    data = read_input_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidFieldError(
            field=path, value=f"byte {err.start}", reason="is not UTF-8 text"
        ) from None
    return parse_workload(path, text)


def _run_json(run: RunResult) -> dict[str, Any]:
    return {
        "num_blocks": run.num_blocks,
        "block_size": run.block_size,
        "hash_block_size": run.hash_block_size,
        "enable_caching": run.enable_caching,
        "num_unservable": run.num_unservable,
        "prefix_cache_queries": run.queries,
        "prefix_cache_hits": run.hits,
        "hit_rate": round(run.hit_rate, 6),
    }


def report_to_json(report: WorkloadReport) -> dict[str, Any]:
    """The report's facts as JSON values."""
    return {
        "num_requests": report.num_requests,
        "prompt_tokens": report.prompt_tokens,
        "max_num_seqs": report.max_num_seqs,
        "actual": _run_json(report.actual),
        "unbounded": _run_json(report.unbounded),
        "hits_lost_to_eviction": report.hits_lost_to_eviction,
        "short_prefix_requests": report.short_prefix_requests,
        "short_prefix_tokens": report.short_prefix_tokens,
    }


def format_report(report: WorkloadReport) -> str:
    """The report as text for an operator."""
    a, u = report.actual, report.unbounded
    lines = [
        f"requests:             {report.num_requests:,} ({report.prompt_tokens:,} prompt tokens)",
        f"KV cache:             {a.num_blocks - 1:,} blocks of {a.block_size} tokens "
        f"(+ the null block)",
        f"prefix-cache queries: {a.queries:,} tokens",
        f"prefix-cache hits:    {a.hits:,} tokens ({a.hit_rate:.1%})",
        f"unbounded cache:      {u.hits:,} tokens ({u.hit_rate:.1%}), the upper bound",
        f"lost to eviction:     {report.hits_lost_to_eviction:,} tokens",
        f"shorter than a block: {report.short_prefix_tokens:,} shared-prefix tokens in "
        f"{report.short_prefix_requests:,} request(s) cannot hit",
    ]
    if not a.enable_caching:
        lines.append("prefix caching is off for this deployment (vLLM's default for it)")
    elif a.hash_block_size != a.block_size:
        lines.append(f"hits are counted in hash blocks of {a.hash_block_size} tokens")
    if a.num_unservable:
        lines.append(f"unservable:           {a.num_unservable:,} request(s) never fit the pool")
    lines.append(f"model: {CONCURRENCY_MODEL} (max_num_seqs {report.max_num_seqs})")
    return "\n".join(lines)


SweepRow = tuple[str, "WorkloadReport | str"]
"""A memory figure and its report, or why it cannot be served."""


def format_sweep(rows: Sequence[SweepRow]) -> str:
    """A table of the sweep and a bar per memory figure."""
    lines = [
        f"{'memory':>10} {'blocks':>9} {'hits':>12} {'hit rate':>9} {'lost':>10}",
    ]
    served = [(label, r) for label, r in rows if not isinstance(r, str)]
    for label, r in rows:
        if isinstance(r, str):
            lines.append(f"{label:>10} cannot be served: {r}")
            continue
        lines.append(
            f"{label:>10} {r.actual.num_blocks - 1:>9,} {r.actual.hits:>12,} "
            f"{r.actual.hit_rate:>9.1%} {r.hits_lost_to_eviction:>10,}"
        )
    if not served:
        return "\n".join(lines)
    upper = served[0][1].unbounded
    lines += ["", f"hit rate (| marks the unbounded cache's {upper.hit_rate:.1%}):"]
    mark = round(upper.hit_rate * _BAR_WIDTH)
    for label, r in served:
        filled = round(r.actual.hit_rate * _BAR_WIDTH)
        bar = "#" * filled + " " * (_BAR_WIDTH - filled)
        bar = bar[:mark] + "|" + bar[mark:] if mark < _BAR_WIDTH else bar + "|"
        lines.append(f"{label:>10} {bar} {r.actual.hit_rate:.1%}")
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> dict[str, str]:
    return {
        name: str(getattr(args, f"opt_{name}"))
        for name in _OPTION_NAMES
        if getattr(args, f"opt_{name}", None) is not None
    }


def _analyze(
    requests: Sequence[WorkloadRequest],
    config: object,
    options: Mapping[str, str],
    seqs: int,
    unbounded: RunResult | None = None,
) -> WorkloadReport:
    layout = model_layout(parse_model_config(config))
    deployment = deployment_from_options(options)
    if deployment.auto_fit_max_model_len:
        unbounded = None  # the fitted length, hence the unbounded run, follows the memory
    return analyze_workload(requests, layout, deployment, seqs, unbounded=unbounded)


def run(args: argparse.Namespace) -> int:
    seqs = parse_positive_int(args.max_num_seqs, field="--max-num-seqs")
    config = read_json(args.model)
    requests = _read_workload(args.workload)
    options = _options(args)
    if args.sweep_memory is None:
        report = _analyze(requests, config, options, seqs)
        if args.json:
            data = {"concurrency_model": CONCURRENCY_MODEL, **report_to_json(report)}
            print(json.dumps(data, indent=2))
        else:
            print(format_report(report))
        return 0
    labels = [v.strip() for v in args.sweep_memory.split(",") if v.strip()]
    if not labels:
        raise InvalidFieldError(
            field="--sweep-memory", value=args.sweep_memory, reason="must list memory figures"
        )
    for label in labels:
        parse_memory_bytes(label, field="--sweep-memory")
    rows: list[SweepRow] = []
    unbounded: RunResult | None = None
    for label in labels:
        try:
            memory = {**options, "kv_cache_memory": label}
            report = _analyze(requests, config, memory, seqs, unbounded)
            unbounded = report.unbounded
            rows.append((label, report))
        except KVPureError as err:
            if isinstance(err, InvalidFieldError | ModelConfigError):
                raise
            rows.append((label, _first_sentence(str(err))))
    if args.json:
        data = {
            "concurrency_model": CONCURRENCY_MODEL,
            "sweep_memory": [
                {"memory": label, "error": r}
                if isinstance(r, str)
                else {"memory": label, **report_to_json(r)}
                for label, r in rows
            ],
        }
        print(json.dumps(data, indent=2))
    else:
        print(format_sweep(rows))
        print(f"model: {CONCURRENCY_MODEL} (max_num_seqs {seqs})")
    return 0


def _first_sentence(message: str) -> str:
    first = message.strip().splitlines()[0].split(". ")[0] if message.strip() else "error"
    return first if len(first) <= 160 else first[:157] + "..."
