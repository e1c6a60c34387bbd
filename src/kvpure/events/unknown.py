"""Fields an event does not declare: found, named and left out, as vLLM's decoder does.

vLLM decodes a batch with ``msgspec.msgpack.Decoder(KVEventBatch)`` over
structs that do not forbid unknown fields: a key its struct does not declare
is skipped, and so is an element of the batch array past
``data_parallel_rank``. So a server of a newer release, with a field kvpure
does not know yet, still reaches every subscriber of an older one.

kvpure's decoder is strict on its fast path (it refuses such keys, which costs
nothing when there are none). When it meets one and the caller is not strict,
:func:`strip_unknown_fields` rewrites the payload without those keys (each
event map keeps its other entries, bytes unchanged, under a header with the
new count) and lists what it left out; the payload is then decoded again.
The walk reads one MessagePack header at a time (:mod:`kvpure.events.scan`),
never recursing; broken bytes raise the scanner's ``_Stop``, which the caller
turns into the same typed error as any broken payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvpure.events.errors import KVEventArgumentTypeError
from kvpure.events.scan import _Reader

BATCH_LENGTH = 3
"""``[ts, events, data_parallel_rank]``: what vLLM's batch declares."""


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A field that was on the wire but that the event (or batch) does not declare."""

    event_index: int | None
    """The event's index in the batch; None for an element of the batch array itself."""
    event_type: str | None
    """The event's ``type`` tag (None for the batch)."""
    field: str
    """The key as written (for the batch: ``[3]``, ``[4]``, ...)."""

    def __post_init__(self) -> None:
        index = self.event_index
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise KVEventArgumentTypeError(argument="event_index", expected="int", value=index)
        if self.event_type is not None and not isinstance(self.event_type, str):
            raise KVEventArgumentTypeError(
                argument="event_type", expected="str or None", value=self.event_type
            )
        if not isinstance(self.field, str):
            raise KVEventArgumentTypeError(argument="field", expected="str", value=self.field)

    def describe(self) -> str:
        """``event 2 (BlockStored) field colour`` / ``batch element [3]``."""
        if self.event_index is None:
            return f"batch element {self.field}"
        return f"event {self.event_index} ({self.event_type}) field {self.field!r}"


def _map_header(count: int, original: int) -> bytes:
    """A map header for ``count`` keys in the original header's width (vLLM writes a
    0.33 BlockStored with a map16 header whatever its count; keep what was there)."""
    if original == 0xDF:
        return b"\xdf" + count.to_bytes(4, "big")
    if original == 0xDE:
        return b"\xde" + count.to_bytes(2, "big")
    return bytes((0x80 | count,))


def _event(
    reader: _Reader,
    index: int,
    known: Mapping[str, frozenset[str]],
    out: list[bytes],
    found: list[UnknownField],
) -> None:
    data = reader.data
    start = reader.pos
    kind, count = reader.header()
    if kind != "map":
        reader.pos = start
        reader.skip()
        out.append(data[start : reader.pos])
        return
    entries: list[tuple[str | None, int, int]] = []
    event_type: str | None = None
    for _ in range(count):
        entry_start = reader.pos
        key_kind, key_count = reader.header()
        key: str | None = None
        if key_kind == "str":
            key = reader.text(key_count)
        else:
            reader.pos = entry_start
            reader.skip()
        value_start = reader.pos
        reader.skip()
        if key == "type":
            probe = _Reader(data[value_start : reader.pos])
            value_kind, value_count = probe.header()
            if value_kind == "str":
                event_type = probe.text(value_count)
        entries.append((key, entry_start, reader.pos))
    fields = known.get(event_type) if event_type is not None else None
    kept = [
        (key, first, last)
        for key, first, last in entries
        if fields is None or key is None or key in fields
    ]
    if len(kept) == len(entries):
        out.append(data[start : reader.pos])
        return
    for key, _, _ in entries:
        if fields is not None and key is not None and key not in fields:
            found.append(UnknownField(index, event_type, key))
    out.append(_map_header(len(kept), data[start]))
    out.extend(data[first:last] for _, first, last in kept)


def strip_unknown_fields(
    payload: bytes, known: Mapping[str, frozenset[str]]
) -> tuple[bytes, tuple[UnknownField, ...]]:
    """``payload`` without the keys ``known`` does not list for their event's ``type``
    (``type`` itself must be listed), nor batch elements past the third; and what was
    left out, in wire order. Events of an unknown ``type`` are kept whole (decoding
    refuses them); bytes after the batch are kept (decoding refuses them too)."""
    reader = _Reader(payload)
    kind, count = reader.header()
    if kind != "array":
        return payload, ()
    found: list[UnknownField] = []
    header = payload[: reader.pos] if count <= BATCH_LENGTH else bytes((0x90 | BATCH_LENGTH,))
    out: list[bytes] = [header]
    for position in range(count):
        start = reader.pos
        if position != 1:
            reader.skip()
            if position < BATCH_LENGTH:
                out.append(payload[start : reader.pos])
            else:
                found.append(UnknownField(None, None, f"[{position}]"))
            continue
        events_kind, num_events = reader.header()
        if events_kind != "array":
            reader.pos = start
            reader.skip()
            out.append(payload[start : reader.pos])
            continue
        out.append(payload[start : reader.pos])
        for index in range(num_events):
            _event(reader, index, known, out, found)
    out.append(payload[reader.pos :])
    if not found:
        return payload, ()
    return b"".join(out), tuple(found)
