"""Opening the files a user names: regular files only, read with a stated bound.

Opening a named pipe for reading blocks until a writer comes, and a device
(``/dev/zero``, ``/dev/urandom``) never ends; both would hang kvpure. Every
file the command line or the library reads on a user's behalf is opened here:
without blocking (``O_NONBLOCK``), then checked with ``fstat`` on the open
descriptor (no race with a rename), and refused with
:class:`~kvpure.errors.InvalidFieldError` unless it is a regular file. A
folder is refused the same way, naming what was expected.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from kvpure.errors import InvalidFieldError

__all__ = [
    "NotARegularFileError",
    "check_writable_target",
    "open_regular",
    "open_regular_for_writing",
    "read_regular_bytes",
    "read_regular_text",
]


class NotARegularFileError(InvalidFieldError):
    """A path names a pipe, a device, a socket or a folder where a file is read."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], field: str | None = None) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (symlinks followed).

    ``field`` names the input in the error (default: the path). OSError
    (missing file, no permission) passes through unchanged.
    """
    name = field if field is not None else os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if "\0" in os.fspath(path):
        raise NotARegularFileError(
            field=name, value=repr(os.fspath(path))[:80], reason="holds a NUL character"
        )
    try:
        descriptor = os.open(path, flags)
    except IsADirectoryError:
        raise NotARegularFileError(
            field=name, value="a folder", reason="is not a regular file; name a file"
        ) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(
                field=name,
                value=_kind(mode),
                reason="is not a regular file; pipes, devices and sockets are refused",
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def open_regular_for_writing(
    path: str | os.PathLike[str], field: str, *, append: bool = False
) -> BinaryIO:
    """``path`` opened for writing in binary (created if missing), if it is a regular file.

    Opening a named pipe for writing blocks until a reader comes, and writing to
    a device goes nowhere or fills it: both are refused without blocking
    (``O_NONBLOCK``: a pipe without a reader fails at once), as
    :func:`open_regular` refuses them for reading.
    """
    _check_nul(path, field)
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | (os.O_APPEND if append else 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        descriptor = os.open(path, flags, 0o666)
    except IsADirectoryError:
        raise NotARegularFileError(
            field=field, value="a folder", reason="is not a regular file; name a file"
        ) from None
    except OSError as err:
        if err.errno == errno.ENXIO:  # a named pipe nobody reads
            raise NotARegularFileError(
                field=field,
                value="a named pipe",
                reason="is not a regular file; pipes, devices and sockets are refused",
            ) from None
        raise
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(
                field=field,
                value=_kind(mode),
                reason="is not a regular file; pipes, devices and sockets are refused",
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        if not append:
            os.ftruncate(descriptor, 0)
        return os.fdopen(descriptor, "ab" if append else "wb")
    except BaseException:
        os.close(descriptor)
        raise


def check_writable_target(path: str | os.PathLike[str], field: str) -> None:
    """Refuse at once an output path that exists and is not a regular file (checked again
    when it is opened, by :func:`open_regular_for_writing`)."""
    _check_nul(path, field)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return  # opening will say why
    if not stat.S_ISREG(mode):
        raise NotARegularFileError(
            field=field,
            value=_kind(mode),
            reason="is not a regular file; pipes, devices and sockets are refused",
        )


def _check_nul(path: str | os.PathLike[str], field: str) -> None:
    if "\0" in os.fspath(path):
        raise NotARegularFileError(
            field=field, value=repr(os.fspath(path))[:80], reason="holds a NUL character"
        )


def read_regular_bytes(path: str | os.PathLike[str], limit: int, field: str | None = None) -> bytes:
    """The bytes of the regular file ``path``; over ``limit`` bytes is an InvalidFieldError."""
    name = field if field is not None else os.fspath(path)
    with open_regular(path, field) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InvalidFieldError(
            field=name, value=f"over {limit:,} bytes", reason="is too large to read"
        )
    return data


def read_regular_text(path: str | os.PathLike[str], limit: int, field: str | None = None) -> str:
    """The UTF-8 text (a byte-order mark dropped) of the regular file ``path``."""
    name = field if field is not None else os.fspath(path)
    data = read_regular_bytes(path, limit, field)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidFieldError(
            field=name, value=f"byte {err.start}", reason="is not UTF-8 text"
        ) from None


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (a symlink to one counts), without opening it."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False
