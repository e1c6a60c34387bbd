"""vLLM's ZMQ framing around a batch, and kvpure's capture file format.

**PUB message** (``ZmqEventPublisher``): three frames ``[topic, seq,
payload]``: the topic in UTF-8 (empty by default), the batch's sequence
number as 8 bytes big-endian (0, 1, 2, ... per publisher), the payload.

**Replay** (the publisher's ROUTER socket): a client (DEALER) sends ``["",
start_seq]`` (8 bytes big-endian); the ROUTER sees ``[client_id, "",
start_seq]``. The answer is one ``[client_id, "", topic, seq, payload]`` per
buffered batch with ``seq >= start_seq``, then the end marker ``[client_id,
"", "", ff ff ff ff ff ff ff ff, ""]`` (a DEALER receives them without
``client_id``).

**Capture** (kvpure's own file format, what ``kvpure events decode`` reads):
records, each a 4-byte big-endian length followed by that many bytes of one
payload (the third frame of a PUB message). A file that starts with a
MessagePack array header instead (``0x90``-``0x9f``, ``0xdc``, ``0xdd``) is
one bare payload. No record of a capture can start that way: its first
byte would make the length at least 2.4 GB, past :data:`MAX_RECORD_BYTES`.
Topic and seq are not kept; ``kvpure events listen`` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvpure.events.errors import EventCaptureError, EventFrameError, KVEventArgumentTypeError
from kvpure.events.profiles import EventProfile
from kvpure.events.types import KVEventBatch
from kvpure.events.wire import Payload, decode_batch, encode_batch

SEQ_NUM_BYTES = 8
REPLAY_END_SEQ = 2**64 - 1
"""The seq of the replay end marker (vLLM writes -1 as 8 signed big-endian bytes)."""

CAPTURE_LENGTH_BYTES = 4
MAX_RECORD_BYTES = 1 << 30
"""The largest payload a capture record may hold (1 GiB)."""

_ARRAY_HEADERS = frozenset((*range(0x90, 0xA0), 0xDC, 0xDD))


@dataclass(frozen=True, slots=True, kw_only=True)
class EventMessage:
    """One published batch with its topic and sequence number."""

    topic: str
    seq: int
    batch: KVEventBatch

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str):
            raise KVEventArgumentTypeError(argument="topic", expected="str", value=self.topic)
        _check_seq("seq", self.seq)
        if not isinstance(self.batch, KVEventBatch):
            raise KVEventArgumentTypeError(
                argument="batch", expected="KVEventBatch", value=self.batch
            )


def _check_seq(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KVEventArgumentTypeError(argument=name, expected="int", value=value)
    if not 0 <= value < REPLAY_END_SEQ:
        raise EventFrameError(reason=f"{name} {value} is outside 0..2**64-2", field=name)
    return value


def _check_frames(frames: object) -> Sequence[Payload]:
    if not isinstance(frames, list | tuple) or not all(
        isinstance(frame, bytes | bytearray | memoryview) for frame in frames
    ):
        raise KVEventArgumentTypeError(
            argument="frames", expected="a list or tuple of bytes frames", value=frames
        )
    return frames


def _check_payload(name: str, value: object) -> Payload:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise KVEventArgumentTypeError(
            argument=name, expected="bytes, bytearray or memoryview", value=value
        )
    return value


def _seq(frame: Payload) -> int:
    if len(frame) != SEQ_NUM_BYTES:
        raise EventFrameError(
            reason=f"the seq frame has {len(frame)} bytes; vLLM sends {SEQ_NUM_BYTES} (big-endian)"
        )
    return int.from_bytes(frame, "big")


def _topic(frame: Payload) -> str:
    try:
        return bytes(frame).decode("utf-8")
    except UnicodeDecodeError:
        raise EventFrameError(reason="the topic frame is not UTF-8") from None


def decode_message(
    frames: Sequence[Payload], *, profile: EventProfile | None = None, strict: bool = False
) -> EventMessage:
    """A PUB message ``[topic, seq, payload]`` or a replay answer (frames before those
    three, the ROUTER's ``client_id`` and ``""``, are ignored). ``profile`` and
    ``strict`` are :func:`~kvpure.events.wire.decode_batch`'s."""
    frames = _check_frames(frames)
    if len(frames) < 3:
        raise EventFrameError(reason=f"{len(frames)} frames; vLLM sends [topic, seq, payload]")
    topic, seq, payload = frames[-3:]
    if is_replay_end(frames):
        raise EventFrameError(reason="this is the replay end marker, not a batch")
    return EventMessage(
        topic=_topic(topic),
        seq=_seq(seq),
        batch=decode_batch(payload, profile=profile, strict=strict),
    )


def encode_message(message: EventMessage, *, profile: EventProfile) -> tuple[bytes, bytes, bytes]:
    """The three frames ``profile``'s publisher sends for ``message``."""
    if not isinstance(message, EventMessage):
        raise KVEventArgumentTypeError(argument="message", expected="EventMessage", value=message)
    return (
        message.topic.encode("utf-8"),
        message.seq.to_bytes(SEQ_NUM_BYTES, "big"),
        encode_batch(message.batch, profile=profile),
    )


def encode_replay_request(start_seq: int) -> tuple[bytes, bytes]:
    """What a DEALER sends to ask for every buffered batch from ``start_seq`` on."""
    _check_seq("start_seq", start_seq)
    return b"", start_seq.to_bytes(SEQ_NUM_BYTES, "big")


def is_replay_end(frames: Sequence[Payload]) -> bool:
    """Whether ``frames`` end with the replay end marker ``["", ff*8, ""]``."""
    frames = _check_frames(frames)
    if len(frames) < 3:
        return False
    topic, seq, payload = frames[-3:]
    return len(topic) == 0 and len(payload) == 0 and bytes(seq) == b"\xff" * SEQ_NUM_BYTES


def capture_record(payload: Payload) -> bytes:
    """One capture record: the 4-byte big-endian length, then the payload."""
    _check_payload("payload", payload)
    if len(payload) > MAX_RECORD_BYTES:
        raise EventCaptureError(
            record_index=0, offset=0, reason=f"{len(payload)} bytes exceed {MAX_RECORD_BYTES}"
        )
    return len(payload).to_bytes(CAPTURE_LENGTH_BYTES, "big") + bytes(payload)


def split_capture(data: bytes) -> tuple[bytes, ...]:
    """The payloads in ``data``: a capture's records, or ``data`` itself when it is
    one bare payload (it starts with a MessagePack array header)."""
    data = bytes(_check_payload("data", data))
    if data and data[0] in _ARRAY_HEADERS:
        return (data,)
    payloads: list[bytes] = []
    offset = 0
    while offset < len(data):
        index = len(payloads)
        if offset + CAPTURE_LENGTH_BYTES > len(data):
            raise EventCaptureError(
                record_index=index,
                offset=offset,
                reason=f"{len(data) - offset} bytes left, a length prefix has "
                f"{CAPTURE_LENGTH_BYTES}",
            )
        length = int.from_bytes(data[offset : offset + CAPTURE_LENGTH_BYTES], "big")
        start = offset + CAPTURE_LENGTH_BYTES
        if length > MAX_RECORD_BYTES:
            raise EventCaptureError(
                record_index=index,
                offset=offset,
                reason=f"length {length} exceeds {MAX_RECORD_BYTES} bytes; "
                "not a capture (4-byte big-endian length + payload) nor a payload",
            )
        if start + length > len(data):
            raise EventCaptureError(
                record_index=index,
                offset=offset,
                reason=f"the record says {length} bytes, {len(data) - start} are left",
            )
        payloads.append(data[start : start + length])
        offset = start + length
    return tuple(payloads)
