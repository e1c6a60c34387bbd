"""Reading the command line's input files: a path or ``-`` for standard input.

Every file is read as UTF-8 (a byte-order mark is allowed and dropped) and
parsed as JSON with stated bounds, so that any input ends in kvpure's one-line
error and exit code 2, never a traceback or an exhausted machine:

- at most :data:`MAX_INPUT_BYTES` bytes;
- at most :data:`MAX_JSON_DEPTH` levels of nesting;
- integers of at most :data:`MAX_INT_DIGITS` digits (vLLM's sizes need 20);
- regular files only: a named pipe or a device is refused at once
  (:mod:`kvpure.user_files`), never waited on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.json_bounds import check_bounds, int_hook_needed, too_many_digits
from kvpure.user_files import open_regular

__all__ = ["MAX_INPUT_BYTES", "MAX_INT_DIGITS", "MAX_JSON_DEPTH", "read_input_bytes", "read_json"]

MAX_INPUT_BYTES: Final = 256 * 2**20
"""The largest input file read (256 MiB)."""
MAX_JSON_DEPTH: Final = 64
"""The deepest JSON nesting accepted; vLLM-shaped inputs need fewer than 10 levels."""
MAX_INT_DIGITS: Final = 40
"""The longest integer accepted in JSON."""

STDIN: Final = "-"


def read_input_bytes(path: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit``."""
    if path == STDIN:
        data = sys.stdin.buffer.read(limit + 1)
    else:
        file = Path(path)
        if "\0" not in path and file.is_dir():  # a downloaded model folder: its config.json
            file = file / "config.json"
        with open_regular(file, path) as handle:
            data = handle.read(limit + 1)
    if len(data) > limit:
        raise InvalidFieldError(
            field=path, value=f"over {limit} bytes", reason="is too large to read"
        )
    return data


def _utf8(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidFieldError(
            field=path,
            value=f"byte {err.start}",
            reason="is not UTF-8 text; save the file as UTF-8 (UTF-16 and others are refused)",
        ) from None


def _big_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _too_deep(path: str) -> InvalidFieldError:
    return InvalidFieldError(
        field=path, value="nesting", reason=f"nests deeper than {MAX_JSON_DEPTH} levels"
    )


def parse_json_text(path: str, text: str) -> object:
    """JSON from ``text`` (read from ``path``), with the bounds above."""
    try:
        data: object = json.loads(text, parse_int=_big_int if int_hook_needed() else None)
    except RecursionError:
        raise _too_deep(path) from None
    except json.JSONDecodeError as err:
        raise InvalidFieldError(
            field=path,
            value=f"line {err.lineno} column {err.colno}",
            reason=f"invalid JSON: {err.msg}",
        ) from None
    except ValueError as err:
        reason = (
            f"an integer of over 4300 digits (at most {MAX_INT_DIGITS})"
            if too_many_digits(err)
            else str(err)
        )
        raise InvalidFieldError(field=path, value="a number", reason=reason) from None
    wrong = check_bounds(data, max_depth=MAX_JSON_DEPTH, max_int_digits=MAX_INT_DIGITS)
    if wrong == "nesting":
        raise _too_deep(path)
    if wrong is not None:
        raise InvalidFieldError(field=path, value="a number", reason=wrong)
    return data


def read_json(path: str) -> object:
    """The JSON in ``path`` (``-``: standard input; a folder: its ``config.json``)."""
    return parse_json_text(path, _utf8(path, read_input_bytes(path)))
