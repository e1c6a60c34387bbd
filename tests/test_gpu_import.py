"""Importing: kvpure_gpu without torch says what to install; the core never needs torch."""

from __future__ import annotations

import subprocess
import sys

import kvpure_gpu


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_import_without_torch_says_what_to_install() -> None:
    # ``sys.modules['torch'] = None`` makes ``import torch`` raise ImportError.
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "try:\n"
        "    import kvpure_gpu\n"
        "except ImportError as err:\n"
        "    print('IMPORTERROR:' + str(err))\n"
        "else:\n"
        "    print('IMPORTED')\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert out.startswith("IMPORTERROR:")
    assert "pip install" in out
    assert "kvpure[gpu]" in out


def test_block_table_core_does_not_import_torch() -> None:
    code = "import sys, kvpure.block_table; print('torch' in sys.modules)"
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_every_public_name_is_exported() -> None:
    assert kvpure_gpu.__all__
    for name in kvpure_gpu.__all__:
        assert hasattr(kvpure_gpu, name), name
