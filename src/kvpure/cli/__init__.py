"""The ``kvpure`` command: ``plan``, ``hash``, ``events``, ``cache-replay``, ``cache``, ``demo``.

Each subcommand lives in its own module and registers itself through
``register(subparsers)``. This module owns what every subcommand shares: the
parser, and turning any input problem into one line on stderr and exit code 2
(never a traceback).

A command imports only what it runs: :data:`COMMANDS` names each
subcommand's module and one-line help, so ``kvpure --help`` lists them all
without importing any, and ``kvpure plan ...`` imports the plan module alone
(the others appear as bare entries, for the usage line and its errors).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from kvpure import __version__
from kvpure.errors import KVPureError
from kvpure.process_role import mark_command_line

EXIT_USAGE = 2

COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "plan",
        "kvpure.cli.plan_command",
        "plan the KV cache of a model (config.json + options) or of a vLLM planning case",
    ),
    ("hash", "kvpure.cli.hash_command", "print the block hashes vLLM computes for a request"),
    ("events", "kvpure.cli.events_command", "decode or audit vLLM's KV event batches"),
    (
        "cache-replay",
        "kvpure.cli.cache_replay_command",
        "replay requests through vLLM's prefix cache (0.26, 0.33, 0.34), block for block",
    ),
    (
        "cache",
        "kvpure.cli.cache_command",
        "analyze a workload's prefix-cache hits against a KV cache size",
    ),
    (
        "demo",
        "kvpure.cli.demo_command",
        "explain the KV cache of a bundled model (examples/llama3_8b.json on 24 GiB)",
    ),
)
"""Each subcommand: its name, the module whose ``register`` adds it, its one-line help
(the same words the module gives ``add_parser``; a test holds them equal)."""


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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``kvpure`` parser: every subcommand registered, or only the one named ``only``.

    With ``only`` set, the other subcommands are bare entries (name and help)
    and their modules are not imported.
    """
    parser = _Parser(
        prog="kvpure",
        description="vLLM's KV-cache planning and block hashing, exactly and offline.",
    )
    parser.add_argument("--version", action="version", version=f"kvpure {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, summary in COMMANDS:
        if only is None or name == only:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


_LAZY = build_parser


def _command_named(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` runs ("" for none: the top-level help, --version, a typo).

    The top-level parser has options only before the command, so the first
    word that is not an option is the command.
    """
    first = next((word for word in argv if not word.startswith("-")), "")
    return first if any(first == name for name, _, _ in COMMANDS) else ""


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
    mark_command_line()
    if os.environ.get("KVPURE_NO_EXTENSION") == "1":  # the pure-Python paths
        from kvpure.cache import pool_loops
        from kvpure.free_queue import set_accelerated
        from kvpure.hashing.accelerator import set_enabled

        set_enabled(False)
        set_accelerated(False)
        pool_loops.set_accelerated(False)
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        builder = build_parser
        # A caller that swapped in its own zero-argument build_parser gets it called as is.
        parser = builder(only=_command_named(words)) if builder is _LAZY else builder()
        args = parser.parse_args(words)
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
