"""How ``kvpure cache`` read its workload, for the report (text and ``--json``)."""

from __future__ import annotations

from typing import Any

from kvpure.cli.workload_files import WorkloadFile

__all__ = ["format_input", "input_to_json"]


def input_to_json(workload: WorkloadFile) -> dict[str, Any]:
    """The workload's format and, for ShareGPT, the entries read and skipped."""
    data: dict[str, Any] = {
        "format": workload.format,
        "arrival_order": workload.arrival_order,
    }
    if workload.trace_block_size is not None:
        data["trace_block_size"] = workload.trace_block_size
    sampled = workload.sharegpt
    if sampled is not None:
        data["sharegpt_entries"] = sampled.entries
        data["sharegpt_skipped_short_conversations"] = sampled.skipped_short_conversations
        data["sharegpt_skipped_by_length"] = sampled.skipped_by_length
    return data


def format_input(workload: WorkloadFile) -> str:
    """Lines saying how a ShareGPT, trace or timed workload was read ('' for plain JSON lines)."""
    sampled = workload.sharegpt
    if sampled is not None:
        return (
            f"ShareGPT:             {sampled.requests:,} of {sampled.entries:,} entries, "
            f"as vLLM's benchmark sends them (first turn the prompt, second turn's tokens\n"
            f"                      the output); skipped: "
            f"{sampled.skipped_short_conversations:,} with fewer than 2 turns, "
            f"{sampled.skipped_by_length:,} by its length filter"
        )
    lines = []
    if workload.trace_block_size is not None:
        lines.append(
            f"hash-id trace:        {len(workload.requests):,} requests, one id per "
            f"{workload.trace_block_size}-token block (sharing inside a block is not visible)"
        )
    if workload.arrival_order:
        key = "timestamp" if workload.trace_block_size is not None else "arrival_time"
        lines.append(f"arrival order:        requests admitted by {key} (ties in file order)")
    return "\n".join(lines)
