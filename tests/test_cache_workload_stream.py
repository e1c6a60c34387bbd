"""Workload files are streamed: line by line, bounded per line, not held in memory.

The claims:
- the first bad line is reported having read no further than it;
- lines split on ``\\n`` only: U+2028, U+2029 and U+0085 stay inside strings;
- a line longer than the per-line limit is refused (the file has no limit);
- reading a workload does not hold its requests: the peak traced memory of
  reading 2,000 prompts of 1,000 tokens is far below what holding them takes;
- a FIFO is refused before it is opened (no hang), a folder too;
- a ShareGPT array is read item by item, a one-line array too.
"""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from pathlib import Path

import pytest

from kvpure.cache.json_stream import json_array_items, json_lines
from kvpure.cache.workload_input import WorkloadRequest
from kvpure.cli.workload_files import parse_workload, read_workload, read_workload_from
from kvpure.errors import InvalidFieldError


class _Counting(io.BytesIO):
    """A byte stream that counts what was read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self.taken += len(data)
        return data

    def readline(self, size: int | None = -1, /) -> bytes:
        data = super().readline(size)
        self.taken += len(data)
        return data


def test_the_first_bad_line_is_reported_without_reading_the_rest() -> None:
    good = json.dumps({"prompt_token_ids": list(range(1, 100))}) + "\n"
    rest = good * 20_000  # about 8 MB after the bad line
    data = (good + '{"prompt_token_ids": [1, -2]}\n' + rest).encode()
    stream = _Counting(data)
    with pytest.raises(InvalidFieldError, match=r"w\.jsonl line 2\.prompt_token_ids\[1\]"):
        read_workload_from("w.jsonl", stream, None, 512)
    assert stream.taken < 200_000 < len(data)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c"])
def test_lines_split_on_newline_only(separator: str) -> None:
    salt = f"a{separator}b"
    text = json.dumps({"prompt_token_ids": [1, 2, 3], "cache_salt": salt}, ensure_ascii=False)
    workload = parse_workload("w.jsonl", text + "\r\n" + text + "\n")
    requests = list(workload.requests)
    assert len(requests) == 2
    first = requests[0]
    assert isinstance(first, WorkloadRequest)
    assert first.cache_salt == salt


def test_a_line_over_the_limit_is_refused_and_one_at_it_is_read() -> None:
    line = b'{"prompt_token_ids": [1]}'  # 25 bytes
    assert [w for w, _ in json_lines(io.BytesIO(line + b"\n"), "w", limit=26)] == ["w line 1"]
    assert [w for w, _ in json_lines(io.BytesIO(line), "w", limit=25)] == ["w line 1"]
    with pytest.raises(InvalidFieldError, match="w line 2: is too long"):
        list(json_lines(io.BytesIO(b"\n" + line + b"\n"), "w", limit=24))


def test_reading_does_not_hold_the_workload(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(2_000):
            out.write(json.dumps({"prompt_token_ids": [i * 1000 + k for k in range(1000)]}) + "\n")
    tracemalloc.start()
    try:
        workload = read_workload(str(path), None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # two million token ids held as ints take over 60 MB; a line at a time, well under 4 MB
    assert peak < 4 * 2**20
    assert len(workload.requests) == 2_000
    last = list(workload.requests)[-1]
    assert isinstance(last, WorkloadRequest)
    assert last.prompt_token_ids[0] == 1_999_000


def test_a_fifo_and_a_folder_are_refused_before_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidFieldError, match="not a regular file"):
        read_workload(str(fifo), None)
    with pytest.raises(InvalidFieldError, match="a folder"):
        read_workload(str(tmp_path), None)


def test_array_items_are_read_one_at_a_time_across_chunks() -> None:
    items = [{"conversations": [], "id": "x" * 3000, "n": 12345678901234} for _ in range(1000)]
    data = json.dumps(items).encode()  # one 3 MB line, read in 1 MiB chunks
    got = list(json_array_items(io.BytesIO(data), "a.json"))
    assert [w for w, _ in got[:2]] == ["a.json[0]", "a.json[1]"]
    assert [v for _, v in got] == items
    assert list(json_array_items(io.BytesIO(b" [ ] "), "a.json")) == []
    with pytest.raises(InvalidFieldError, match="must hold one JSON array"):
        list(json_array_items(io.BytesIO(b"[1] [2]"), "a.json"))
    with pytest.raises(InvalidFieldError, match=r"a\.json\[1\]: invalid JSON: expected"):
        list(json_array_items(io.BytesIO(b"[1 2]"), "a.json"))
    with pytest.raises(InvalidFieldError, match="is too long"):
        list(json_array_items(io.BytesIO(b'["' + b"x" * 100 + b'"]'), "a.json", limit=50))
