"""Reading a ``kvpure cache`` workload file, streamed: JSON lines of requests, a hash-id
trace, or ShareGPT.

The format is told by the content:

- a file whose text starts with ``[`` is a JSON array: ShareGPT entries
  (:mod:`kvpure.cache.sharegpt`), read one item at a time;
- a JSON-lines file whose first non-blank line is an object with
  ``conversations`` is ShareGPT one entry a line;
- one whose first line carries ``hash_ids`` is a hash-id trace (Mooncake,
  aiperf, InferenceX: :mod:`kvpure.cache.hash_trace`);
- anything else is one request a line (:mod:`kvpure.cache.workload_input`).

The file is read once, one line (or array item) at a time, and stops at the
first bad one with an error naming it; each line is at most 64 MiB
(:data:`kvpure.cache.json_stream.MAX_LINE_BYTES`), the file has no size
limit. Each request is written to a spool as it is parsed
(:mod:`kvpure.cache.workload_spool`), so memory does not grow with the file
and the runs stream it again.

Requests that give ``arrival_time`` (a trace: ``timestamp``) are admitted in
arrival order (a stable sort: ties keep file order); either every line gives
one or none does.
"""

from __future__ import annotations

import io
import itertools
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from kvpure.cache.hash_trace import DEFAULT_TRACE_BLOCK_SIZE, is_trace_line, parse_trace_line
from kvpure.cache.json_stream import ByteReader, json_array_items, json_lines, parse_json_value
from kvpure.cache.sharegpt import ShareGPTSampler, ShareGPTWorkload, is_sharegpt_entry
from kvpure.cache.workload_input import PromptEncoder, parse_request
from kvpure.cache.workload_server import WorkloadItem
from kvpure.cache.workload_spool import WorkloadSpool, WorkloadStream
from kvpure.errors import InvalidFieldError

__all__ = [
    "MAX_TRACE_BLOCK_SIZE",
    "WorkloadFile",
    "parse_workload",
    "read_workload",
    "read_workload_from",
]

MAX_TRACE_BLOCK_SIZE: Final = 1 << 20
"""Largest ``--trace-block-size``."""
_SNIFF = 1 << 16


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadFile:
    """The requests of a workload file, in admission order, and how they were read."""

    requests: WorkloadStream[WorkloadItem]
    """Streamed from the spool each time it is iterated."""
    format: str
    """``jsonl`` (one request a line), ``hash-ids`` (a hash-id trace), ``sharegpt`` (a
    JSON array) or ``sharegpt-jsonl``."""
    sharegpt: ShareGPTWorkload | None = None
    """The ShareGPT sampling's counts, for a ShareGPT file."""
    arrival_order: bool = False
    """Whether requests are admitted by their arrival times."""
    trace_block_size: int | None = None
    """Tokens per hash id, for a hash-id trace."""


class _Prefixed:
    """A byte stream with bytes already read put back in front."""

    def __init__(self, prefix: bytes, rest: ByteReader) -> None:
        self._head = io.BytesIO(prefix)
        self._rest = rest

    def read(self, size: int = -1, /) -> bytes:
        data = self._head.read(size)
        if size < 0 or len(data) < size:
            data += self._rest.read(-1 if size < 0 else size - len(data))
        return data

    def readline(self, size: int = -1, /) -> bytes:
        line = self._head.readline(size)
        if line.endswith(b"\n") or (size >= 0 and len(line) >= size):
            return line
        return line + self._rest.readline(-1 if size < 0 else size - len(line))


def _first_byte(handle: ByteReader) -> tuple[bytes, int]:
    """The bytes read to find the first non-whitespace byte, and that byte (-1: none).

    Each chunk is looked at once and the chunks are joined once: 100 MB of leading
    whitespace costs one pass, not a copy of everything read per chunk."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = handle.read(_SNIFF)
        if not chunk:
            return b"".join(chunks), -1
        chunks.append(chunk)
        if size < 3:  # a byte-order mark can only open the file
            start = b"".join(chunks)
            body = start[3:] if start.startswith(b"\xef\xbb\xbf") else start
        else:
            body = chunk
        size += len(chunk)
        stripped = body.lstrip(b" \t\r\n")
        if stripped:
            return b"".join(chunks), stripped[0]


class _Arrivals:
    """Every request gives an arrival time or none does."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.timed = 0
        self.untimed_first = ""
        self.count = 0

    def check(self, arrival: float | None, source: str) -> None:
        self.count += 1
        if arrival is None:
            if not self.untimed_first:
                self.untimed_first = source
        else:
            self.timed += 1
        if self.timed and self.untimed_first:
            raise InvalidFieldError(
                field=f"{self.untimed_first}.{self.key}",
                value=None,
                reason=f"is missing: give {self.key} on every line or on none",
            )


def _no_requests(path: str, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=path, value="", reason=reason)


def _sharegpt(
    path: str,
    fmt: str,
    entries: Iterator[tuple[str, object]],
    encoder: PromptEncoder | None,
    spool: WorkloadSpool[WorkloadItem],
) -> WorkloadFile:
    sampler = ShareGPTSampler(encoder)
    any_entry = False
    for where, entry in entries:
        any_entry = any_entry or is_sharegpt_entry(entry)
        request = sampler.take(where, entry)
        if request is not None:
            spool.add(request)
    counts = sampler.counts()
    if not any_entry:
        raise InvalidFieldError(
            field=path,
            value="a JSON array",
            reason='holds no ShareGPT entry ({"conversations": [...]}); give one '
            "request a line (JSON lines) or a ShareGPT array",
        )
    if not counts.requests:
        raise _no_requests(
            path,
            f"holds no ShareGPT conversation vLLM's benchmark would send ({counts.entries} "
            f"entries: {counts.skipped_short_conversations} with fewer than 2 turns, "
            f"{counts.skipped_by_length} outside its length filter)",
        )
    return WorkloadFile(requests=spool.finish(), format=fmt, sharegpt=counts)


def _array_of_objects(handle: ByteReader, path: str) -> Iterator[tuple[str, object]]:
    """The items of a ShareGPT array; an array whose first item is no object is read as a
    JSON-lines file whose first line is not a request would be."""
    items = json_array_items(handle, path)
    for where, item in items:
        if not isinstance(item, dict):
            raise InvalidFieldError(
                field=f"{path} line 1", value=type(item).__name__, reason="must be a JSON object"
            )
        yield where, item
        yield from items
        return


def _parsed_lines(handle: ByteReader, path: str) -> Iterator[tuple[str, object]]:
    for where, text in json_lines(handle, path):
        yield where, parse_json_value(text, where)


def _requests(
    fmt: str,
    lines: Iterator[tuple[str, object]],
    encoder: PromptEncoder | None,
    trace_block_size: int,
    spool: WorkloadSpool[WorkloadItem],
) -> WorkloadFile:
    arrivals = _Arrivals("timestamp" if fmt == "hash-ids" else "arrival_time")
    for where, data in lines:
        item: WorkloadItem
        if fmt == "hash-ids":
            item = parse_trace_line(data, where, trace_block_size, spool.count)
        else:
            item = parse_request(data, where, encoder)
        arrivals.check(item.arrival_time, where)
        spool.add(item, item.arrival_time)
    return WorkloadFile(
        requests=spool.finish(),
        format=fmt,
        arrival_order=arrivals.timed > 0,
        trace_block_size=trace_block_size if fmt == "hash-ids" else None,
    )


def read_workload_from(
    path: str, handle: ByteReader, encoder: PromptEncoder | None, trace_block_size: int
) -> WorkloadFile:
    """The workload read from ``handle`` (named ``path``), one line or item at a time."""
    if not 1 <= trace_block_size <= MAX_TRACE_BLOCK_SIZE:
        raise InvalidFieldError(
            field="--trace-block-size",
            value=trace_block_size,
            reason=f"must be an int in [1, {MAX_TRACE_BLOCK_SIZE}]",
        )
    seen, first = _first_byte(handle)
    if first < 0:
        raise _no_requests(path, "holds no requests (one JSON a line)")
    stream = _Prefixed(seen, handle)
    spool: WorkloadSpool[WorkloadItem] = WorkloadSpool()
    try:
        if first == ord("["):
            return _sharegpt(path, "sharegpt", _array_of_objects(stream, path), encoder, spool)
        lines = _parsed_lines(stream, path)
        head = next(lines)
        rest = itertools.chain([head], lines)
        if is_sharegpt_entry(head[1]):
            return _sharegpt(path, "sharegpt-jsonl", rest, encoder, spool)
        fmt = "hash-ids" if is_trace_line(head[1]) else "jsonl"
        return _requests(fmt, rest, encoder, trace_block_size, spool)
    except BaseException:
        spool.discard()
        raise


def parse_workload(
    path: str,
    text: str,
    encoder: PromptEncoder | None = None,
    *,
    trace_block_size: int = DEFAULT_TRACE_BLOCK_SIZE,
) -> WorkloadFile:
    """The workload in ``text`` (read from ``path``); errors name the line or entry and field.

    ``encoder`` (a :class:`kvpure.text.LocalTokenizer`) encodes text prompts.
    """
    return read_workload_from(path, io.BytesIO(text.encode("utf-8")), encoder, trace_block_size)


def _open_regular(path: str) -> BinaryIO:
    """``path`` opened for reading; a folder, FIFO or device is refused before it is opened
    (opening a FIFO would wait for a writer)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise InvalidFieldError(
            field=path, value=kind, reason="must be a workload file (or - for standard input)"
        )
    return Path(path).open("rb")


def read_workload(
    path: str,
    encoder: PromptEncoder | None,
    *,
    trace_block_size: int = DEFAULT_TRACE_BLOCK_SIZE,
) -> WorkloadFile:
    """The workload at ``path`` (``-``: standard input), UTF-8, streamed."""
    if path == "-":
        return read_workload_from(path, sys.stdin.buffer, encoder, trace_block_size)
    with _open_regular(path) as handle:
        return read_workload_from(path, handle, encoder, trace_block_size)
