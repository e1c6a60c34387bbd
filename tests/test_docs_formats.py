"""The docs are tested (issue 23): each format's example runs, each path named exists.

- every ``kvpure`` line of a ``shell`` block in docs/formats.md runs through the
  command line in process and exits 0;
- every repository path the README and docs/ name (``examples/...``,
  ``docs/...``, ``src/...``, ``tests/...``, ``bench/...``, ``tools/...``) exists;
- the eviction workload shows eviction and a rising curve;
- ``make demo`` installs kvpure without extras (no torch) and says how to run it.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from kvpure.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"```shell\n(.*?)```", re.DOTALL)
_PATH = re.compile(r"(?<![\w/.-])((?:examples|docs|src|tests|bench|tools)/[\w./-]*[\w/])")


def shell_lines(path: Path) -> list[str]:
    lines: list[str] = []
    for block in _FENCE.findall(path.read_text(encoding="utf-8")):
        lines += [line for line in block.splitlines() if line.startswith("kvpure ")]
    return lines


FORMAT_LINES = shell_lines(ROOT / "docs" / "formats.md")


def run(line: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(shlex.split(line)[1:])
    return code, out.getvalue(), err.getvalue()


def test_formats_page_has_an_example_per_format() -> None:
    commands = {shlex.split(line)[1] for line in FORMAT_LINES}
    assert commands >= {"plan", "hash", "cache", "cache-replay", "events"}


@pytest.mark.parametrize("line", FORMAT_LINES)
def test_each_format_example_runs(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code, out, err = run(line)
    assert code == 0, err
    assert out


def named_paths() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for doc in DOCS:
        for match in _PATH.findall(doc.read_text(encoding="utf-8")):
            found.append((doc.name, match.rstrip(".")))
    return sorted(set(found))


@pytest.mark.parametrize(("doc", "path"), named_paths())
def test_every_path_the_docs_name_exists(doc: str, path: str) -> None:
    # A glob or a placeholder names a folder that exists.
    concrete = path.split("*")[0].split("<")[0]
    assert (ROOT / concrete).exists() or (ROOT / concrete).parent.is_dir(), f"{doc}: {path}"
    if "*" not in path and "<" not in path:
        assert (ROOT / path).exists(), f"{doc} names {path}, which does not exist"


def test_the_eviction_workload_shows_eviction_and_a_curve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    (line,) = [line for line in FORMAT_LINES if "eviction_workload" in line]
    code, out, _ = run(line + " --json")
    assert code == 0
    rows = json.loads(out)["sweep_memory"]
    rates = [row["actual"]["hit_rate"] for row in rows]
    assert len(rates) == 4
    assert rates == sorted(rates)
    assert rates[0] < rates[-1]
    assert any(row["hits_lost_to_eviction"] > 0 for row in rows)


def test_make_demo_installs_no_extras_and_prints_how_to_run() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo_stamp = makefile.split("$(DEMO_STAMP): ")[1].split("\n\n")[0]
    assert "$(PIP) -e .\n" in demo_stamp + "\n"
    assert "[" not in demo_stamp.split("$(PIP)")[1]  # no extras: no torch
    demo = makefile.split("\ndemo: ")[1].split("\n\n")[0]
    assert "$(STAMP)" not in demo.replace("$(EXT_STAMP)", "")
    assert ". $(VENV)/bin/activate" in demo
    assert "$(VENV)/bin/kvpure" in demo
    test_stamp = makefile.split("\n$(STAMP): ")[1].split("\n\n")[0]
    assert "'.[dev,gpu]'" in test_stamp


def test_readme_numbers_are_the_codes() -> None:
    import kvpure
    from kvpure import errors

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # "the public face (N names ...)"
    names = re.search(r"the public face \((\d+) names", readme)
    assert names is not None
    assert int(names.group(1)) == len(kvpure.__all__)
    # "its four stdlib-flavoured bases": KVPureError's direct subclasses in kvpure.errors
    bases = [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type) and cls.__bases__[:1] == (errors.KVPureError,)
    ]
    assert "its four stdlib-flavoured bases" in readme
    assert len(bases) == 4


def test_readme_eviction_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    (line,) = [line for line in FORMAT_LINES if "eviction_workload" in line]
    code, out, _ = run(line + " --json")
    assert code == 0
    first = json.loads(out)["sweep_memory"][0]
    assert first["memory"] == "160MiB"
    lost, unbounded = first["hits_lost_to_eviction"], first["unbounded"]["prefix_cache_hits"]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"at 160 MiB, {lost:,} of the {unbounded:,} prompt tokens" in readme
    rates = [row["actual"]["hit_rate"] for row in json.loads(out)["sweep_memory"]]
    assert rates[-1] == first["unbounded"]["hit_rate"]  # 1 GiB: the unbounded rate
