"""Where a payload stops being a KV event batch, for the error message.

msgspec decodes a batch in one call, and when the bytes are cut or broken it
says so without saying where. This walker reads the same bytes one MessagePack
header at a time, knowing only the batch's layout (an array ``[ts, events,
rank]`` whose ``events`` are maps keyed by field name), and reports the first
problem with its place: the event index, the field (the map key being read),
the event's ``type`` when it was read already, and the byte offset.

It never recurses (nesting is a counter stack) and never allocates for a
declared length: a header claiming 4 GiB of items over a few bytes is
reported as truncated when the bytes run out. It runs only when decoding
failed, so its speed does not matter.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEPTH = 64
"""Deeper nesting than this is reported as malformed (vLLM's events nest 5 deep)."""

_BATCH_FIELDS = ("ts", "events", "data_parallel_rank")

# header byte -> (kind, number of length bytes or fixed payload bytes)
_FIXED = {
    0xC0: 0, 0xC2: 0, 0xC3: 0,  # nil, false, true
    0xCA: 4, 0xCB: 8,  # float32, float64
    0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8,  # uint8..64
    0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8,  # int8..64
    0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17,  # fixext 1..16 (type byte + data)
}  # fmt: skip
_SIZED = {  # header -> (kind, length bytes)
    0xC4: ("bin", 1), 0xC5: ("bin", 2), 0xC6: ("bin", 4),
    0xC7: ("ext", 1), 0xC8: ("ext", 2), 0xC9: ("ext", 4),
    0xD9: ("str", 1), 0xDA: ("str", 2), 0xDB: ("str", 4),
    0xDC: ("array", 2), 0xDD: ("array", 4), 0xDE: ("map", 2), 0xDF: ("map", 4),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ScanProblem:
    """The first problem found: what kind, why, and where."""

    kind: str
    """``"truncated"`` or ``"malformed"``."""
    reason: str
    offset: int
    event_index: int | None
    field: str | None
    event_type: str | None


class _Stop(Exception):
    def __init__(self, kind: str, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.offset = offset


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            left = len(self.data) - self.pos
            raise _Stop("truncated", f"{what} needs {n} bytes, {left} left", self.pos)
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def header(self) -> tuple[str, int]:
        """Read one header: (kind, count), where count is items for arrays and maps,
        bytes for str/bin/ext, 0 for scalars. The payload of str/bin/ext is not read."""
        start = self.pos
        byte = self.take(1, "a value")[0]
        if byte <= 0x7F or byte >= 0xE0:
            return "int", 0
        if 0x80 <= byte <= 0x8F:
            return "map", byte & 0x0F
        if 0x90 <= byte <= 0x9F:
            return "array", byte & 0x0F
        if 0xA0 <= byte <= 0xBF:
            return "str", byte & 0x1F
        if byte in _FIXED:
            self.take(_FIXED[byte], "a scalar")
            return "scalar", 0
        if byte in _SIZED:
            kind, size = _SIZED[byte]
            count = int.from_bytes(self.take(size, f"a {kind} length"), "big")
            if kind == "ext":
                count += 1  # the ext type byte
            return kind, count
        raise _Stop("malformed", f"0x{byte:02x} is not a MessagePack type", start)

    def text(self, count: int) -> str:
        start = self.pos
        raw = self.take(count, "a string")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Stop("malformed", "a string is not valid UTF-8", start) from None

    def skip(self) -> None:
        """Skip one whole value, nested ones included, without recursion."""
        pending = [1]
        while pending:
            if len(pending) > MAX_DEPTH:
                raise _Stop("malformed", f"values nest deeper than {MAX_DEPTH} levels", self.pos)
            pending[-1] -= 1
            kind, count = self.header()
            if kind == "str":
                self.text(count)
            elif kind in ("bin", "ext"):
                self.take(count, f"a {kind} payload")
            elif kind in ("array", "map") and count:
                pending.append(count * (2 if kind == "map" else 1))
            while pending and pending[-1] == 0:
                pending.pop()


class _Place:
    def __init__(self) -> None:
        self.event_index: int | None = None
        self.field: str | None = None
        self.event_type: str | None = None


def _scan_event(reader: _Reader, place: _Place) -> None:
    start = reader.pos
    kind, count = reader.header()
    if kind != "map":
        reader.pos = start  # not an event map: skip it whole
        reader.skip()
        return
    previous = None
    for number in range(count):
        place.field = f"key {number}" + (f" (after {previous})" if previous else "")
        key_start = reader.pos
        key_kind, key_count = reader.header()
        if key_kind != "str":
            reader.pos = key_start
            reader.skip()
            reader.skip()
            continue
        key = reader.text(key_count)
        place.field = previous = key
        if key == "type":
            value_start = reader.pos
            value_kind, value_count = reader.header()
            if value_kind == "str":
                place.event_type = reader.text(value_count)
                continue
            reader.pos = value_start
        reader.skip()


def _scan(reader: _Reader, place: _Place) -> None:
    kind, count = reader.header()
    if kind != "array":
        reader.pos = 0
        reader.skip()
        return
    for index in range(count):
        place.field = _BATCH_FIELDS[index] if index < len(_BATCH_FIELDS) else f"[{index}]"
        if index != 1:
            reader.skip()
            continue
        start = reader.pos
        events_kind, num_events = reader.header()
        if events_kind != "array":
            reader.pos = start
            reader.skip()
            continue
        for event_index in range(num_events):
            place.event_index, place.field, place.event_type = event_index, None, None
            _scan_event(reader, place)
        place.event_index, place.event_type = None, None


def scan_batch(payload: bytes) -> ScanProblem | None:
    """The first problem in ``payload`` that makes it not one MessagePack value, or None."""
    reader = _Reader(payload)
    place = _Place()
    try:
        _scan(reader, place)
    except _Stop as stop:
        return ScanProblem(
            kind=stop.kind,
            reason=stop.reason,
            offset=stop.offset,
            event_index=place.event_index,
            field=place.field,
            event_type=place.event_type,
        )
    if reader.pos != len(payload):
        extra = len(payload) - reader.pos
        return ScanProblem(
            kind="malformed",
            reason=f"{extra} bytes after the batch",
            offset=reader.pos,
            event_index=None,
            field=None,
            event_type=None,
        )
    return None


def event_type_at(payload: bytes, event_index: int) -> str | None:
    """The ``type`` tag of event ``event_index`` of a well-formed payload, if it has one."""
    reader = _Reader(payload)
    place = _Place()
    try:
        kind, count = reader.header()
        if kind != "array" or count < 2:
            return None
        reader.skip()  # ts
        events_kind, num_events = reader.header()
        if events_kind != "array" or event_index >= num_events:
            return None
        for _ in range(event_index):
            reader.skip()
        _scan_event(reader, place)
    except _Stop:
        return place.event_type
    return place.event_type
