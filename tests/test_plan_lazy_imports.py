"""``kvpure plan CONFIG --kv-cache-memory X`` imports no part of the memory estimate.

With the KV cache memory given, no memory is estimated: the start-up memory
profile (``kvpure.memory_profile``), its wiring (``kvpure.serve.memory``,
``kvpure.serve.gpu_totals``), the memory sweep and the weights' fixes stay
unimported, as does the planning-case reader (``kvpure.interop``). Without
``--kv-cache-memory`` the same command does import the estimate, which shows
that the check sees it. Each case runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: Module prefixes that only the memory estimate (or a planning case) needs.
ESTIMATE_ONLY = (
    "kvpure.memory_profile",
    "kvpure.serve.memory",
    "kvpure.serve.gpu_totals",
    "kvpure.cli.plan_memory_sweep",
    "kvpure.cli.plan_weights",
    "kvpure.interop",
)

_MODULES_AFTER = """
import contextlib, io, json, sys
from kvpure.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    code = main({argv!r})
prefixes = {prefixes!r}
loaded = sorted(
    m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in prefixes)
)
print(json.dumps({{"code": code, "loaded": loaded, "printed": len(out.getvalue())}}))
"""


def _loaded_after(argv: list[str]) -> dict[str, object]:
    code = _MODULES_AFTER.format(argv=argv, prefixes=ESTIMATE_ONLY)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--json"],
        ["--max-model-len", "auto", "--vllm", "0.26"],
        ["--sweep", "max_model_len=4096,8192"],
    ],
)
def test_plan_with_the_memory_given_imports_no_estimate(extra: list[str]) -> None:
    argv = ["plan", str(EXAMPLES / "llama3_8b.json"), "--kv-cache-memory", "24GiB", *extra]
    result = _loaded_after(argv)
    assert result["code"] == 0
    printed = result["printed"]
    assert isinstance(printed, int)
    assert printed > 0
    assert result["loaded"] == []


def test_plan_without_the_memory_imports_the_estimate() -> None:
    argv = ["plan", str(EXAMPLES / "llama3_8b.json"), "--gpu", "H100-80GB"]
    result = _loaded_after(argv)
    assert result["code"] == 0
    loaded = result["loaded"]
    assert isinstance(loaded, list)
    assert "kvpure.serve.memory" in loaded
    assert "kvpure.memory_profile.budget" in loaded
