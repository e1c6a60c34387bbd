"""A workload read once and streamed again for every run, from a file on disk.

The analyzer replays a workload several times (the actual run per memory
figure, the unbounded count, the report's totals), possibly in other
processes. Holding it in memory would make memory grow with the workload
(about 70 bytes a token as Python integers), so the reader writes each parsed
request to a spool file as it goes (:class:`WorkloadSpool`) and every run
reads it back one request at a time (:class:`WorkloadStream`). Text prompts
are tokenized once, when read; arrival order is kept as a list of file
offsets, the only thing held per request.

The spool is a temporary file of pickled requests that only this process
wrote; it is deleted when the stream that owns it is collected (or at exit).
Copies sent to worker processes read the same file and never delete it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
import weakref
from collections.abc import Iterator
from typing import IO, Any, Generic, TypeVar

__all__ = ["WorkloadSpool", "WorkloadStream"]

T = TypeVar("T")


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class WorkloadStream(Generic[T]):
    """The spooled requests, in admission order: iterable any number of times."""

    def __init__(self, path: str, offsets: list[int] | None, count: int) -> None:
        self.path = path
        self.offsets = offsets
        """File offsets in admission order (None: the file's order)."""
        self.count = count
        self._finalizer: Any = None

    def own(self) -> None:
        """Delete the spool when this stream is collected (only in the process that wrote it)."""
        self._finalizer = weakref.finalize(self, _remove, self.path)

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path, "offsets": self.offsets, "count": self.count}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.offsets = state["offsets"]
        self.count = state["count"]
        self._finalizer = None

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[T]:
        with open(self.path, "rb") as handle:
            if self.offsets is None:
                for _ in range(self.count):
                    yield pickle.load(handle)  # a spool this process wrote
                return
            for offset in self.offsets:
                handle.seek(offset)
                yield pickle.load(handle)  # a spool this process wrote

    def __getitem__(self, index: int) -> T:
        if not -self.count <= index < self.count:
            raise IndexError(index)
        index %= self.count
        for position, item in enumerate(self):
            if position == index:
                return item
        raise IndexError(index)  # pragma: no cover - the count is the items written


class WorkloadSpool(Generic[T]):
    """Writes requests to a temporary file; :meth:`finish` gives the stream."""

    def __init__(self) -> None:
        handle, path = tempfile.mkstemp(prefix="kvpure-workload-", suffix=".spool")
        self.path = path
        self._file: IO[bytes] = os.fdopen(handle, "wb")
        self._cleanup: Any = weakref.finalize(self, _remove, path)
        self._order: list[tuple[float, int, int]] = []
        self.count = 0

    def add(self, item: T, arrival: float | None = None) -> None:
        """Append ``item``; ``arrival`` (given for all or none) orders the stream."""
        offset = self._file.tell()
        pickle.dump(item, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        if arrival is not None:
            self._order.append((arrival, self.count, offset))
        self.count += 1

    def finish(self) -> WorkloadStream[T]:
        """The stream of what was added: by arrival (ties in order added) if arrivals were given."""
        self._file.close()
        offsets = [offset for _, _, offset in sorted(self._order)] if self._order else None
        self._order = []
        stream: WorkloadStream[T] = WorkloadStream(self.path, offsets, self.count)
        if self._cleanup is not None:
            self._cleanup.detach()
            self._cleanup = None
        stream.own()
        return stream

    def discard(self) -> None:
        """Close and delete the spool (reading failed)."""
        self._file.close()
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None
