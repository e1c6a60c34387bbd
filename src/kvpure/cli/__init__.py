"""The ``kvpure`` command: ``plan``, ``hash``, ``events``, ``cache-replay``, ``cache``, ``demo``.

Each subcommand lives in its own module and registers itself through
``register(subparsers)``. This module owns what every subcommand shares: the
parser, and turning any input problem into one line on stderr and exit code 2
(never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from kvpure import __version__
from kvpure.cli import (
    cache_command,
    cache_replay_command,
    demo_command,
    events_command,
    hash_command,
    plan_command,
)
from kvpure.errors import KVPureError

EXIT_USAGE = 2


class CommandLineError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2."""

    def format_help(self) -> str:
        """The help without the reST markup the docstrings it is built from carry."""
        text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", super().format_help())
        return text.replace("``", "")

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("kvpure").strip()
        raise CommandLineError(f"{where}: {message}" if where else message)


def build_parser() -> argparse.ArgumentParser:
    """The full ``kvpure`` parser with every subcommand registered."""
    parser = _Parser(
        prog="kvpure",
        description="vLLM's KV-cache planning and block hashing, exactly and offline.",
    )
    parser.add_argument("--version", action="version", version=f"kvpure {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in (
        plan_command,
        hash_command,
        events_command,
        cache_replay_command,
        cache_command,
        demo_command,
    ):
        module.register(sub)
    return parser


def _fail(message: str) -> int:
    first_line = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"kvpure: error: {first_line}", file=sys.stderr)
    return EXIT_USAGE


def _closed_pipe() -> int:
    """The reader went away (``kvpure plan ... | head -1``): end quietly, as cat does."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    if os.environ.get("KVPURE_NO_EXTENSION") == "1":  # the pure-Python hashing path
        from kvpure.hashing.accelerator import set_enabled

        set_enabled(False)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "run", None) is None:  # a bare ``kvpure``: the help, as git does
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code: int = args.run(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except CommandLineError as err:
        return _fail(str(err))
    except json.JSONDecodeError as err:
        return _fail(f"invalid JSON: {err}")
    except KVPureError as err:
        return _fail(str(err))
    except OSError as err:
        name = err.filename if err.filename is not None else ""
        return _fail(f"{name}: {err.strerror or err}")
    except KeyboardInterrupt:
        return 130
