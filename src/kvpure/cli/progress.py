"""A progress bar on standard error for long replays.

Drawn in place with a carriage return, at most every tenth of a second and
once at the end, then cleared so that what follows starts on a clean line.
It is shown only when standard error is a terminal, or when asked for
(``--progress``); otherwise :func:`progress_bar` gives no bar at all.
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, runtime_checkable

__all__ = ["ProgressBar", "TextStream", "progress_bar"]


@runtime_checkable
class TextStream(Protocol):
    """Where the bar is drawn: standard error, or any text stream."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


_WIDTH = 30
_INTERVAL_S = 0.1


class ProgressBar:
    """A bar counting ``done`` of ``total`` units (request replays)."""

    def __init__(self, total: int, stream: TextStream, label: str = "replaying") -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.label = label
        self._last_draw = 0.0
        self._last_line = ""

    def __call__(self, count: int) -> None:
        """Count ``count`` more units done and redraw when due."""
        self.done = min(self.done + count, self.total)
        now = time.monotonic()
        if now - self._last_draw >= _INTERVAL_S or self.done == self.total:
            self._last_draw = now
            self.draw()

    def line(self) -> str:
        """The bar as it is drawn now."""
        filled = self.done * _WIDTH // self.total
        percent = self.done * 100 // self.total
        bar = "#" * filled + "-" * (_WIDTH - filled)
        return f"{self.label} [{bar}] {percent:3d}% {self.done:,}/{self.total:,} requests"

    def draw(self) -> None:
        """Write the bar over the previous one."""
        line = self.line()
        if line != self._last_line:
            self.stream.write("\r" + line)
            self.stream.flush()
            self._last_line = line

    def close(self) -> None:
        """Clear the bar's line."""
        if self._last_line:
            self.stream.write("\r" + " " * len(self._last_line) + "\r")
            self.stream.flush()
            self._last_line = ""


def progress_bar(
    total: int, *, forced: bool, stream: TextStream | None = None
) -> ProgressBar | None:
    """A bar on ``stream`` (standard error) if it is a terminal or ``forced``, else None."""
    out = sys.stderr if stream is None else stream
    if not forced and not out.isatty():
        return None
    return ProgressBar(total, out)
