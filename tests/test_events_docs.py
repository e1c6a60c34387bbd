"""The Python blocks of docs/events.md run in order, as one script."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_docs_examples_run() -> None:
    blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    namespace: dict[str, object] = {"__name__": "events_docs"}
    for index, code in enumerate(blocks):
        exec(compile(code, f"docs/events.md[python block {index}]", "exec"), namespace)
