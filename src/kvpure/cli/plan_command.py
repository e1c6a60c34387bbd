"""``kvpure plan FILE [options] [--json]``: a model's config.json, or a vLLM planning case.

Which one FILE is, is decided by its content.

A Hugging Face config.json (``architectures`` / ``model_type``) is read with
the deployment options (``--kv-cache-memory``, ``--max-model-len``, ...) and
gets the explained capacity report of ``kvpure.report.model_plan`` (``--json``:
the same facts as data; ``--sweep NAME=V1,V2``: one row per value).

A planning case is a golden planning case (its ``input`` is read) or a bare
input object (``vllm_config``, ``available_memory``, ``kv_cache_specs``).
With ``--json`` it prints ``{"output", "final_max_model_len", "derived"}`` as
the goldens hold them, or ``{"error": {...}}`` and exit code 2 when vLLM
would fail. Without ``--json`` it prints a short per-worker summary, then
the explained report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvpure.cli.input_files import read_json
from kvpure.cli.plan_memory import add_memory_options, given_memory_options
from kvpure.cli.plan_options import add_deployment_options, given_options
from kvpure.cli.plan_output import config_report
from kvpure.cli.serve_options import VLLM_OPTION, add_serve_options, given_serve_options
from kvpure.cli.vllm_option import add_vllm_argument
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.hf_cache import config_argument
from kvpure.planning.planner import KVCachePlan
from kvpure.report.capacity import build_capacity_report
from kvpure.report.model_plan import looks_like_model_config
from kvpure.report.text import render_report
from kvpure.specs import UniformTypeKVCacheSpecs
from kvpure.versions import resolve_vllm_version

if TYPE_CHECKING:
    from kvpure.interop.planning import PlanningInput

EXIT_PLANNING_ERROR = 2

_EPILOG = """\
examples:
  kvpure plan examples/llama3_8b.json --kv-cache-memory 24GiB
  kvpure plan examples/gpt_oss_20b.json --gpu H100 --kv-cache-memory 12.13GiB,11.33GiB -tp 2
  kvpure plan examples/deepseek_v2_lite.json --gpu L4 --kv-cache-memory 9GiB -tp 2
  kvpure plan examples/gemma3_12b.json --kv-cache-memory 20GiB --max-model-len 32K
  kvpure plan examples/deepseek_v3.json --kv-cache-memory 40GiB -tp 8 --json
  kvpure plan examples/llama3_8b.json --kv-cache-memory 8GiB --max-model-len auto
  kvpure plan examples/gpt_oss_20b.json --kv-cache-memory 24GiB \\
      --sweep max_model_len=4096,32768,131072
  kvpure plan Qwen/Qwen3-8B --kv-cache-memory 24GiB   (from the local Hugging Face cache)
  kvpure plan examples/llama3_8b.json --gpu H100-80GB --gpu-memory-utilization 0.9
      (no --kv-cache-memory: estimated from the GPU, with its band)
  kvpure plan examples/llama3_8b.json --gpu L4 --sweep tensor_parallel_size=1,2,4,8
  kvpure plan examples/llama3_8b.json --sweep gpu=H100-80GB,A100-40GB,L4
  kvpure plan my_llama_relative.json --architecture-as LlamaForCausalLM --kv-cache-memory 8GiB
  kvpure plan tests/data/vllm-0.26.0/gemma3_12b.json --json   (a vLLM planning case)
"""


def register(sub: Any) -> None:
    """Add the ``plan`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "plan",
        help="plan the KV cache of a model (config.json + options) or of a vLLM planning case",
        description="Plan the KV cache as vLLM (--vllm; default 0.34) would and explain the "
        "result: blocks, "
        "tokens that fit, max-length requests at once, the (auto-fitted) max_model_len, block "
        "sizes, one row per KV cache group and where memory is wasted. FILE is a Hugging Face "
        "config.json (give the deployment options below; nothing is downloaded) or a "
        "vLLM-format planning case; which one is detected from its content.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "case",
        metavar="FILE",
        help="a model's config.json, its model folder or its Hugging Face id (org/name, read "
        "from the local cache, never downloaded), or a vLLM planning case (CASE.json) or its "
        "input object",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the facts as JSON (for a planning case: the goldens' JSON shape)",
    )
    parser.add_argument(
        "--architecture-as",
        metavar="ARCH",
        help="plan a model whose architecture kvpure does not list by a listed one's rule "
        "(e.g. LlamaForCausalLM); the report says so",
    )
    add_vllm_argument(parser)
    add_deployment_options(parser)
    add_serve_options(parser)
    add_memory_options(parser)
    parser.set_defaults(run=run)


def _read_json(path: str) -> object:
    return read_json(path)


def _case_input(data: object) -> object:
    if isinstance(data, dict) and "input" in data:
        return data["input"]
    return data


def load_case_input(path: str) -> object:
    """The planning input in a case file: its ``input`` member, or the whole object."""
    return _case_input(_read_json(path))


def case_file_version(data: object, flag: str | None) -> str:
    """The release a case file is planned for: ``--vllm`` > its ``"vllm_version"`` (beside
    ``"input"``, or beside ``"vllm_config"`` in a bare input) > the default."""
    file_value = data.get("vllm_version") if isinstance(data, dict) else None
    return resolve_vllm_version(flag, file_value)


def read_planning_case(path: str, vllm_version: str | None = None) -> PlanningInput:
    """Parse a case file into kvpure values (InvalidFieldError names a bad field)."""
    from kvpure.interop.planning import parse_planning_input  # planning cases only

    data = _read_json(path)
    return parse_planning_input(
        _case_input(data), vllm_version=case_file_version(data, vllm_version)
    )


def format_report(plan: KVCachePlan) -> str:
    """A short readable report: blocks, groups, tensors, capacity."""
    lines = [
        f"planned as vLLM {plan.settings.vllm_version}",
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


def _given(args: argparse.Namespace) -> dict[str, str]:
    return given_options(args) | given_serve_options(args) | given_memory_options(args)


def _model_folder(path: str) -> Path | None:
    """The folder of the config.json read (the weights' folder), None for stdin."""
    if path == "-":
        return None
    return Path(path) if Path(path).is_dir() else Path(path).parent


def _config_options(args: argparse.Namespace) -> dict[str, str]:
    """The option texts of the config path, ``--vllm`` among them when given."""
    options = _given(args)
    if getattr(args, "vllm", None) is not None:
        options[VLLM_OPTION] = args.vllm
    return options


def _run_config(args: argparse.Namespace, config: object, path: str) -> int:
    text, code, failure = config_report(
        config,
        _config_options(args),
        sweep_text=args.sweep,
        as_json=args.json,
        architecture_as=args.architecture_as,
        model_folder=_model_folder(path),
    )
    print(text, flush=True)
    if failure is not None:
        raise failure
    return code


def _check_is_case(args: argparse.Namespace, data: object) -> object:
    """The planning input of ``data``, refusing files that are neither kind and stray options."""
    case = _case_input(data)
    if not isinstance(case, dict) or "kv_cache_specs" not in case:
        raise InvalidFieldError(
            field=args.case,
            value=sorted(data)[:6] if isinstance(data, dict) else type(data).__name__,
            reason="is neither a model's config.json (it has no 'architectures') nor a vLLM "
            "planning case (it has no 'kv_cache_specs')",
        )
    given = [f"--{name.replace('_', '-')}" for name in _given(args)]
    if args.sweep is not None:
        given.append("--sweep")
    if args.architecture_as is not None:
        given.append("--architecture-as")
    if given:
        raise InvalidFieldError(
            field=given[0],
            value=args.case,
            reason="deployment options apply to a model's config.json, not to a planning case",
        )
    return case


def run(args: argparse.Namespace) -> int:
    path = config_argument(args.case)
    data = _read_json(path)
    if looks_like_model_config(data):
        return _run_config(args, data, path)
    # A planning case: its JSON reader and writer (not needed for a config.json).
    from kvpure.interop.planning import parse_planning_input, plan_input, render_error, render_plan

    version = case_file_version(data, args.vllm)
    parsed = parse_planning_input(_check_is_case(args, data), vllm_version=version)
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
        print()
        print(render_report(build_capacity_report(plan, parsed.available_memory)))
    return 0
