"""Bad-input audit of kvpure's public API and CLI (issue 24, "the API audit to 100%").

Every public entry point in :data:`ENTRIES` is called once with good arguments
(which must work) and then once per parameter per bad value of that
parameter's kind (``None``, a bool where an int is meant, -1, 0, 2**200, NaN,
inf, '', a str for an int, a float for an int, ``object()``, wrong nested
containers, unknown enum names). Each outcome is one of

- ``typed``: an error deriving from :class:`kvpure.errors.KVPureError`;
- ``untyped``: any other exception (TypeError, KeyError, AssertionError, ...);
- ``accepted``: no error for a bad value.

The calls run in a fresh interpreter without the test suite's beartype hook
(a user's process); every case gets a fresh copy of the setup namespace.
The CLI part runs ``kvpure <cmd>`` with bad option values: each must exit 2
with one line on stderr and no traceback.

Run: ``PYTHONPATH=src python tools/api_fuzz.py [--api-only|--cli-only] [-v]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"  # --src: audit another checkout's sources (a before/after count)

from api_fuzz_table import ENTRIES, SETUP, Entry  # noqa: E402

RUNNER = """
import json, sys
from kvpure.errors import KVPureError
cases = json.loads(sys.stdin.read())
namespace = {}
exec(open(sys.argv[1]).read(), namespace)
results = []
for case in cases:
    try:
        exec(case, dict(namespace))
    except KVPureError as err:
        results.append(["typed", f"{type(err).__name__}: {str(err)[:160]}"])
    except BaseException as err:
        kind = f"{type(err).__module__}.{type(err).__name__}"
        results.append(["untyped", f"{kind}: {str(err)[:160]}"])
    else:
        results.append(["accepted", ""])
print(json.dumps(results))
"""


def run_api(
    verbose: bool, entries: tuple[Entry, ...] = ENTRIES, setup_source: str = SETUP
) -> dict[str, int]:
    cases: list[tuple[str, str, str, str]] = []
    for entry in entries:
        for param, bad, source in entry.cases():
            cases.append((entry.name, param, bad, source))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as setup:
        setup.write(setup_source)
    setup_file = Path(setup.name)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(setup_file)],
        input=json.dumps([c[3] for c in cases]),
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
    )
    setup_file.unlink()
    if done.returncode != 0:
        sys.exit(f"the runner failed:\n{done.stderr[-3000:]}")
    outcomes = json.loads(done.stdout)
    counts = {"typed": 0, "untyped": 0, "accepted": 0, "good_broken": 0}
    for (name, param, bad, source), (outcome, detail) in zip(cases, outcomes, strict=True):
        if not param:  # the good call
            if outcome != "accepted":
                counts["good_broken"] += 1
                print(f"GOOD CALL FAILED {name}: {source}\n    {outcome} {detail}")
            continue
        counts[outcome] += 1
        if outcome != "typed" or verbose:
            print(f"{outcome:8} {name}.{param}={bad}  ::  {source}  ->  {detail}")
        elif verbose:
            print(f"typed    {name}.{param}={bad}  ->  {detail}")
    return counts


# -- the CLI -------------------------------------------------------------------------

from api_fuzz_cli import CLI_CASES  # noqa: E402


def _cli_one(argv: list[str]) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "kvpure", *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    err = done.stderr.strip()
    if "Traceback" in done.stderr:
        return "untyped", err.splitlines()[-1] if err else ""
    if done.returncode == 0:
        return "accepted", done.stdout[-100:].replace("\n", " ")
    if done.returncode != 2:
        return "untyped", f"exit {done.returncode}: {err[-160:]}"
    lines = [line for line in err.splitlines() if line.strip()]
    # argparse's own refusal prints its usage lines then one "error:" line
    if lines and lines[-1].startswith("kvpure") and ": error: " in lines[-1]:
        return "typed", lines[-1]
    if len(lines) == 1 or (done.stdout.strip().startswith('{"error"') and len(lines) <= 1):
        return "typed", lines[0] if lines else done.stdout.strip()[:160]
    return "untyped", f"{len(lines)} lines: {err[-200:]}"


def run_cli(verbose: bool) -> dict[str, int]:
    counts = {"typed": 0, "untyped": 0, "accepted": 0}
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(_cli_one, CLI_CASES))
    for argv, (outcome, detail) in zip(CLI_CASES, outcomes, strict=True):
        counts[outcome] += 1
        if outcome != "typed" or verbose:
            print(f"{outcome:8} kvpure {' '.join(argv)}  ->  {detail[:200]}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-only", action="store_true")
    parser.add_argument("--cli-only", action="store_true")
    parser.add_argument("--gpu-only", action="store_true", help="only kvpure_gpu (needs torch)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--src", type=Path, default=None, help="the kvpure sources to audit")
    args = parser.parse_args()
    if args.src is not None:
        global SRC
        SRC = args.src.resolve()
    if not args.cli_only and not args.gpu_only:
        counts = run_api(args.verbose)
        print(
            f"API: {len(ENTRIES)} entry points, {counts['typed']} typed / "
            f"{counts['untyped']} untyped / {counts['accepted']} accepted"
            f" ({counts['good_broken']} good calls failed)"
        )
    run_gpu = args.gpu_only or not (args.api_only or args.cli_only)
    if run_gpu and importlib.util.find_spec("torch") is not None:
        from api_fuzz_gpu import GPU_ENTRIES, GPU_SETUP

        gpu = run_api(args.verbose, GPU_ENTRIES, GPU_SETUP)
        print(
            f"GPU API: {len(GPU_ENTRIES)} entry points, {gpu['typed']} typed / "
            f"{gpu['untyped']} untyped / {gpu['accepted']} accepted"
            f" ({gpu['good_broken']} good calls failed)"
        )
    if not args.api_only and not args.gpu_only:
        cli = run_cli(args.verbose)
        print(
            f"CLI: {len(CLI_CASES)} cases, {cli['typed']} typed / {cli['untyped']} untyped / "
            f"{cli['accepted']} accepted"
        )


if __name__ == "__main__":
    main()
