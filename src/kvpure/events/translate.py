"""msgspec's decoding errors as kvpure's typed errors, naming the event and field.

msgspec says what failed and where as text (``... - at `$[1][3].token_ids```);
these functions read that path into ``event_index`` and ``field``, and, for
bytes that are not MessagePack at all, ask :mod:`kvpure.events.scan` where
they break.
"""

from __future__ import annotations

import re

import msgspec

from kvpure.events.errors import (
    EventFieldTypeError,
    KVEventDecodeError,
    MalformedEventBatchError,
    MissingEventFieldError,
    TruncatedEventBatchError,
    UnknownEventFieldError,
    UnknownEventTypeError,
)
from kvpure.events.scan import event_type_at, scan_batch
from kvpure.events.types import EVENT_TYPES

_UNKNOWN_PREFIX = "Object contains unknown field"
_TOO_LONG_PREFIX = "Expected `array` of at most length"


_AT = re.compile(r"^(?P<reason>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_EVENT_PATH = re.compile(r"^\[1\]\[(?P<index>\d+)\](?:\.(?P<field>.+))?$")
_BATCH_PATH = re.compile(r"^\[(?P<index>\d+)\](?P<rest>.*)$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`$")
_BATCH_FIELDS = ("ts", "events", "data_parallel_rank")
_EVENT_TAGS = ", ".join(cls.__name__ for cls in EVENT_TYPES)


def from_validation(err: msgspec.ValidationError, data: bytes) -> KVEventDecodeError:
    match = _AT.match(str(err))
    reason, path = (match["reason"], match["path"]) if match else (str(err), "")
    event_index: int | None = None
    field: str | None = None
    event = _EVENT_PATH.match(path)
    if event:
        event_index, field = int(event["index"]), event["field"]
    else:
        top = _BATCH_PATH.match(path)
        if top:
            index = int(top["index"])
            name = _BATCH_FIELDS[index] if index < len(_BATCH_FIELDS) else f"[{index}]"
            field = name + top["rest"]
    event_type = event_type_at(data, event_index) if event_index is not None else None
    missing, unknown = _MISSING.match(reason), _UNKNOWN.match(reason)
    if missing:
        return MissingEventFieldError(
            reason="missing: the tag that names the event"
            if missing["field"] == "type"
            else "missing (vLLM writes this field even when it is None)",
            event_index=event_index,
            field=missing["field"],
            event_type=event_type,
        )
    if reason.startswith(_TOO_LONG_PREFIX) and not path:
        return UnknownEventFieldError(
            reason=f"{reason}: elements past ts, events, data_parallel_rank are not declared "
            "(vLLM skips them; strict mode refuses them)",
        )
    if unknown:
        return UnknownEventFieldError(
            reason="no event of any known vLLM version has this field (vLLM skips it; "
            "strict mode refuses it)",
            event_index=event_index,
            field=unknown["field"],
            event_type=event_type,
        )
    if field == "type" and reason.startswith("Invalid value"):
        return UnknownEventTypeError(
            reason=f"unknown event type; vLLM sends {_EVENT_TAGS}",
            event_index=event_index,
            field=field,
            event_type=event_type,
        )
    return EventFieldTypeError(
        reason=reason, event_index=event_index, field=field, event_type=event_type
    )


def from_broken_bytes(err: Exception, data: bytes) -> KVEventDecodeError:
    problem = scan_batch(data)
    if problem is None:
        return MalformedEventBatchError(reason=str(err) or type(err).__name__)
    error_class = (
        TruncatedEventBatchError if problem.kind == "truncated" else (MalformedEventBatchError)
    )
    return error_class(
        reason=problem.reason,
        event_index=problem.event_index,
        field=problem.field,
        event_type=problem.event_type,
        offset=problem.offset,
    )


def is_unknown_field(err: msgspec.ValidationError) -> bool:
    """Whether msgspec refused only a key or batch element the structs do not declare
    (what vLLM's tolerant decoder skips)."""
    text = str(err)
    return text.startswith(_UNKNOWN_PREFIX) or (
        text.startswith(_TOO_LONG_PREFIX) and " - at `" not in text
    )
