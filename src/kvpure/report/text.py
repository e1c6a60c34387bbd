"""Rendering a :class:`~kvpure.report.CapacityReport`: text for people, JSON for tools.

:func:`render_report` gives the human report, :func:`report_to_json` the same
facts as plain JSON data (exact integers, no rounding), and
:func:`render_sweep` one table row per swept value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from kvpure.report.capacity import CapacityReport, GroupReport

__all__ = ["SweepRow", "format_bytes", "render_report", "render_sweep", "report_to_json"]

_NAME = re.compile(r"^(.*?)(\d+)(\D*)$")


def format_bytes(num_bytes: int) -> str:
    """Bytes in binary units: ``2.00 MiB``, ``24.00 GiB``, ``512 B``."""
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{num_bytes} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{num_bytes} B"  # pragma: no cover  (the loop always returns)


def _runs(indices: Sequence[int]) -> str:
    if len(indices) >= 3:
        step = indices[1] - indices[0]
        if step > 1 and all(b - a == step for a, b in pairwise(indices)):
            return f"{indices[0]},{indices[1]},..,{indices[-1]}"
    parts: list[str] = []
    start = prev = indices[0]
    for index in (*indices[1:], None):
        if index is not None and index == prev + 1:
            prev = index
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if index is not None:
            start = prev = index
    return ",".join(parts)


def describe_layers(names: Sequence[str]) -> str:
    """``model.layers.[0-31].self_attn.attn`` style summary of layer names."""
    if not names:
        return "(none)"
    matches = [_NAME.match(name) for name in names]
    heads = {(m.group(1), m.group(3)) for m in matches if m is not None}
    if len(heads) == 1 and all(m is not None for m in matches):
        prefix, suffix = heads.pop()
        indices = [int(m.group(2)) for m in matches if m is not None]
        if len(indices) == 1:
            return names[0]
        return f"{prefix}[{_runs(indices)}]{suffix}"
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


def _group_row(group: GroupReport) -> tuple[str, ...]:
    kind = group.kind
    if group.window_tokens is not None:
        kind = f"{kind} ({group.window_tokens})"
    page = f"{group.page_size_bytes:,}"
    if group.unpadded_page_size_bytes != group.page_size_bytes:
        page = f"{page} (data {group.unpadded_page_size_bytes:,})"
    return (
        str(group.index),
        kind,
        str(group.num_layers)
        + (f" +{group.num_padding_layers} pad" if group.num_padding_layers else ""),
        describe_layers(group.layer_names),
        str(group.block_size),
        page,
        f"{group.blocks_per_request:,}",
        f"{100 * group.memory_share:.1f}%",
    )


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], indent: str = "  "
) -> list[str]:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        lines.append(
            indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        )
    return lines


def render_report(report: CapacityReport) -> str:
    """The human report (a few screens at most)."""
    lines: list[str] = []
    model = report.model
    memory = report.available_memory[0]
    same = all(m == memory for m in report.available_memory)
    memory_text = format_bytes(memory) + (" per GPU" if same else " on worker 0")
    if model is not None:
        lines.append(
            f"{model.architecture}: {model.num_attention_layers} attention + "
            f"{model.num_mamba_layers} mamba layers, {model.model_dtype} weights, "
            f"KV cache {model.kv_cache_dtype}, {model.attention_backend}"
        )
        lines.append(
            f"{report.num_workers} GPU(s): tensor parallel {model.tensor_parallel_size}, "
            f"pipeline parallel {model.pipeline_parallel_size}; KV cache memory {memory_text}"
        )
    else:
        lines.append(f"{report.num_workers} worker(s); KV cache memory {memory_text}")
    lines.append("")
    lines.append("Capacity")
    length = f"{report.max_model_len:,}"
    if report.auto_fitted and model is not None:
        length += f" (auto-fitted; the model allows {model.derived_max_model_len:,})"
    elif report.auto_fitted:
        length += " (auto-fitted)"
    block_note = ""
    if model is not None and model.requested_block_size != model.block_size:
        block_note = (
            f"; attention blocks raised from {model.requested_block_size} to "
            f"{model.block_size} tokens so one page holds a Mamba state"
        )
    lines.extend(
        [
            f"  blocks            {report.num_blocks:,} ({report.usable_blocks:,} usable; "
            f"block 0 is the null block), {format_bytes(report.block_bytes)} each",
            f"  token capacity    {report.kv_cache_capacity_tokens:,} tokens",
            f"  max concurrency   {report.max_concurrency:.2f}x requests of "
            f"{report.max_model_len:,} tokens",
            f"  max_model_len     {length}",
            f"  block sizes       scheduler {report.scheduler_block_size}, "
            f"hash {report.hash_block_size} tokens{block_note}",
        ]
    )
    lines.append("")
    lines.append("KV cache groups (layers of every worker; pages and blocks per worker)")
    header = ("#", "kind", "layers", "names", "block", "page bytes", "blocks/req", "share")
    lines.extend(_table(header, [_group_row(g) for g in report.groups]))
    waste = report.waste
    lines.append("")
    lines.append(f"Waste (of {format_bytes(waste.available_bytes)} on worker 0)")
    for label, value in (
        ("padding layers", waste.padding_layers_bytes),
        ("padded pages", waste.padded_pages_bytes),
        ("null block", waste.null_block_bytes),
        ("unallocated", waste.unallocated_bytes),
        ("total", waste.total_bytes),
    ):
        lines.append(
            f"  {label:<16}{value:>18,} B  {format_bytes(value):>11}  {waste.percent(value):6.2f}%"
        )
    if report.vllm_log:
        lines.append("")
        lines.append("vLLM would log")
        lines.extend(f"  {line}" for line in report.vllm_log)
    if report.suggestion:
        lines.append("")
        lines.append(f"To fit more: {report.suggestion}")
    return "\n".join(lines)


def report_to_json(report: CapacityReport) -> dict[str, object]:
    """The report's facts as JSON-ready data."""
    model = report.model
    waste = report.waste
    return {
        "model": None
        if model is None
        else {
            "architecture": model.architecture,
            "num_attention_layers": model.num_attention_layers,
            "num_mamba_layers": model.num_mamba_layers,
            "model_dtype": model.model_dtype,
            "kv_cache_dtype": model.kv_cache_dtype,
            "attention_backend": model.attention_backend,
            "tensor_parallel_size": model.tensor_parallel_size,
            "pipeline_parallel_size": model.pipeline_parallel_size,
            "requested_max_model_len": model.requested_max_model_len,
            "derived_max_model_len": model.derived_max_model_len,
            "requested_block_size": model.requested_block_size,
            "block_size": model.block_size,
        },
        "num_workers": report.num_workers,
        "available_memory": list(report.available_memory),
        "num_blocks": report.num_blocks,
        "usable_blocks": report.usable_blocks,
        "block_bytes": report.block_bytes,
        "kv_cache_capacity_tokens": report.kv_cache_capacity_tokens,
        "max_concurrency": report.max_concurrency,
        "max_model_len": report.max_model_len,
        "auto_fitted": report.auto_fitted,
        "scheduler_block_size": report.scheduler_block_size,
        "hash_block_size": report.hash_block_size,
        "groups": [
            {
                "index": g.index,
                "kind": g.kind,
                "spec_type": g.spec_type,
                "layer_names": list(g.layer_names),
                "block_size": g.block_size,
                "page_size_bytes": g.page_size_bytes,
                "unpadded_page_size_bytes": g.unpadded_page_size_bytes,
                "window_tokens": g.window_tokens,
                "max_memory_usage_bytes": g.max_memory_usage_bytes,
                "blocks_per_request": g.blocks_per_request,
                "memory_share": g.memory_share,
                "num_padding_layers": g.num_padding_layers,
            }
            for g in report.groups
        ],
        "waste": {
            "available_bytes": waste.available_bytes,
            "used_bytes": waste.used_bytes,
            "padding_layers_bytes": waste.padding_layers_bytes,
            "padded_pages_bytes": waste.padded_pages_bytes,
            "null_block_bytes": waste.null_block_bytes,
            "unallocated_bytes": waste.unallocated_bytes,
            "total_bytes": waste.total_bytes,
        },
        "suggestion": report.suggestion,
        "vllm_log": list(report.vllm_log),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepRow:
    """One swept value: its report, or why it does not fit."""

    value: str
    report: CapacityReport | None
    error: str | None = None


def render_sweep(option: str, rows: Sequence[SweepRow]) -> str:
    """A capacity table, one row per value of ``option``."""
    header = (
        option,
        "blocks",
        "token capacity",
        "concurrency",
        "final max_model_len",
        "block",
        "waste",
    )
    table: list[tuple[str, ...]] = []
    for row in rows:
        report = row.report
        if report is None:
            table.append((row.value, "-", "-", "-", "-", "-", f"does not fit: {row.error}"))
            continue
        table.append(
            (
                row.value,
                f"{report.num_blocks:,}",
                f"{report.kv_cache_capacity_tokens:,}",
                f"{report.max_concurrency:.2f}x",
                f"{report.max_model_len:,}" + (" (fit)" if report.auto_fitted else ""),
                str(report.scheduler_block_size),
                f"{report.waste.percent(report.waste.total_bytes):.2f}%",
            )
        )
    return "\n".join(_table(header, table, indent=""))
