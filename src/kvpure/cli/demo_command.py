"""``kvpure demo``: the main job, run by ``make demo``."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo", help="plan a bundled model and hash a bundled request"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("kvpure demo")
    return 0
