"""Garbage-collector pacing while a workload is replayed: :func:`replay_gc_pace`.

A replay allocates a few containers per block (a hash entry; a holders dict
when two blocks cache one key) and frees them as blocks are evicted, and its
pool and block tables live for the whole run. With the collector's default
thresholds the young generation fills every 700 allocations and the older ones
are walked again and again, the pool's blocks with them: a fifth of a large
pool's replay time. The replay makes no reference cycles, so while it runs the
objects alive before it are frozen (left out of every collection) and the
collector runs less often; both are restored after, whatever happens.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["REPLAY_GC_THRESHOLDS", "replay_gc_pace"]

REPLAY_GC_THRESHOLDS: Final = (20_000, 50, 1_000)
"""The collector's thresholds (young, middle, old) while a replay runs."""


@contextmanager
def replay_gc_pace() -> Iterator[None]:
    """Freeze what is alive and raise the collector's thresholds for the ``with`` body;
    the thresholds and the frozen objects are given back after (a nested use leaves
    it to the outer one)."""
    if not gc.isenabled() or gc.get_threshold() == REPLAY_GC_THRESHOLDS:
        yield
        return
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(*REPLAY_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not frozen:  # objects frozen before are left frozen, as found
            gc.unfreeze()
