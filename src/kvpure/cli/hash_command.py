"""``kvpure hash``."""

from __future__ import annotations

import argparse
from typing import Any

from kvpure.errors import KVPureNotImplementedError


def register(sub: Any) -> None:
    """Add the ``hash`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser("hash", help="(not available yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise KVPureNotImplementedError("kvpure hash is not available yet")
