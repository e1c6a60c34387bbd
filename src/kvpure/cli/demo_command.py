"""``kvpure demo``: the main job, run by ``make demo``.

It explains the KV cache of a bundled model config (Llama-3-8B with 24 GiB
of KV cache memory per GPU), sweeps max_model_len to show what a deployment
choice costs, and, when the bundled ``examples/request.json`` is present,
prints its block hashes with ``kvpure hash`` (PYTHONHASHSEED 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvpure.cli.plan_output import config_report_output

DEMO_CONFIG = "llama3_8b.json"
DEMO_OPTIONS = {"kv_cache_memory": "24GiB"}
DEMO_SWEEP = "max_model_len=2048,4096,8192"
DEMO_REQUEST = "request.json"


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="explain the KV cache of a bundled model (examples/llama3_8b.json on 24 GiB)",
        description="Plan the bundled Llama-3-8B config.json with 24 GiB of KV cache memory "
        "per GPU, print the explained capacity report and a max_model_len sweep, then the "
        "block hashes of examples/request.json (when bundled).",
    )
    parser.set_defaults(run=run)


def examples_dir() -> Path:
    """The demo's inputs, shipped inside the package (``examples/`` links to them)."""
    return Path(__file__).resolve().parent / "demo_inputs"


def run(args: argparse.Namespace) -> int:
    path = examples_dir() / DEMO_CONFIG
    config = json.loads(path.read_text(encoding="utf-8"))
    flags = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in DEMO_OPTIONS.items())
    print(f"$ kvpure plan examples/{DEMO_CONFIG} {flags}\n")
    text, _ = config_report_output(config, DEMO_OPTIONS, sweep_text=None, as_json=False)
    print(text)
    print(f"\n$ kvpure plan examples/{DEMO_CONFIG} {flags} --sweep {DEMO_SWEEP}\n")
    text, _ = config_report_output(config, DEMO_OPTIONS, sweep_text=DEMO_SWEEP, as_json=False)
    print(text)
    request = examples_dir() / DEMO_REQUEST
    if request.is_file():
        from kvpure.cli import build_parser  # the package imports this module first

        print(f"\n$ kvpure hash examples/{DEMO_REQUEST} --seed 0\n")
        hash_args = build_parser().parse_args(["hash", str(request), "--seed", "0"])
        code: int = hash_args.run(hash_args)
        return code
    return 0
