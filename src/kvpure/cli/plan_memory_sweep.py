"""``kvpure plan MODEL --gpu NAME --sweep NAME=V1,V2`` with the KV memory estimated.

The inverse question: which tensor-parallel size or GPU starts a model, and
how much it then holds. Each row re-estimates the memory budget
(:func:`~kvpure.cli.plan_memory.memory_case`) with the option set to one
value and plans at both ends of the band: the verdict, tokens and
max-length requests at once as ranges, and the largest ``max_model_len`` that
starts at each end. A closing line answers the question: the smallest TP
that starts, or the values (GPUs) that start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kvpure.cli.plan_memory import MemoryCase, memory_case
from kvpure.errors import KVPureError, format_gib
from kvpure.models.config import HFConfig
from kvpure.models.layout import ModelLayout
from kvpure.serve.memory import MemoryBand

__all__ = [
    "MemorySweepRow",
    "memory_sweep",
    "memory_sweep_rows",
    "render_memory_sweep",
    "sweep_answer",
]

_HEADERS: Final = (
    "value",
    "verdict",
    "KV GiB per GPU",
    "tokens",
    "max-length requests at once",
    "longest max_model_len that starts",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySweepRow:
    """One value of the swept option: its estimated case, or the error that stopped it."""

    value: str
    case: MemoryCase | None
    error: str | None = None

    @property
    def verdict(self) -> str:
        """The band's verdict (``error`` when the value could not be planned)."""
        return "error" if self.case is None else self.case.outcome.verdict


def memory_sweep_rows(
    config: HFConfig,
    layout: ModelLayout,
    options: Mapping[str, str],
    name: str,
    values: tuple[str, ...],
    *,
    model_folder: Path | None,
    vllm_version: str | None = None,
) -> tuple[MemorySweepRow, ...]:
    """One row per value (bad values become rows with their error, one line).

    ``vllm_version`` (``--vllm``) names the release whose memory profile is estimated.
    """
    rows = []
    for value in values:
        try:
            case = memory_case(
                config,
                layout,
                {**options, name: value},
                model_folder=model_folder,
                longest=True,
                vllm_version=vllm_version,
            )
        except KVPureError as err:
            rows.append(MemorySweepRow(value=value, case=None, error=str(err).splitlines()[0]))
        else:
            rows.append(MemorySweepRow(value=value, case=case))
    return tuple(rows)


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low} to {high}"


def _cells(row: MemorySweepRow) -> tuple[str, ...]:
    case = row.case
    if case is None:
        return (row.value, "error", row.error or "", "", "", "")
    out = case.outcome
    kv_low = min(w.budget.kv_cache_bytes_low for w in case.workers)
    kv_high = max(w.budget.kv_cache_bytes_high for w in case.workers)
    at_once_low = min(out.low.concurrency, float(case.serve["max_num_seqs"].value))
    at_once_high = min(out.high.concurrency, float(case.serve["max_num_seqs"].value))
    longest_low = "-" if out.longest_low is None else f"{out.longest_low:,}"
    longest_high = "-" if out.longest_high is None else f"{out.longest_high:,}"
    return (
        row.value,
        out.verdict,
        "none" if kv_high <= 0 else _span(format_gib(max(0, kv_low)), format_gib(kv_high)),
        _span(f"{out.low.tokens:,}", f"{out.high.tokens:,}"),
        _span(f"{at_once_low:.2f}", f"{at_once_high:.2f}")
        + f" x {out.high.max_model_len:,} tokens",
        _span(longest_low, longest_high),
    )


def sweep_answer(name: str, rows: tuple[MemorySweepRow, ...]) -> str:
    """The one-line answer: the smallest TP (or the values) that start."""
    starting = [row.value for row in rows if row.verdict == MemoryBand.STARTS]
    maybe = [row.value for row in rows if row.verdict == MemoryBand.MAY_NOT_START]
    if name == "tensor_parallel_size":
        by_size = sorted(starting, key=lambda v: int(v) if v.isdigit() else 0)
        answer = f"smallest TP that starts: {by_size[0] if by_size else 'none'}"
        if not by_size and maybe:
            answer += f" (may start: TP {', '.join(maybe)})"
        return answer
    label = "GPUs" if name in ("gpu", "gpu_memory") else f"{name} values"
    answer = f"{label} that start: {', '.join(starting) if starting else 'none'}"
    if maybe:
        answer += f"; may not start: {', '.join(maybe)}"
    return answer


def _table(name: str, rows: tuple[MemorySweepRow, ...]) -> str:
    cells = [(name, *_HEADERS[1:]), *(_cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_HEADERS))]
    lines = [
        "  ".join(text.ljust(widths[i]) for i, text in enumerate(line)).rstrip() for line in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def memory_sweep(
    config: HFConfig,
    layout: ModelLayout,
    options: Mapping[str, str],
    name: str,
    values: tuple[str, ...],
    *,
    model_folder: Path | None,
    as_json: bool,
    vllm_version: str | None = None,
) -> str:
    """The sweep table (or its JSON) and the one-line answer."""
    rows = memory_sweep_rows(
        config, layout, options, name, values, model_folder=model_folder, vllm_version=vllm_version
    )
    return render_memory_sweep(name, rows, as_json=as_json)


def render_memory_sweep(name: str, rows: tuple[MemorySweepRow, ...], *, as_json: bool) -> str:
    """The rows of :func:`memory_sweep_rows` as the table (or JSON) and the one-line answer."""
    answer = sweep_answer(name, rows)
    if not as_json:
        note = (
            "Ranges: the plan at the low and the high end of the memory estimate's band; "
            "--kv-cache-memory replaces the estimate."
        )
        return _table(name, rows) + "\n\n" + answer + "\n" + note
    data: dict[str, object] = {
        "sweep": name,
        "rows": [_row_json(row) for row in rows],
        "answer": answer,
    }
    return json.dumps(data, indent=2)


def _row_json(row: MemorySweepRow) -> dict[str, object]:
    case = row.case
    if case is None:
        return {"value": row.value, "verdict": "error", "error": row.error}
    out = case.outcome
    return {
        "value": row.value,
        "verdict": out.verdict,
        "kv_cache_bytes": [
            [w.budget.kv_cache_bytes_low, w.budget.kv_cache_bytes_high] for w in case.workers
        ],
        "kv_cache_capacity_tokens": [out.low.tokens, out.high.tokens],
        "max_concurrency": [out.low.concurrency, out.high.concurrency],
        "max_model_len_that_starts": [out.longest_low, out.longest_high],
        "memory": [w.to_json() for w in case.workers],
        "error": None,
    }
