"""The peak resident memory of a ``kvpure cache`` run, as the operating system measured it."""

from __future__ import annotations

import sys

__all__ = ["peak_rss_bytes"]


def peak_rss_bytes() -> int | None:
    """The largest resident set of this process or of any finished worker process, in bytes.

    A measurement from ``resource.getrusage`` (``ru_maxrss`` of ``RUSAGE_SELF`` and
    ``RUSAGE_CHILDREN``: kilobytes on Linux, bytes on macOS), not an estimate: it
    covers the whole process so far (the interpreter, the parsed workload, the
    tokenizer, every replay), and with ``--jobs`` the largest worker. None where
    the ``resource`` module does not exist (Windows).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    unit = 1 if sys.platform == "darwin" else 1024
    peaks = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return max(peaks) * unit
