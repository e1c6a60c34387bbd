"""Reading a ``kvpure cache`` workload file: JSON lines of requests, or ShareGPT.

The format is told by the content:

- a file whose text starts with ``[`` and parses as a JSON array holding an
  object with ``conversations`` is a ShareGPT dataset
  (:mod:`kvpure.cache.sharegpt`);
- a JSON-lines file whose first non-blank line is an object with
  ``conversations`` is ShareGPT one entry a line;
- anything else is one request a line (:mod:`kvpure.cache.workload_input`).

Requests of a JSON-lines workload that give ``arrival_time`` are admitted in
arrival order (a stable sort: ties keep file order); either every line gives
one or none does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.cache.sharegpt import ShareGPTWorkload, is_sharegpt_entry, sharegpt_requests
from kvpure.cache.workload_input import PromptEncoder, WorkloadRequest, parse_request
from kvpure.cli.input_files import parse_json_text, read_input_bytes
from kvpure.errors import InvalidFieldError

__all__ = ["MAX_WORKLOAD_BYTES", "WorkloadFile", "parse_workload", "read_workload"]

MAX_WORKLOAD_BYTES: Final = 1024 * 2**20
"""Largest workload file read (ShareGPT_V3_unfiltered_cleaned_split.json is about 640 MiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadFile:
    """The requests of a workload file, in admission order, and how they were read."""

    requests: tuple[WorkloadRequest, ...]
    format: str
    """``jsonl`` (one request a line), ``sharegpt`` (a JSON array) or ``sharegpt-jsonl``."""
    sharegpt: ShareGPTWorkload | None = None
    """The ShareGPT sampling's counts, for a ShareGPT file."""


def _no_requests(path: str, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=path, value="", reason=reason)


def _in_arrival_order(requests: list[WorkloadRequest]) -> tuple[WorkloadRequest, ...]:
    timed = [r for r in requests if r.arrival_time is not None]
    if not timed:
        return tuple(requests)
    if len(timed) != len(requests):
        missing = next(r for r in requests if r.arrival_time is None)
        raise InvalidFieldError(
            field=f"{missing.source}.arrival_time",
            value=None,
            reason="is missing: give arrival_time on every line or on none",
        )
    return tuple(sorted(requests, key=lambda r: r.arrival_time or 0.0))


def _sharegpt(
    path: str, fmt: str, entries: list[tuple[str, object]], encoder: PromptEncoder | None
) -> WorkloadFile:
    sampled = sharegpt_requests(entries, encoder)
    if not sampled.requests:
        raise _no_requests(
            path,
            f"holds no ShareGPT conversation vLLM's benchmark would send ({sampled.entries} "
            f"entries: {sampled.skipped_short_conversations} with fewer than 2 turns, "
            f"{sampled.skipped_by_length} outside its length filter)",
        )
    return WorkloadFile(requests=sampled.requests, format=fmt, sharegpt=sampled)


def _whole_array(path: str, text: str) -> object:
    """``text`` as one JSON value, or None when it is JSON lines (its first line parses)."""
    try:
        return parse_json_text(path, text)
    except InvalidFieldError as whole_error:
        first = next(line for line in text.splitlines() if line.strip())
        try:
            parse_json_text(path, first)
        except InvalidFieldError:
            raise whole_error from None  # a JSON array spread over lines, and broken
        return None


def parse_workload(path: str, text: str, encoder: PromptEncoder | None = None) -> WorkloadFile:
    """The workload in ``text`` (read from ``path``); errors name the line or entry and field.

    ``encoder`` (a :class:`kvpure.text.LocalTokenizer`) encodes text prompts.
    """
    if text.lstrip().startswith("["):
        whole = _whole_array(path, text)
        if isinstance(whole, list) and any(is_sharegpt_entry(e) for e in whole):
            entries = [(f"{path}[{i}]", entry) for i, entry in enumerate(whole)]
            return _sharegpt(path, "sharegpt", entries, encoder)
        if isinstance(whole, list) and any(isinstance(e, dict) for e in whole):
            raise InvalidFieldError(
                field=path,
                value="a JSON array",
                reason='holds no ShareGPT entry ({"conversations": [...]}); give one '
                "request a line (JSON lines) or a ShareGPT array",
            )
    lines = [
        (f"{path} line {number}", line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not lines:
        raise _no_requests(path, "holds no requests (one JSON a line)")
    parsed = [(where, parse_json_text(where, line)) for where, line in lines]
    if is_sharegpt_entry(parsed[0][1]):
        return _sharegpt(path, "sharegpt-jsonl", parsed, encoder)
    requests = [parse_request(data, where, encoder) for where, data in parsed]
    return WorkloadFile(requests=_in_arrival_order(requests), format="jsonl")


def read_workload(path: str, encoder: PromptEncoder | None) -> WorkloadFile:
    """The workload at ``path`` (``-``: standard input), UTF-8, at most 1 GiB."""
    data = read_input_bytes(path, MAX_WORKLOAD_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidFieldError(
            field=path, value=f"byte {err.start}", reason="is not UTF-8 text"
        ) from None
    return parse_workload(path, text, encoder)
