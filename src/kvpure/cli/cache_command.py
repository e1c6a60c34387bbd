"""``kvpure cache WORKLOAD.jsonl --model CONFIG.json --kv-cache-memory SIZE|--gpu NAME``: hits.

WORKLOAD.jsonl holds one request a line: ``{"prompt_token_ids": [...],
"output_len": N, "lora_name": ..., "cache_salt": ...}`` (only the prompt is
required; ``-`` reads standard input). With --tokenizer PATH (a
tokenizer.json or its model folder) a line may give ``"prompt": "text"``
(encoded with special tokens, as vLLM's completions API does) or
``"messages": [{"role": ..., "content": ...}]`` (rendered through the
model's chat template, as vLLM's chat API does). A ShareGPT dataset (a JSON
array of {"conversations": [...]}, or one such object a line) is read as
vLLM's benchmark reads it: first turn as prompt, second turn's token count as
output length, its length filter applied (needs --tokenizer). A line may give
"arrival_time" (seconds): requests are then admitted in arrival order. A
hash-id trace (Mooncake, aiperf, InferenceX: {"timestamp", "input_length",
"output_length", "hash_ids"} a line) is read natively, each id a block of
--trace-block-size tokens (512). The file is streamed, a line at a time.
Each request is driven through kvpure's exact replay of the KV cache manager
of the vLLM release --vllm names (default 0.34); requests are admitted in
order while fewer than --max-num-seqs run and the manager admits them, each
decodes its output at once, and when admission is refused the
oldest running request finishes first (no preemption, no chunked prefill).

The pool is planned as ``kvpure plan`` plans it: vLLM's serve defaults for
the --gpu (attention backend, block size, prefix caching), with async
scheduling off since the replay steps synchronously. --model takes a
config.json, its folder, or a Hugging Face id read from the local cache.
The KV cache memory is --kv-cache-memory (vLLM's "Available KV cache
memory"); without it, it is estimated from --gpu (or --gpu-memory) as
``kvpure plan`` estimates it, and the workload is replayed at the estimate's
central figure and at both ends of its band: the report gives the central
hit rate and the hit rates at the low and high ends.

The report gives the prompt tokens looked up and hit (vLLM's
prefix_cache_queries / prefix_cache_hits), the hits of an unbounded cache,
the hits lost to eviction, and the shared-prefix tokens that cannot hit
because they are shorter than a block. --sweep-memory re-runs per memory
figure and draws the hit-rate curve (--plot FILE.png draws it as an image);
--jobs N runs the figures in N processes (--dask-scheduler: on a Dask
cluster); --json prints one JSON object.
--instances N also splits the workload over N servers, routed by each
--routing policy (round-robin, least-loaded, prefix-aware).
A progress bar is drawn on standard error when it is a terminal (or with
--progress).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvpure.cache.fleet import MAX_INSTANCES, ROUTING_POLICIES, parse_routing
from kvpure.cache.hash_trace import DEFAULT_TRACE_BLOCK_SIZE
from kvpure.cache.workload import (
    CONCURRENCY_MODEL,
    DEFAULT_MAX_NUM_SEQS,
    RunResult,
    WorkloadReport,
)
from kvpure.cli.cache_dask import dask_scheduler_option
from kvpure.cli.cache_estimate import (
    BAND_ENDS,
    BandReport,
    band_to_json,
    check_memory_source,
    estimate_band,
    format_band,
)
from kvpure.cli.cache_fleet_report import fleet_to_json, format_fleet
from kvpure.cli.cache_input_report import format_input, input_to_json
from kvpure.cli.cache_plot import check_plot_target, write_hit_rate_plot
from kvpure.cli.cache_prefix_report import Decoder, format_prefixes, prefixes_to_json
from kvpure.cli.cache_sweep import SweepInput, count_runs, run_sweep
from kvpure.cli.cache_sweep_report import format_sweep, sweep_labels
from kvpure.cli.input_files import read_json
from kvpure.cli.option_values import parse_positive_int
from kvpure.cli.peak_memory import peak_rss_bytes
from kvpure.cli.plan_memory import MEMORY_OPTIONS, add_memory_options, split_memory_options
from kvpure.cli.plan_options import OPTIONS
from kvpure.cli.progress import progress_bar
from kvpure.cli.serve_options import SERVE_OPTIONS
from kvpure.cli.vllm_option import add_vllm_argument
from kvpure.cli.workload_files import parse_workload, read_workload
from kvpure.errors import InvalidFieldError
from kvpure.models.hf_cache import config_argument
from kvpure.text.tokenizer import load_tokenizer
from kvpure.versions import resolve_vllm_version

__all__ = ["format_report", "parse_workload", "register", "report_to_json", "run"]

_OPTION_NAMES = (
    "kv_cache_memory",
    "block_size",
    "max_model_len",
    "kv_cache_dtype",
    "num_gpu_blocks_override",
    "mamba_cache_mode",
    "tensor_parallel_size",
    "attention_backend",
    "prefix_caching",
    "gpu",
    "gpu_memory",
    "gpu_capability",
    "gpu_vendor",
    *(option.name for option in MEMORY_OPTIONS),
)
_MAX_JOBS = 256

_EPILOG = """\
example:
  kvpure cache workload.jsonl --model examples/llama3_8b.json --kv-cache-memory 24GiB
  kvpure cache workload.jsonl --model examples/llama3_8b.json --kv-cache-memory 1GiB \\
      --sweep-memory 256MiB,512MiB,1GiB --plot curve.png --jobs 3
  kvpure cache workload.jsonl --model deepseek-ai/DeepSeek-V2-Lite --gpu L4 \\
      --kv-cache-memory 9GiB --max-model-len 8192
  kvpure cache workload.jsonl --model examples/llama3_8b.json --gpu L4 --max-model-len 8192
  kvpure cache chats.jsonl --model examples/llama3_8b.json --kv-cache-memory 1GiB \\
      --tokenizer examples/tiny-chat-tokenizer
  kvpure cache examples/sharegpt_sample.json --model examples/llama3_8b.json \\
      --kv-cache-memory 1GiB --max-model-len 2048 --tokenizer examples/tiny-chat-tokenizer
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
    parser.add_argument(
        "workload", metavar="WORKLOAD.jsonl", help="requests, one JSON a line, or ShareGPT"
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="CONFIG.json|ORG/NAME",
        help="a config.json, its model folder, or a Hugging Face id read from the local cache",
    )
    for option in (*OPTIONS, *SERVE_OPTIONS):
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
    parser.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a tokenizer.json or a model folder holding it (for prompt and messages lines)",
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw the --sweep-memory curve as a PNG (matplotlib)"
    )
    parser.add_argument(
        "--jobs", metavar="N", default="1", help="run the replays in N processes (default 1)"
    )
    parser.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS|local",
        help="run the replays on a Dask cluster (tcp://HOST:PORT), or on a LocalCluster of "
        "--jobs processes (local); needs kvpure[distributed]",
    )
    parser.add_argument(
        "--progress", action="store_true", help="draw the progress bar even when not on a terminal"
    )
    parser.add_argument(
        "--trace-block-size",
        metavar="N",
        default=str(DEFAULT_TRACE_BLOCK_SIZE),
        help="tokens per hash id of a hash-id trace (Mooncake 512, the default; InferenceX 64)",
    )
    parser.add_argument(
        "--instances",
        metavar="N",
        default="1",
        help="also split the workload over N servers of this pool (a fleet; default 1: none)",
    )
    parser.add_argument(
        "--routing",
        metavar="POLICY[,POLICY...]",
        default=",".join(ROUTING_POLICIES),
        help="the fleet's routing: round-robin, least-loaded, prefix-aware (default: all three)",
    )
    add_memory_options(parser)
    add_vllm_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=run)


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
        "mean_request_hit_rate": round(run.mean_request_hit_rate, 6),
    }


def report_to_json(report: WorkloadReport, decode: Decoder | None = None) -> dict[str, Any]:
    """The report's facts as JSON values (``decode`` shows the prefixes as text)."""
    return {
        "num_requests": report.num_requests,
        "prompt_tokens": report.prompt_tokens,
        "max_num_seqs": report.max_num_seqs,
        "actual": _run_json(report.actual),
        "unbounded": _run_json(report.unbounded),
        "hits_lost_to_eviction": report.hits_lost_to_eviction,
        "short_prefix_requests": report.short_prefix_requests,
        "short_prefix_tokens": report.short_prefix_tokens,
        "top_shared_prefixes": prefixes_to_json(report.actual.top_prefixes, decode),
        **({"fleet": fleet} if (fleet := fleet_to_json(report)) is not None else {}),
    }


def format_report(report: WorkloadReport, decode: Decoder | None = None) -> str:
    """The report as text for an operator (``decode`` shows the prefixes as text)."""
    a, u = report.actual, report.unbounded
    lines = [
        f"requests:             {report.num_requests:,} ({report.prompt_tokens:,} prompt tokens)",
        f"KV cache:             {a.num_blocks - 1:,} blocks of {a.block_size} tokens "
        f"(+ the null block)",
        f"prefix-cache queries: {a.queries:,} tokens",
        f"prefix-cache hits:    {a.hits:,} tokens ({a.hit_rate:.1%}), token-weighted: vLLM's "
        f"prefix_cache_hits / prefix_cache_queries",
        f"per-request average:  {a.mean_request_hit_rate:.1%} (aiperf's: the mean of each "
        f"request's hits / queries)",
        f"unbounded cache:      {u.hits:,} tokens ({u.hit_rate:.1%}; per-request average "
        f"{u.mean_request_hit_rate:.1%}), the upper bound",
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
    top = format_prefixes(report.actual.top_prefixes, decode)
    if top:
        lines.append(top)
    fleet = format_fleet(report)
    if fleet:
        lines.append(fleet)
    lines.append(f"model: {CONCURRENCY_MODEL} (max_num_seqs {report.max_num_seqs})")
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> dict[str, str]:
    return {
        name: str(getattr(args, f"opt_{name}"))
        for name in _OPTION_NAMES
        if getattr(args, f"opt_{name}", None) is not None
    }


def run(args: argparse.Namespace) -> int:
    seqs = parse_positive_int(args.max_num_seqs, field="--max-num-seqs")
    jobs = parse_positive_int(args.jobs, field="--jobs")
    if jobs > _MAX_JOBS:
        raise InvalidFieldError(field="--jobs", value=jobs, reason=f"must be at most {_MAX_JOBS}")
    scheduler = dask_scheduler_option(args.dask_scheduler, jobs)
    labels = sweep_labels(args.sweep_memory)
    if args.plot is not None and labels is None:
        raise InvalidFieldError(
            field="--plot", value=args.plot, reason="draws a sweep: give --sweep-memory too"
        )
    if args.plot is not None:
        check_plot_target(args.plot)
    version = resolve_vllm_version(args.vllm)
    block = parse_positive_int(args.trace_block_size, field="--trace-block-size")
    options = _options(args)
    estimated = check_memory_source(options, sweep=labels is not None)
    config_path = Path(config_argument(args.model))
    config = read_json(str(config_path))
    band = None
    if estimated:
        folder = config_path if config_path.is_dir() else config_path.parent
        band = estimate_band(config, options, args.vllm, model_folder=folder)
        options = split_memory_options(options)[0]
    encoder = load_tokenizer(args.tokenizer) if args.tokenizer is not None else None
    workload = read_workload(args.workload, encoder, trace_block_size=block)
    decode = encoder.decode if encoder is not None else None
    requests = workload.requests
    instances = parse_positive_int(args.instances, field="--instances")
    if instances > MAX_INSTANCES:
        raise InvalidFieldError(
            field="--instances", value=instances, reason=f"must be at most {MAX_INSTANCES}"
        )
    routing = parse_routing(args.routing)
    sweep = SweepInput(requests, config, options, seqs, version, instances, routing)
    figures: list[str | None] = [None] if labels is None else list(labels)
    if band is not None:
        figures = [band.kv_cache_memory_option(end) for end in BAND_ENDS]
    bar = progress_bar(len(requests) * count_runs(sweep, figures), forced=args.progress)
    try:
        strict = labels is None and band is None
        rows = run_sweep(
            sweep, figures, jobs=jobs, strict=strict, progress=bar, dask_scheduler=scheduler
        )
        if band is not None and isinstance(rows[0][1], str):  # the central figure's own error
            run_sweep(sweep, figures[:1], strict=True)
    finally:
        if bar is not None:
            bar.close()
    if labels is None:
        report = rows[0][1]
        if isinstance(report, str):  # not reached: a strict run raises the figure's error
            raise InvalidFieldError(field="--kv-cache-memory", value=None, reason=report)
        ends = None if band is None else BandReport(band=band, low=rows[1][1], high=rows[2][1])
        if args.json:
            data = {
                "vllm_version": version,
                "concurrency_model": CONCURRENCY_MODEL,
                "input": input_to_json(workload),
                **({} if ends is None else band_to_json(ends)),
                **report_to_json(report, decode),
                "peak_rss_bytes": peak_rss_bytes(),
            }
            print(json.dumps(data, indent=2))
        else:
            head = [f"vLLM:                 {version}", format_input(workload)]
            if ends is not None:
                head.append(format_band(ends, report))
            print("\n".join(filter(None, [*head, format_report(report, decode)])))
        return 0
    named = [(str(label), r) for label, r in rows]
    if args.plot is not None:
        served = [(label, r) for label, r in named if not isinstance(r, str)]
        title = f"prefix-cache hit rate, {len(requests):,} requests"
        write_hit_rate_plot(served, args.plot, title=title)
    if args.json:
        data = {
            "vllm_version": version,
            "concurrency_model": CONCURRENCY_MODEL,
            "input": input_to_json(workload),
            "sweep_memory": [
                {"memory": label, "error": r}
                if isinstance(r, str)
                else {"memory": label, **report_to_json(r, decode)}
                for label, r in named
            ],
            "peak_rss_bytes": peak_rss_bytes(),
        }
        print(json.dumps(data, indent=2))
    else:
        print(f"vLLM:                 {version}")
        if format_input(workload):
            print(format_input(workload))
        print(format_sweep(named))
        print(f"model: {CONCURRENCY_MODEL} (max_num_seqs {seqs})")
        if args.plot is not None:
            print(f"curve: {args.plot}")
    return 0
