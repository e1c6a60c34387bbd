"""``kvpure plan CASE.json [--json]``: plan a vLLM planning case.

CASE.json is a golden planning case (its ``input`` is read) or a bare input
object (``vllm_config``, ``available_memory``, ``kv_cache_specs``). With
``--json`` it prints ``{"output", "final_max_model_len", "derived"}`` as the
goldens hold them, or ``{"error": {...}}`` and exit code 2 when vLLM would
fail. Without ``--json`` it prints a short readable report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kvpure.errors import KVPureError
from kvpure.interop.planning import (
    PlanningInput,
    parse_planning_input,
    plan_input,
    render_error,
    render_plan,
)
from kvpure.planning import KVCachePlan
from kvpure.specs import UniformTypeKVCacheSpecs

EXIT_PLANNING_ERROR = 2


def register(sub: Any) -> None:
    """Add the ``plan`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "plan", help="plan KV cache memory for a vLLM planning case (CASE.json)"
    )
    parser.add_argument("case", metavar="CASE.json", help="a planning case or its input object")
    parser.add_argument(
        "--json", action="store_true", help="print the result in the goldens' JSON shape"
    )
    parser.set_defaults(run=run)


def load_case_input(path: str) -> object:
    """The planning input in a case file: its ``input`` member, or the whole object."""
    data: object = json.loads(Path(path).read_text())
    if isinstance(data, dict) and "input" in data:
        return data["input"]
    return data


def read_planning_case(path: str) -> PlanningInput:
    """Parse a case file into kvpure values (InvalidFieldError names a bad field)."""
    return parse_planning_input(load_case_input(path))


def format_report(plan: KVCachePlan) -> str:
    """A short readable report: blocks, groups, tensors, capacity."""
    lines = [
        f"num_blocks: {plan.num_blocks} (per worker, {len(plan.kv_cache_configs)} worker(s))",
        f"max_model_len: {plan.final_max_model_len}",
    ]
    if plan.auto_fit is not None and plan.auto_fit.reduced:
        lines.append(
            f"auto-fit: reduced from {plan.auto_fit.original_max_model_len} "
            f"to {plan.auto_fit.fitted_max_model_len}"
        )
    for fact in plan.padding:
        lines.append(f"note: {fact.message}")
    for w, (config, facts) in enumerate(zip(plan.kv_cache_configs, plan.workers, strict=True)):
        lines.append(f"worker {w}:")
        for g, group in enumerate(config.kv_cache_groups):
            spec = group.kv_cache_spec
            kind = type(spec).__name__
            if isinstance(spec, UniformTypeKVCacheSpecs):
                inner = sorted({type(s).__name__ for s in spec.kv_cache_specs.ordered_values()})
                kind = f"{kind}[{', '.join(inner)}]"
            eagle = ", eagle" if group.is_eagle_group else ""
            lines.append(
                f"  group {g}: {len(group.layer_names)} layers, {kind}, block_size "
                f"{spec.block_size} tokens, page {spec.page_size_bytes} bytes{eagle}"
            )
        total = sum(t.size for t in config.kv_cache_tensors)
        lines.append(f"  tensors: {len(config.kv_cache_tensors)}, {total} bytes in all")
        if facts.kv_cache_capacity_tokens is not None and facts.max_concurrency is not None:
            lines.append(
                f"  capacity: {facts.kv_cache_capacity_tokens:,} tokens; max concurrency "
                f"{facts.max_concurrency:.2f}x at {plan.final_max_model_len:,} tokens per request"
            )
        lines.append(
            f"  block sizes: scheduler {facts.scheduler_block_size}, hash {facts.hash_block_size}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    parsed = read_planning_case(args.case)
    try:
        plan = plan_input(parsed)
    except KVPureError as err:
        if args.json:
            print(json.dumps(render_error(err), indent=1))
        else:
            print(f"kvpure: planning failed: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_PLANNING_ERROR
    if args.json:
        print(json.dumps(render_plan(plan), indent=1))
    else:
        print(format_report(plan))
    return 0
