"""Run API calls in a fresh interpreter without the suite's beartype hook (a user's
process) and report, per call, whether it raised a kvpure error and which message.

Shared by ``tests/test_api_audit_hashing.py`` and ``tests/test_api_audit_surface.py``:
each case is ``(source, field)``; the call must raise an error deriving from
:class:`kvpure.errors.KVPureError` whose message names ``field``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_RUNNER = """
import json, sys
from kvpure.errors import KVPureError
cases = json.loads(sys.stdin.read())
namespace = {}
exec(sys.argv[1], namespace)
results = []
for case in cases:
    try:
        value = eval(case, dict(namespace)) if not case.startswith("exec:") else exec(
            case[5:], dict(namespace)
        )
    except KVPureError as err:
        results.append(["typed", type(err).__name__, str(err)])
    except BaseException as err:
        results.append(["untyped", f"{type(err).__module__}.{type(err).__name__}", str(err)])
    else:
        results.append(["accepted", type(value).__name__, repr(value)[:200]])
print(json.dumps(results))
"""


def run_cases(setup: str, sources: list[str]) -> dict[str, tuple[str, str, str]]:
    """``source -> (outcome, error type or value type, message or value repr)``."""
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, setup],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout)
    return {
        source: (outcome, kind, text)
        for source, (outcome, kind, text) in zip(sources, outcomes, strict=True)
    }
