"""The errors of ``kvpure.events``, under kvpure's one root.

::

    KVPureValueError (ValueError)
    └── KVEventError
        ├── KVEventDecodeError            bytes that cannot be read as KV events
        │   ├── TruncatedEventBatchError      the bytes end inside a value
        │   ├── MalformedEventBatchError      not MessagePack (bad byte, bad UTF-8,
        │   │                                 trailing bytes, nesting too deep)
        │   ├── EmptyEventInputError          no bytes at all
        │   ├── EventFieldTypeError           a value of the wrong type
        │   ├── MissingEventFieldError        a field without default is absent
        │   ├── UnknownEventFieldError        a field the event does not have (strict mode)
        │   │   └── EventFieldNotInProfileError   a field the chosen vLLM version lacks
        │   ├── UnknownEventTypeError         a ``type`` tag vLLM does not send
        │   ├── EventFrameError               a ZMQ multipart message of the wrong shape
        │   └── EventCaptureError             a capture file of the wrong shape
        ├── KVEventEncodeError            a value cannot go on the wire
        └── UnknownEventProfileError      a profile name kvpure does not have
    KVPureError
    └── KVEventArgumentTypeError (TypeError)   a wrong argument type (or a bool, NaN or
                                               out-of-range number for an option)

Every error raised while reading bytes (a payload, a PUB message, a capture) is
a :class:`KVEventDecodeError`. ``EventFieldNotInProfileError``, ``EventFrameError``
and ``EventCaptureError`` are also raised when writing a value that the chosen
version, a frame or a capture record cannot hold.

Decode errors carry where the problem is: ``event_index`` (the index in the
batch's ``events``, None for the batch's own fields), ``field`` (dotted and
indexed below the event, e.g. ``block_hashes[2]``), ``event_type`` (the
event's tag when it could be read) and ``offset`` (a byte offset into the
payload, when known).
"""

from __future__ import annotations

from kvpure.errors import KVPureError, KVPureValueError


class KVEventError(KVPureValueError):
    """Root of the KV-event errors."""


def _text(name: str) -> str:
    """``name`` as is when it prints on one line, else its repr (names come from the data)."""
    return name if name.isprintable() else repr(name)


def _where(event_index: int | None, event_type: str | None, field: str | None) -> str:
    if event_index is None:
        place = "batch"
    else:
        place = f"event {event_index}" + (f" ({_text(event_type)})" if event_type else "")
    return place + (f", field {_text(field)}" if field else "")


class KVEventDecodeError(KVEventError):
    """A payload is not a valid KV event batch; the attributes say where."""

    def __init__(
        self,
        *,
        reason: str,
        event_index: int | None = None,
        field: str | None = None,
        event_type: str | None = None,
        offset: int | None = None,
    ) -> None:
        at = f" (byte {offset})" if offset is not None else ""
        where = _where(event_index, event_type, field)
        super().__init__(f"KV event batch: {where}: {reason}{at}")
        self.reason = reason
        self.event_index = event_index
        self.field = field
        self.event_type = event_type
        self.offset = offset


class TruncatedEventBatchError(KVEventDecodeError):
    """The bytes end inside a value (a cut frame, or a length larger than the data)."""


class MalformedEventBatchError(KVEventDecodeError):
    """The bytes are not one MessagePack value (a reserved byte, invalid UTF-8,
    trailing bytes after the batch, nesting deeper than any event has)."""


class EventFieldTypeError(KVEventDecodeError):
    """A value has a type vLLM's schema does not allow there."""


class MissingEventFieldError(KVEventDecodeError):
    """A field without a default (vLLM writes it even when it is None) is absent."""


class UnknownEventFieldError(KVEventDecodeError):
    """An event holds a key that no event of any kvpure profile has."""


class UnknownEventTypeError(KVEventDecodeError):
    """An event's ``type`` tag is none of BlockStored, BlockRemoved, AllBlocksCleared."""


class EventFieldNotInProfileError(UnknownEventFieldError):
    """An event sets a field that the chosen vLLM version's events do not have.

    Raised when decoding with an explicit profile in strict mode, and when
    encoding: a ``vllm-0.26`` BlockStored has no ``ownership``, ``session_id`` or
    ``lookahead_token_ids``.
    """

    def __init__(self, *, profile: str, event_index: int, event_type: str, field: str) -> None:
        super().__init__(
            reason=f"{event_type} of {profile} does not have this field; choose a profile "
            "that has it, leave it None, or decode without strict mode (it is then dropped "
            "and reported)",
            event_index=event_index,
            field=field,
            event_type=event_type,
        )
        self.profile = profile


class KVEventEncodeError(KVEventError):
    """An event value cannot be written as vLLM writes it (``reason`` says why)."""

    def __init__(self, *, reason: str) -> None:
        super().__init__(f"cannot encode the KV event batch: {reason}")
        self.reason = reason


class EventFrameError(KVEventDecodeError):
    """A ZMQ multipart message is not shaped as vLLM's publisher sends it."""

    def __init__(self, *, reason: str, field: str | None = None) -> None:
        KVEventError.__init__(self, f"KV event message: {reason}")
        self.reason = reason
        self.event_index = None
        self.field = field
        self.event_type = None
        self.offset = None


class EventCaptureError(KVEventDecodeError):
    """A capture file is not a sequence of length-prefixed frames."""

    def __init__(self, *, record_index: int, offset: int, reason: str) -> None:
        KVEventError.__init__(self, f"capture record {record_index} at byte {offset}: {reason}")
        self.record_index = record_index
        self.offset = offset
        self.reason = reason
        self.event_index = None
        self.field = None
        self.event_type = None


class EmptyEventInputError(KVEventDecodeError):
    """The input holds no bytes at all (an empty file or standard input)."""

    def __init__(self, *, source: str) -> None:
        KVEventError.__init__(
            self,
            f"{source}: the input is empty; expected one payload or a capture "
            "(4-byte big-endian length + payload, repeated)",
        )
        self.reason = "empty input"
        self.source = source
        self.event_index = None
        self.field = None
        self.event_type = None
        self.offset = None


class UnknownEventProfileError(KVEventError):
    """A KV-event profile name kvpure does not have."""

    def __init__(self, *, name: str, valid_names: tuple[str, ...]) -> None:
        super().__init__(
            f"unknown KV event profile {name!r}; choose one of {', '.join(valid_names)}"
        )
        self.name = name
        self.valid_names = valid_names


class KVEventArgumentTypeError(KVPureError, TypeError):
    """A function or value of ``kvpure.events`` was given an argument of the wrong type
    (or a bool for a number, or a value out of range); ``argument`` names it
    (``BlockStored.block_size``, ``payload``)."""

    def __init__(
        self, *, argument: str, expected: str, value: object, reason: str | None = None
    ) -> None:
        if reason is None:
            got = type(value).__name__
            if isinstance(value, bool | int | float):
                got = f"{got} {value!r}"
            reason = f"expected {expected}, got {got}"
        super().__init__(f"{argument}: {reason}")
        self.argument = argument
        self.expected = expected
        self.value = value
