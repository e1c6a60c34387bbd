"""The ``--sweep-memory`` figures of ``kvpure cache``: read from the flag, and shown as a table."""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.cli.cache_sweep import SweepRow
from kvpure.cli.option_values import parse_memory_bytes
from kvpure.errors import InvalidFieldError

__all__ = ["MAX_SWEEP", "format_sweep", "sweep_labels"]

_BAR_WIDTH = 40
MAX_SWEEP = 256
"""Most figures one sweep may list."""


def format_sweep(rows: Sequence[SweepRow]) -> str:
    """A table of the sweep and a bar per memory figure."""
    lines = [
        f"{'memory':>10} {'blocks':>9} {'hits':>12} {'hit rate':>9} {'lost':>10}",
    ]
    served = [(label, r) for label, r in rows if not isinstance(r, str)]
    for label, r in rows:
        if isinstance(r, str):
            lines.append(f"{label:>10} cannot be served: {r}")
            continue
        lines.append(
            f"{label:>10} {r.actual.num_blocks - 1:>9,} {r.actual.hits:>12,} "
            f"{r.actual.hit_rate:>9.1%} {r.hits_lost_to_eviction:>10,}"
        )
    if not served:
        return "\n".join(lines)
    upper = served[0][1].unbounded
    lines += ["", f"hit rate (| marks the unbounded cache's {upper.hit_rate:.1%}):"]
    mark = round(upper.hit_rate * _BAR_WIDTH)
    for label, r in served:
        filled = round(r.actual.hit_rate * _BAR_WIDTH)
        bar = "#" * filled + " " * (_BAR_WIDTH - filled)
        bar = bar[:mark] + "|" + bar[mark:] if mark < _BAR_WIDTH else bar + "|"
        lines.append(f"{label:>10} {bar} {r.actual.hit_rate:.1%}")
    return "\n".join(lines)


def sweep_labels(value: str | None) -> list[str] | None:
    """The figures of ``--sweep-memory`` (None: no sweep), each checked as a memory size."""
    if value is None:
        return None
    labels = [v.strip() for v in value.split(",") if v.strip()]
    if not labels:
        raise InvalidFieldError(
            field="--sweep-memory", value=value, reason="must list memory figures"
        )
    if len(labels) > MAX_SWEEP:
        raise InvalidFieldError(
            field="--sweep-memory", value=len(labels), reason=f"must list at most {MAX_SWEEP}"
        )
    for label in labels:
        parse_memory_bytes(label, field="--sweep-memory")
    return labels
