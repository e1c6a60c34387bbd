"""``kvpure cache-replay TRACE.json [--vllm VERSION] [--json]``: replay a trace, block for block.

TRACE.json is a ``kvpure-cache-replay/1`` trace, or a golden file holding
one under ``trace`` (``-`` reads standard input). The release replayed is
``--vllm`` (0.26, 0.33 or 0.34), else the trace's ``"vllm_version"``, else
0.34. With ``--json`` it prints ``{"vllm_version", "kv_cache_config",
"records", "final_state"}`` as the cache-replay goldens of that release hold
them (a free queue longer than 4096 blocks is recorded by its head, and
``free_queue_omitted`` counts the rest); without, the release and one line per
op. A malformed trace, or one that asks for something the replay does not
model (a pool over 4,194,304 blocks included), exits with code 2 and (with
``--json``) prints ``{"error": {"type", "vllm_type", "message"}}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kvpure.cache import replay, replay_trace
from kvpure.cache.trace_json import parse_trace, render_result
from kvpure.cli.input_files import read_json
from kvpure.cli.vllm_option import add_vllm_argument
from kvpure.errors import KVPureError
from kvpure.interop.planning import vllm_error_type

EXIT_BAD_TRACE = 2

__all__ = ["EXIT_BAD_TRACE", "error_object", "register", "replay_trace", "run"]


def register(sub: Any) -> None:
    """Add the ``cache-replay`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "cache-replay",
        help="replay requests through vLLM's prefix cache (0.26, 0.33, 0.34), block for block",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument(
        "trace", metavar="TRACE.json", help="a kvpure-cache-replay/1 trace (or - for stdin)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"vllm_version", "kv_cache_config", "records", "final_state"} as the '
        "goldens hold them",
    )
    add_vllm_argument(parser)
    parser.set_defaults(run=run)


def error_object(err: Exception) -> dict[str, Any]:
    """``{"error": {"type", "vllm_type", "message"}}`` for a trace that cannot be replayed."""
    if isinstance(err, KVPureError):
        vllm_type = vllm_error_type(err)
    elif isinstance(err, json.JSONDecodeError):
        vllm_type = "ValueError"
    else:
        vllm_type = type(err).__name__
    return {"error": {"type": type(err).__name__, "vllm_type": vllm_type, "message": str(err)}}


def _read(path: str) -> object:
    return read_json(path)


def _summary(result: dict[str, Any]) -> str:
    config = result["kv_cache_config"]
    lines = [
        f"vLLM {result['vllm_version']}: the prefix cache as this release's KVCacheManager "
        "and scheduler drive it",
        f"{config['coordinator']}: {config['num_blocks']} blocks (block 0 is the null block), "
        f"{len(config['kv_cache_groups'])} group(s), "
        f"scheduler block {config['scheduler_block_size']}, "
        f"hash block {config['hash_block_size']}, caching "
        f"{'on' if config['enable_caching'] else 'off'}",
    ]
    for i, record in enumerate(result["records"]):
        who = "" if record["request_id"] is None else f" {record['request_id']}"
        pool = record["pool"]
        lines.append(
            f"{i:>4} {record['op']}{who}: {json.dumps(record['outcome'], separators=(',', ':'))}"
            f" | free {pool['num_free_blocks']}, cached hashes {pool['num_cached_hashes']}, "
            f"{len(record['events'])} event(s)"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        result = render_result(replay(parse_trace(_read(args.trace), vllm_version=args.vllm)))
    except (KVPureError, json.JSONDecodeError, OSError) as err:
        if args.json:
            print(json.dumps(error_object(err), indent=1))
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"kvpure: error: {message}", file=sys.stderr)
        return EXIT_BAD_TRACE
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(_summary(result))
    return 0
