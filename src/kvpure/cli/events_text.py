"""How ``kvpure events`` prints: one line per event, the audit's text and its JSON.

``kvpure.cli.events_command`` (decode, audit) and ``kvpure.cli.events_listen``
(listen) share these; ``events_command`` re-exports the public ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.events.audit import AuditReport, EventAudit, RouterSettings, SettingChange
from kvpure.events.audit_check import AuditStatus
from kvpure.events.types import BlockStored
from kvpure.events.unknown import UnknownField

__all__ = [
    "audit_json",
    "audit_summary",
    "describe_event",
    "print_audit_report",
    "unknown_fields_json",
    "unknown_fields_text",
]


def unknown_fields_json(unknown: Sequence[UnknownField]) -> list[dict[str, object]]:
    """The skipped fields as data: ``{"event", "type", "field"}`` (event null: the batch)."""
    return [{"event": u.event_index, "type": u.event_type, "field": u.field} for u in unknown]


def unknown_fields_text(unknown: Sequence[UnknownField]) -> str:
    """``2 fields skipped (not declared): event 0 (BlockStored) field 'colour', ...``."""
    names = ", ".join(u.describe() for u in unknown)
    return f"{len(unknown)} fields skipped (not declared by the events): {names}"


def hash_text(value: int | bytes) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)


def describe_event(event: object) -> str:
    """One line about ``event`` for the text output."""
    if isinstance(event, BlockStored):
        parent = "-" if event.parent_block_hash is None else hash_text(event.parent_block_hash)
        keys = "" if not any(event.extra_keys or ()) else f" extra_keys {event.extra_keys}"
        lora = "" if event.lora_name is None else f" lora {event.lora_name!r} (id {event.lora_id})"
        after = event.lookahead_token_ids
        lookahead = (
            ""
            if not after
            else f" lookahead {len(after[0])} tokens {[list(tokens) for tokens in after]}"
        )
        return (
            f"BlockStored group {event.group_idx} {event.kv_cache_spec_kind or ''} "
            f"{len(event.block_hashes)} blocks of {event.block_size} tokens, parent {parent}, "
            f"hashes {' '.join(hash_text(h) for h in event.block_hashes)}{lora}{keys}{lookahead}"
        )
    name = type(event).__name__
    hashes = getattr(event, "block_hashes", ())
    group = getattr(event, "group_idx", None)
    if not hashes:
        return name
    return f"{name} group {group} hashes {' '.join(hash_text(h) for h in hashes)}"


def change_text(change: SettingChange, style: str) -> str:
    server = change.value_text(change.server)
    yours = change.value_text(change.yours, yours=True)
    if style == "short":
        return f"{change.setting} {server} (yours {yours})"
    return f"{change.setting} {server} where you use {yours}"


def explanation_text(audit: EventAudit) -> str:
    if not audit.explanations:
        return "" if audit.status is AuditStatus.AGREES else "; no tried setting explains it"
    options = [
        ", ".join(change_text(c, "short") for c in changes) or "as is"
        for changes in audit.explanations
    ]
    return "; agrees with " + " or ".join(options)


def audit_json(audit: EventAudit) -> dict[str, object]:
    return {
        "frame": audit.batch_index,
        "event": audit.event_index,
        "status": audit.status.value,
        "parent": audit.parent.value,
        "reason": audit.reason,
        "num_hashes": audit.num_hashes,
        "explanations": [[c.as_json() for c in changes] for changes in audit.explanations],
    }


def audit_summary(
    report: AuditReport, router: RouterSettings, unknown: Sequence[UnknownField]
) -> dict[str, object]:
    likely = report.likely_explanation()
    return {
        "algorithm": router.algorithm,
        "block_size": router.block_size,
        "seed": router.seed,
        "profile": router.profile.name,
        "num_hash_lookahead_tokens": router.num_hash_lookahead_tokens,
        "block_stored": len(report.events),
        "other_events": report.num_other_events,
        **{status.value: report.count(status) for status in AuditStatus},
        "likely": None if likely is None else [c.as_json() for c in likely],
        "unknown_fields": unknown_fields_json(unknown),
    }


def print_audit_report(
    report: AuditReport, router: RouterSettings, unknown: Sequence[UnknownField]
) -> None:
    seed = "unset" if router.seed is None else repr(router.seed)
    print(
        f"settings: {router.algorithm}, block_size {router.block_size} tokens, "
        f"seed {seed}, profile {router.profile.name}, "
        f"lookahead {router.num_hash_lookahead_tokens} tokens"
    )
    print(
        f"{len(report.events)} BlockStored events: {report.count(AuditStatus.AGREES)} agree, "
        f"{report.count(AuditStatus.DISAGREES)} disagree, "
        f"{report.count(AuditStatus.UNVERIFIABLE)} unverifiable "
        f"({report.num_other_events} other events)"
    )
    if unknown:
        print(unknown_fields_text(unknown))
    for audit in report.events:
        if audit.status is AuditStatus.AGREES:
            continue
        print(
            f"  frame {audit.batch_index} event {audit.event_index}: {audit.status.value} "
            f"(parent {audit.parent.value}): {audit.reason}{explanation_text(audit)}"
        )
    likely = report.likely_explanation()
    if likely:
        changes = ", ".join(change_text(c, "long") for c in likely)
        print(f"likely: the server uses {changes}")
