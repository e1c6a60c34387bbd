"""JSON values read one at a time from a byte stream: JSON lines, or the items of a JSON array.

- :func:`json_lines` splits on ``\\n`` only (a ``\\r`` before it is JSON
  whitespace), so U+2028, U+2029 and U+0085, legal inside JSON strings, stay
  inside their line; blank lines are skipped (a long run of them a chunk at a
  time). Each line is at most
  :data:`MAX_LINE_BYTES` bytes, decoded as UTF-8 on its own (a byte-order mark
  is allowed on the first).
- :func:`json_array_items` yields the items of one top-level JSON array (a
  ShareGPT file, possibly a single 640 MiB line) as they are read; one item
  is at most :data:`MAX_LINE_BYTES` characters.

Either stops at the first bad line or item with a typed error naming it, having
read no further than it (and, for an array, at most one item's bound beyond).
Values are parsed with the bounds of :mod:`kvpure.cli.input_files` (nesting,
integer digits).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Final, Protocol, runtime_checkable

from kvpure.errors import InvalidFieldError
from kvpure.json_bounds import check_bounds, int_hook_needed, too_many_digits

__all__ = ["MAX_LINE_BYTES", "ByteReader", "json_array_items", "json_lines", "parse_json_value"]

MAX_LINE_BYTES: Final = 64 * 2**20
"""Longest line (or array item) read: 64 MiB, about nine million token ids."""
MAX_JSON_DEPTH: Final = 64
MAX_INT_DIGITS: Final = 40
_CHUNK = 1 << 20
_WHITESPACE = " \t\r\n"
_WHITESPACE_BYTES = b" \t\r\n"
_NOT_WHITESPACE = re.compile(r"[^ \t\r\n]")
_BLANK_RUN = 64
"""Blank lines in a row after which the rest of a blank run is skipped a chunk at a time."""


@runtime_checkable
class ByteReader(Protocol):
    """What the readers read: a binary file, standard input's buffer, ``io.BytesIO``."""

    def read(self, size: int = -1, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


def _big_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


_HOOKED_DECODER = json.JSONDecoder(parse_int=_big_int)
_C_DECODER = json.JSONDecoder()


def _too_deep(where: str) -> InvalidFieldError:
    return InvalidFieldError(
        field=where, value="nesting", reason=f"nests deeper than {MAX_JSON_DEPTH} levels"
    )


def _check_depth(data: object, where: str) -> None:
    wrong = check_bounds(data, max_depth=MAX_JSON_DEPTH, max_int_digits=MAX_INT_DIGITS)
    if wrong == "nesting":
        raise _too_deep(where)
    if wrong is not None:
        raise InvalidFieldError(field=where, value="a number", reason=wrong)


def _decode_at(text: str, pos: int, where: str) -> tuple[object, int]:
    decoder = _HOOKED_DECODER if int_hook_needed() else _C_DECODER
    try:
        value, end = decoder.raw_decode(text, pos)
    except RecursionError:
        raise _too_deep(where) from None
    except ValueError as err:
        if isinstance(err, json.JSONDecodeError):
            raise
        reason = (
            f"an integer of over 4300 digits (at most {MAX_INT_DIGITS})"
            if too_many_digits(err)
            else str(err)
        )
        raise InvalidFieldError(field=where, value="a number", reason=reason) from None
    _check_depth(value, where)
    return value, end


def _invalid(where: str, err: json.JSONDecodeError) -> InvalidFieldError:
    return InvalidFieldError(
        field=where, value=f"column {err.colno}", reason=f"invalid JSON: {err.msg}"
    )


def parse_json_value(text: str, where: str) -> object:
    """The one JSON value in ``text`` (a line), with the bounds above."""
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _decode_at(text, start, where)
    except json.JSONDecodeError as err:
        raise _invalid(where, err) from None
    if text[end:].strip(_WHITESPACE):
        raise InvalidFieldError(
            field=where, value=f"column {end + 1}", reason="invalid JSON: Extra data"
        )
    return value


class _BlankSkipper:
    """A byte stream read a line at a time that can also skip a run of blank lines a chunk
    at a time (a file of 100 MB of newlines is 100 chunks, not 10**8 lines)."""

    def __init__(self, handle: ByteReader) -> None:
        self.handle = handle
        self.head = b""
        """Bytes read ahead of the stream, returned first."""

    def readline(self, size: int) -> bytes:
        if not self.head:
            return self.handle.readline(size)
        end = self.head.find(b"\n", 0, size) + 1 or min(len(self.head), size)
        line, self.head = self.head[:end], self.head[end:]
        if line.endswith(b"\n") or len(line) >= size:
            return line
        return line + self.handle.readline(size - len(line))

    def skip_blank_lines(self) -> int:
        """Read past the blank lines ahead; the number of newlines passed. The first line
        holding anything else (its leading whitespace included) is read next."""
        passed = 0
        carry = b""  # whitespace after the last newline: the start of the next line
        while True:
            more = self.head or self.handle.read(_CHUNK)
            self.head = b""
            if not more:
                self.head = carry
                return passed
            chunk = carry + more
            start = len(chunk) - len(chunk.lstrip(_WHITESPACE_BYTES))
            cut = chunk.rfind(b"\n", 0, start) + 1
            passed += chunk.count(b"\n", 0, cut)
            if start < len(chunk):
                self.head = chunk[cut:]
                return passed
            carry = chunk[cut:]


def json_lines(
    handle: ByteReader, path: str, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[str, str]]:
    """``(where, text)`` of each non-blank line (``where`` is ``"PATH line N"``)."""
    reader = _BlankSkipper(handle)
    number = 0
    blank = 0
    while True:
        raw = reader.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise InvalidFieldError(
                field=f"{path} line {number}",
                value=f"over {limit} bytes",
                reason="is too long: a line holds one request (at most 64 MiB)",
            )
        if not raw.strip(_WHITESPACE_BYTES):
            blank += 1
            if blank >= _BLANK_RUN:
                number += reader.skip_blank_lines()
                blank = 0
            continue
        blank = 0
        where = f"{path} line {number}"
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as err:
            raise InvalidFieldError(
                field=where, value=f"byte {err.start}", reason="is not UTF-8 text"
            ) from None
        if text.strip(_WHITESPACE):
            yield where, text


class _ArrayReader:
    """Text of a byte stream, decoded incrementally, kept from the current item on."""

    def __init__(self, handle: ByteReader, path: str, limit: int) -> None:
        self.handle = handle
        self.path = path
        self.limit = limit
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.text = ""
        self.pos = 0
        self.eof = False
        self.offset = 0
        """Characters dropped before ``text``."""

    def more(self, at_least: int = _CHUNK) -> bool:
        """Read more text; False at the end of the stream."""
        if self.eof:
            return False
        chunk = self.handle.read(max(at_least, _CHUNK))
        try:
            decoded = self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as err:
            raise InvalidFieldError(
                field=self.path,
                value=f"near character {self.offset + len(self.text)}",
                reason=f"is not UTF-8 text ({err.reason})",
            ) from None
        self.offset += self.pos
        self.text = self.text[self.pos :] + decoded
        self.pos = 0
        if not chunk:
            self.eof = True
        return bool(chunk) or bool(decoded)

    def skip_space(self) -> str:
        """The next non-whitespace character ('' at the end), found in C."""
        while True:
            text = self.text
            found = _NOT_WHITESPACE.search(text, self.pos)
            if found is not None:
                self.pos = found.start()
                return text[self.pos]
            self.pos = len(text)
            if not self.more():
                return ""

    def _too_long(self, where: str) -> InvalidFieldError:
        return InvalidFieldError(
            field=where,
            value=f"over {self.limit} characters",
            reason="is too long: an item holds one entry (at most 64 MiB)",
        )

    def value(self, where: str) -> object:
        """The JSON value at the current position."""
        while True:
            try:
                value, end = _decode_at(self.text, self.pos, where)
            except json.JSONDecodeError as err:
                pending = len(self.text) - self.pos
                maybe_cut = "Unterminated string" in err.msg or err.pos >= len(self.text) - 8
                if maybe_cut and pending <= self.limit and self.more(pending):
                    continue
                if pending > self.limit:
                    raise self._too_long(where) from None
                raise _invalid(where, err) from None
            if end >= len(self.text) and not self.eof and self.more():
                continue  # a number or literal may go on in the next chunk
            if end - self.pos > self.limit:
                raise self._too_long(where)
            self.pos = end
            return value


def json_array_items(
    handle: ByteReader, path: str, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[str, object]]:
    """``(where, value)`` of each item of the top-level array (``where`` is ``"PATH[i]"``).

    The stream must hold one array and nothing after it but whitespace.
    """
    reader = _ArrayReader(handle, path, limit)
    if reader.skip_space() != "[":
        raise InvalidFieldError(field=path, value="", reason="must start with '['")
    reader.pos += 1
    index = 0
    if reader.skip_space() == "]":
        reader.pos += 1
    else:
        while True:
            reader.skip_space()
            yield f"{path}[{index}]", reader.value(f"{path}[{index}]")
            index += 1
            mark = reader.skip_space()
            reader.pos += 1
            if mark == "]":
                break
            if mark != ",":
                raise InvalidFieldError(
                    field=f"{path}[{index}]",
                    value=repr(mark) if mark else "the end of the file",
                    reason="invalid JSON: expected ',' or ']' after an array item",
                )
    if reader.skip_space():
        raise InvalidFieldError(
            field=path, value="text after the array", reason="must hold one JSON array"
        )
