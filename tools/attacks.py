"""Run the hostile inputs of issue 24 (items 1-5 and 7), each in its own limited process.

Every case of :data:`attack_cases.ATTACKS` builds its files in a fresh folder, then
runs ``kvpure ARGS`` (or Python code) in a child process limited to
``--timeout`` seconds (default 10) and 3 GiB of address space
(``resource.setrlimit``), with its working folder, ``HOME`` and ``TMPDIR`` inside
the case folder. A case passes when

- ``refused``: the CLI exits 2 with exactly one line on stderr and no traceback
  (Python code: raises an error under ``kvpure.errors.KVPureError``);
- ``clean``: the CLI exits 0, or 2 with one line, and no traceback (Python code:
  returns, or raises a kvpure error);
- ``works`` (a control, or hostile bytes that are valid input): the CLI exits 0
  (Python code: returns);
- ``survives`` (Python code whose own callback raises or corrupts state): the
  process does not crash, whatever the call raises;

and, for both, nothing was written besides the case's named outputs (the case
folder, the working folder, ``HOME``, ``TMPDIR`` and the repository's top level
are compared before and after) and stdout stayed under the case's bound.
Other outcomes: ``hang`` (killed at the timeout), ``crash`` (a signal or an
exit code other than 0/1/2, memory included), ``traceback``, ``lines``
(several lines on stderr), ``accepted`` (exit 0 for a refused case), ``wrote``
and ``output``.

Run: ``PYTHONPATH=src python tools/attacks.py [-k SUBSTRING] [--timeout S] [--quick] [-v]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attack_builders import EX, ROOT, Attack
from attack_cases import ATTACKS, ORIGINAL, TESTED, WIDER

MEMORY_LIMIT = 3 << 30

CODE_RUNNER = """
import sys
from kvpure.errors import KVPureError
try:
    exec(sys.argv[1], {})
except KVPureError as err:
    print("typed", type(err).__name__, str(err)[:200].replace(chr(10), " "))
except BaseException as err:
    print("untyped", type(err).__module__ + "." + type(err).__name__, str(err)[:200])
else:
    print("accepted")
"""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _tree(folder: Path) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), folder))
    return found


def run_one(attack: Attack, timeout: float) -> tuple[str, str, float]:
    """``(outcome, detail, seconds)``: outcome is ``ok`` or what went wrong; seconds is the
    child's wall time (building the case's files not counted)."""
    with tempfile.TemporaryDirectory(prefix="kvpure-attack-") as tmp:
        d = Path(tmp)
        for sub in ("cwd", "home", "tmp"):
            (d / sub).mkdir()
        try:
            attack.make(d)
        except Exception as err:  # the case's own builder is broken
            return "builder", f"{type(err).__name__}: {err}"[:240], 0.0
        before = _tree(d)
        top_before = set(os.listdir(ROOT))

        def fill(text: str) -> str:
            return text.replace("{d}", str(d)).replace("{ex}", str(EX))

        env = {
            **os.environ,
            "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT / "src")),
            "HOME": str(d / "home"),
            "TMPDIR": str(d / "tmp"),
            "HF_HUB_OFFLINE": "1",
        }
        for key in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
            env.pop(key, None)
        env.update({k: fill(v) for k, v in attack.env.items()})
        if attack.code:
            argv = [sys.executable, "-c", CODE_RUNNER, attack.code]
        else:
            argv = [sys.executable, "-m", "kvpure", *(fill(arg) for arg in attack.argv)]
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                input=attack.stdin,
                capture_output=True,
                timeout=timeout,
                cwd=ROOT if not attack.argv or "examples/" in " ".join(attack.argv) else d / "cwd",
                env=env,
                preexec_fn=_limit,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return "hang", f"killed after {timeout} s", time.monotonic() - started
        except ValueError as err:  # a NUL in an argument: the OS cannot even be asked
            return "ok", f"not runnable: {err}", 0.0
        seconds = time.monotonic() - started
        out = done.stdout.decode("utf-8", "replace")
        err = done.stderr.decode("utf-8", "replace")
        lines = [line for line in err.splitlines() if line.strip()]
        outcome = _judge(attack, done.returncode, out, err, lines)
        wrote = (_tree(d) - before) - {str(Path(p)) for p in attack.outputs} | (
            set(os.listdir(ROOT)) - top_before
        )
        if outcome == "ok" and wrote:
            return "wrote", ", ".join(sorted(wrote))[:300], seconds
        if outcome == "ok" and len(done.stdout) > attack.max_stdout:
            return "output", f"{len(done.stdout)} bytes on stdout", seconds
        detail = lines[-1] if lines else (out.strip().splitlines() or [""])[-1]
        return outcome, f"exit {done.returncode}: {detail[:240]}", seconds


def _judge(attack: Attack, rc: int, out: str, err: str, lines: list[str]) -> str:
    if attack.code:
        if rc != 0:
            return "crash"
        said = (out.split() or ["crash"])[0]
        wanted = {
            "refused": ("typed",),
            "clean": ("typed", "accepted"),
            "works": ("accepted",),
            "survives": ("typed", "accepted", "untyped"),
        }
        return "ok" if said in wanted[attack.expect] else said
    if "Traceback" in err:
        return "traceback"
    if rc not in (0, 1, 2):
        return "crash"
    if rc == 0:
        return "ok" if attack.expect in ("clean", "works") else "accepted"
    if attack.expect == "works":
        return "refused"
    if rc == 1:
        return "crash"
    return "ok" if len(lines) == 1 else "lines"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only cases whose name holds this")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="leave out the heavy cases")
    parser.add_argument(
        "--set",
        choices=("all", "original", "wider", "tested"),
        default="all",
        help="the first 127 cases, the wider set, both (default), or the test suite's sample",
    )
    parser.add_argument("--slow", type=float, default=5.0, help="list cases slower than this")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    chosen = {"all": ATTACKS, "original": ORIGINAL, "wider": WIDER, "tested": TESTED}[args.set]
    cases = [a for a in chosen if args.k in a.name and not (args.quick and a.heavy)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = []
        runs = pool.map(lambda a: run_one(a, args.timeout), cases)
        for attack, result in zip(cases, runs, strict=True):
            results.append(result)
            if args.verbose or result[0] != "ok":
                outcome, detail, seconds = result
                print(f"{outcome:9} [{attack.item}] {seconds:5.1f} s {attack.name}  ->  {detail}")
                sys.stdout.flush()
    counts: dict[str, int] = {}
    per_item: dict[int, list[int]] = {}
    slow = []
    for attack, (outcome, _, seconds) in zip(cases, results, strict=True):
        if seconds > args.slow:
            slow.append(f"{seconds:5.1f} s  {attack.name}")
        counts[outcome] = counts.get(outcome, 0) + 1
        item = per_item.setdefault(attack.item, [0, 0])
        item[0] += outcome == "ok"
        item[1] += 1
    items = ", ".join(f"item {k}: {v[0]}/{v[1]}" for k, v in sorted(per_item.items()))
    print(f"attacks: {len(cases)} cases, {counts.get('ok', 0)} handled ({items})")
    if slow:
        print(f"over {args.slow} s: " + "; ".join(slow))
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    sys.exit(0 if counts.get("ok", 0) == len(cases) else 1)


if __name__ == "__main__":
    main()
