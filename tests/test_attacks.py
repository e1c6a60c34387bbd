"""Issue 24's hostile inputs (items 1-5 and 7), each in its own limited process.

``tools/attacks.py`` builds every case in a fresh folder and runs ``kvpure``
(or Python code) in a child limited to 3 GiB of address space, its working
folder, HOME and TMPDIR inside the case folder: FIFOs and devices as every
input and output path, Hugging Face ids, revisions, refs and symlinks that
would leave the cache, hostile chat templates and tokenizer folders,
``events listen`` options, 10**12-block pools, safetensors headers past their
bounds, lone surrogates under CBOR hashing, NUL and escaping shard names.
Every case must end in a typed refusal (exit 2, one line on stderr, no
traceback) or, for the controls, succeed; and nothing may be written outside
the paths the case names. The per-case time limit here only detects a hang
on a loaded machine (it is not a timing assertion); the tool's own default
is the issue's 10 s. The heavy cases (48 and 64 MiB lines, a 300,000-tensor
header, a 200,000-block replay) run with ``tools/attacks.py`` alone.

Of the wider set (``tools/attack_cases_{paths,inputs,data}.py``: every file slot as a
socket, folder or device link, hub ids and refs, templates, tokenizer.json variants,
listen options, the C hasher under finalizers, headers, indexes, workloads and sizes),
the test runs a sample (``--set tested``: each fix and each kind of input); the tool
runs all of it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_attack_is_handled() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "attacks.py"),
            "--quick",
            "--set",
            "tested",
            "--timeout",
            "300",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    summary = re.search(r"attacks: (\d+) cases, (\d+) handled", done.stdout)
    assert summary is not None, done.stdout[-2000:] + done.stderr[-2000:]
    cases, handled = map(int, summary.groups())
    assert cases >= 160
    assert handled == cases, done.stdout[-4000:]
    assert done.returncode == 0
