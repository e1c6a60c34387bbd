"""Whether this process is kvpure's own command line.

The library never changes process-wide state a caller owns (its standard error
descriptor, say). kvpure's command line owns its process, so it marks it here at
start: parts that keep a refusal to one line (a Rust panic's own print from the
``tokenizers`` library, dropped while that library runs) do so only then.
"""

from __future__ import annotations

__all__ = ["is_command_line", "mark_command_line"]

_command_line = False


def mark_command_line() -> None:
    """Mark this process as kvpure's command line (``kvpure.cli.main`` does, first)."""
    global _command_line  # one flag for the process, set once by the entry point
    _command_line = True


def is_command_line() -> bool:
    """Whether :func:`mark_command_line` was called in this process."""
    return _command_line
