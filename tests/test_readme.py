"""Every ``python`` code block of README.md and docs/*.md runs as written and
type-checks under ``mypy --strict``. The blocks of one page run in order in one
namespace, as a reader would paste them into one session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api as mypy_api

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        for index, code in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8"))):
            found.append((page.relative_to(ROOT).as_posix(), index, code))
    return found


def test_readme_has_examples() -> None:
    assert any(page == "README.md" for page, _, _ in _blocks())


@pytest.mark.parametrize("page", sorted({page for page, _, _ in _blocks()}))
def test_page_examples_run(page: str) -> None:
    namespace: dict[str, object] = {"__name__": "example"}
    for name, index, code in _blocks():
        if name == page:
            exec(compile(code, f"{page}[python block {index}]", "exec"), namespace)


def test_examples_type_check_strictly(tmp_path: Path) -> None:
    pages: dict[str, str] = {}
    for page, index, code in _blocks():
        pages[page] = pages.get(page, "") + f"# block {index}\n" + code
    for page, code in pages.items():
        stem = re.sub(r"\W", "_", page.removesuffix(".md"))
        (tmp_path / f"example_{stem}.py").write_text(code, encoding="utf-8")
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--no-incremental",
            str(tmp_path),
        ]
    )
    assert status == 0, out + err
