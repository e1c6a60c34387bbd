"""Every ``python`` code block of README.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_examples() -> None:
    assert len(_blocks()) >= 1


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_example_runs(index: int) -> None:
    code = _blocks()[index]
    namespace: dict[str, object] = {"__name__": f"readme_example_{index}"}
    exec(compile(code, f"README.md[python block {index}]", "exec"), namespace)
