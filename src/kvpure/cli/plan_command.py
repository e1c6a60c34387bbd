"""``kvpure plan FILE``: a model's config.json with deployment options, or a vLLM planning case.

Which one FILE is, is decided by its content: a Hugging Face config.json
(``architectures`` / ``model_type``) gets the explained capacity report
(``kvpure.report_plan``); a planning case (``vllm_config``,
``available_memory``, ``kv_cache_specs``, optionally under ``input`` as in
the goldens) is planned as given. ``--json`` prints the same facts as data;
for a planning case it prints ``{"output", "final_max_model_len",
"derived"}`` as in the goldens, or ``{"error": ...}`` with exit code 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.interop.planning import parse_planning_input, plan_input, render_error, render_plan
from kvpure.models.cli_options import add_deployment_options, given_options
from kvpure.report import build_capacity_report
from kvpure.report_plan import config_report_output, looks_like_model_config
from kvpure.report_text import render_report

_EPILOG = """\
examples:
  kvpure plan examples/llama3_8b.json --kv-cache-memory 24GiB
  kvpure plan examples/gemma3_12b.json --kv-cache-memory 20GiB --max-model-len 32K
  kvpure plan examples/deepseek_v3.json --kv-cache-memory 40GiB -tp 8 --json
  kvpure plan examples/llama3_8b.json --kv-cache-memory 8GiB --max-model-len auto
  kvpure plan examples/gpt_oss_20b.json --kv-cache-memory 24GiB \\
      --sweep max_model_len=4096,32768,131072
  kvpure plan tests/data/vllm-0.26.0/gemma3_12b.json --json   (a vLLM planning case)
"""


def register(sub: Any) -> None:
    """Add the ``plan`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "plan",
        help="plan the KV cache of a model (config.json + options) or of a vLLM planning case",
        description="Plan the KV cache as vLLM 0.26 would and explain the result: blocks, "
        "tokens that fit, max-length requests at once, the (auto-fitted) max_model_len, block "
        "sizes, one row per KV cache group and where memory is wasted. FILE is a Hugging Face "
        "config.json (give the deployment options below; nothing is downloaded) or a "
        "vLLM-format planning case; which one is detected from its content.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file", metavar="FILE", help="a model's config.json, or a vLLM planning case (JSON)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the facts as JSON (for a planning case: the goldens' output shape)",
    )
    add_deployment_options(parser)
    parser.set_defaults(run=run)


def _read_json(path: str) -> object:
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise json.JSONDecodeError(f"{path}: {err.msg}", err.doc, err.pos) from None


def run(args: argparse.Namespace) -> int:
    data = _read_json(args.file)
    if looks_like_model_config(data):
        text, code = config_report_output(
            data, given_options(args), sweep_text=args.sweep, as_json=args.json
        )
        print(text)
        return code
    case = data.get("input", data) if isinstance(data, dict) else data
    if not isinstance(case, dict) or "kv_cache_specs" not in case:
        raise InvalidFieldError(
            field=args.file,
            value=sorted(data)[:6] if isinstance(data, dict) else type(data).__name__,
            reason="is neither a model's config.json (it has no 'architectures') nor a vLLM "
            "planning case (it has no 'kv_cache_specs')",
        )
    given = [f"--{name.replace('_', '-')}" for name in given_options(args)]
    if args.sweep is not None:
        given.append("--sweep")
    if given:
        raise InvalidFieldError(
            field=given[0],
            value=args.file,
            reason="deployment options apply to a model's config.json, not to a planning case",
        )
    parsed = parse_planning_input(case)
    try:
        plan = plan_input(parsed)
    except KVPureError as err:
        if args.json:
            print(json.dumps(render_error(err), indent=2))
            return 2
        raise
    if args.json:
        print(json.dumps(render_plan(plan), indent=2))
    else:
        print(render_report(build_capacity_report(plan, parsed.available_memory)))
    return 0
