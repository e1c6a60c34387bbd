"""How ``kvpure cache`` read its workload, for the report (text and ``--json``)."""

from __future__ import annotations

from typing import Any

from kvpure.cli.workload_files import WorkloadFile

__all__ = ["format_input", "input_to_json"]


def input_to_json(workload: WorkloadFile) -> dict[str, Any]:
    """The workload's format and, for ShareGPT, the entries read and skipped."""
    data: dict[str, Any] = {
        "format": workload.format,
        "arrival_order": any(r.arrival_time is not None for r in workload.requests),
    }
    sampled = workload.sharegpt
    if sampled is not None:
        data["sharegpt_entries"] = sampled.entries
        data["sharegpt_skipped_short_conversations"] = sampled.skipped_short_conversations
        data["sharegpt_skipped_by_length"] = sampled.skipped_by_length
    return data


def format_input(workload: WorkloadFile) -> str:
    """A line saying how a ShareGPT or timed workload was read ('' for plain JSON lines)."""
    sampled = workload.sharegpt
    if sampled is not None:
        return (
            f"ShareGPT:             {len(workload.requests):,} of {sampled.entries:,} entries, "
            f"as vLLM's benchmark sends them (first turn the prompt, second turn's tokens\n"
            f"                      the output); skipped: "
            f"{sampled.skipped_short_conversations:,} with fewer than 2 turns, "
            f"{sampled.skipped_by_length:,} by its length filter"
        )
    if any(r.arrival_time is not None for r in workload.requests):
        return "arrival order:        requests admitted by arrival_time (ties in file order)"
    return ""
