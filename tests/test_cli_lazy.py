"""A command imports only what it runs; type checks cost nothing at import.

``kvpure --help`` lists every subcommand from ``kvpure.cli.COMMANDS`` without
importing any of their modules, and ``kvpure plan`` imports the plan module
alone. The one-line helps of that table must be the words each module gives
``add_parser`` (checked here against the fully built parser). The runtime type
checks (``kvpure.runtime_types``) compile on first construction, without
beartype in a user's process, and still refuse a wrong type there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from kvpure.cli import COMMANDS, build_parser


def _clean(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _subcommand_helps(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: choice.help for choice in action._choices_actions}


def test_the_table_holds_each_modules_own_help() -> None:
    full = _subcommand_helps(build_parser())
    assert full == {name: summary for name, _, summary in COMMANDS}


@pytest.mark.parametrize("name", [name for name, _, _ in COMMANDS])
def test_a_lazy_parser_lists_the_same_commands(name: str) -> None:
    assert _subcommand_helps(build_parser(only=name)) == _subcommand_helps(build_parser())
    assert _subcommand_helps(build_parser(only="")) == _subcommand_helps(build_parser())


MODULES_AFTER = """
import contextlib, io, sys
from kvpure.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(sorted(m for m in sys.modules if m.startswith("kvpure.cli.") and m.endswith("_command")))
print("beartype" in sys.modules)
"""


def test_help_imports_no_command_module() -> None:
    lines = _clean(MODULES_AFTER.format(argv=["--help"])).splitlines()
    assert lines == ["[]", "False"]


def test_plan_help_imports_the_plan_module_alone() -> None:
    lines = _clean(MODULES_AFTER.format(argv=["plan", "--help"])).splitlines()
    assert lines == ["['kvpure.cli.plan_command']", "False"]


def test_checks_still_refuse_a_wrong_type_without_beartype() -> None:
    code = (
        "import sys, kvpure\n"
        "from kvpure.errors import KVPureTypeError\n"
        "spec = dict(num_kv_heads=8, head_size=128, dtype=kvpure.KVDtype.BFLOAT16)\n"
        "kvpure.FullAttentionSpec(block_size=16, **spec)\n"
        "try:\n"
        "    kvpure.FullAttentionSpec(block_size='16', **spec)\n"
        "except KVPureTypeError as err:\n"
        "    print('refused', 'block_size' in str(err))\n"
        "print('beartype' in sys.modules)\n"
    )
    assert _clean(code).splitlines() == ["refused True", "False"]
