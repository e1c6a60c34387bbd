"""KV event batches from and to the exact bytes vLLM publishes.

The payload (the third frame of vLLM's PUB message) is
``msgspec.msgpack.Encoder().encode(KVEventBatch)``. kvpure decodes it into its
frozen event values, with its C reader where built (:mod:`kvpure.events.accel`,
faster than msgspec into vLLM's own structs, see ``bench/bench_events.py``) and
with msgspec, the reference, for whatever the reader leaves to it; and encodes
them back to the same bytes, per vLLM version:

- :func:`decode_batch`: bytes to a :class:`KVEventBatch`; :func:`decode_report`
  also names the fields it left out. As in vLLM's decoder, a key no event
  declares (or, with a profile, that version's events lack) is skipped;
  ``strict=True`` refuses it (:class:`UnknownEventFieldError`,
  :class:`EventFieldNotInProfileError`).
- :func:`encode_batch` / :func:`encode_event`: the bytes the given version's
  vLLM writes (a 0.33 ``BlockStored`` has a map16 header, a 0.26 one a fixmap
  header; everything else is the same).
- :func:`decode_and_detect`: the batch and the profiles whose encoder writes
  exactly these bytes.

Anything that is not a valid batch raises a :class:`KVEventDecodeError`
subclass naming the event index and field (and never anything else): cut or
broken bytes, wrong types, unknown ``type`` tags, missing or unknown fields.
What is accepted is what vLLM's own typed decoder accepts (an int ``ts``
reads as a float, any int as a hash, a repeated key keeps its last value,
unknown fields are skipped), except that kvpure also refuses extra-key values
that are maps or extension types, which vLLM never writes. Re-encoding gives vLLM's
bytes for the decoded values: for a payload vLLM wrote, the payload itself.
"""

from __future__ import annotations

import functools
import gc
from dataclasses import dataclass

import msgspec

from kvpure.events import accel
from kvpure.events.errors import (
    EventFieldNotInProfileError,
    KVEventArgumentTypeError,
    KVEventEncodeError,
)
from kvpure.events.profiles import EVENT_PROFILES, FIXMAP_MAX_KEYS, EventProfile
from kvpure.events.scan import _Stop
from kvpure.events.translate import from_broken_bytes, from_validation, is_unknown_field
from kvpure.events.types import (
    EVENT_TYPES,
    KVCacheEvent,
    KVEvent,
    KVEventBatch,
    extra_key_hook,
)
from kvpure.events.unknown import UnknownField, strip_unknown_fields

Payload = bytes | bytearray | memoryview
"""What a payload may be given as (a ZMQ frame's buffer will do)."""

_DECODER = msgspec.msgpack.Decoder(KVEventBatch, dec_hook=extra_key_hook)
_ENCODER = msgspec.msgpack.Encoder()


class _RawBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """The batch layout with pre-encoded events (for headers the profile writes otherwise)."""

    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


def _struct_defaults(cls: type[KVCacheEvent]) -> dict[str, object]:
    return {
        field.name: field.default
        for field in msgspec.structs.fields(cls)
        if field.default is not msgspec.NODEFAULT
    }


@dataclass(frozen=True, slots=True)
class _ProfileRules:
    extras: dict[type, tuple[tuple[str, object], ...]]
    """Per event class: the (field, default) pairs of kvpure's struct the profile lacks."""
    patched: frozenset[type]
    """The event classes whose header the profile writes otherwise than kvpure's struct."""


@functools.cache
def _rules(profile: EventProfile) -> _ProfileRules:
    extras: dict[type, tuple[tuple[str, object], ...]] = {}
    patched: set[type] = set()
    for cls in EVENT_TYPES:
        own = profile.fields_of(cls.__name__)
        defaults = _struct_defaults(cls)
        missing = tuple((f, defaults.get(f)) for f in cls.__struct_fields__ if f not in own)
        if missing:
            extras[cls] = missing
        if profile.uses_map16(cls.__name__) != (len(cls.__struct_fields__) + 1 > FIXMAP_MAX_KEYS):
            patched.add(cls)
    return _ProfileRules(extras=extras, patched=frozenset(patched))


def _check_profile(events: tuple[KVEvent, ...], profile: EventProfile) -> None:
    extras = _rules(profile).extras
    if not extras:
        return
    for index, event in enumerate(events):
        for field, default in extras.get(type(event), ()):
            if getattr(event, field) != default:
                raise EventFieldNotInProfileError(
                    profile=profile.name,
                    event_index=index,
                    event_type=type(event).__name__,
                    field=field,
                )


def _require_profile(profile: object) -> EventProfile:
    if not isinstance(profile, EventProfile):
        raise KVEventArgumentTypeError(argument="profile", expected="EventProfile", value=profile)
    return profile


# --- decoding -----------------------------------------------------------------------

_KNOWN_KEYS: dict[str, frozenset[str]] = {
    cls.__name__: frozenset(("type", *cls.__struct_fields__)) for cls in EVENT_TYPES
}


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A decoded batch and the fields on the wire that its events do not declare."""

    batch: KVEventBatch
    unknown_fields: tuple[UnknownField, ...] = ()
    """Keys no kvpure event has (or, with a profile, that profile's events lack),
    and batch elements past ``data_parallel_rank``: left out, as vLLM's decoder
    leaves them out, in wire order."""


def _decode_tolerant(data: bytes) -> tuple[KVEventBatch, tuple[UnknownField, ...], bytes]:
    try:
        clean, unknown = strip_unknown_fields(data, _KNOWN_KEYS)
    except _Stop as err:
        raise from_broken_bytes(err, data) from None
    try:
        batch: KVEventBatch = _DECODER.decode(clean)
    except msgspec.ValidationError as err:
        raise from_validation(err, clean) from None
    except (msgspec.DecodeError, RecursionError) as err:  # pragma: no cover - scanned above
        raise from_broken_bytes(err, data) from None
    return batch, unknown, clean


def _drop_fields_not_in(
    batch: KVEventBatch, profile: EventProfile, strict: bool
) -> tuple[KVEventBatch, tuple[UnknownField, ...]]:
    """``batch`` with the fields ``profile``'s events lack set back to their defaults
    (refused in strict mode), and those fields."""
    extras = _rules(profile).extras
    if not extras:
        return batch, ()
    dropped: list[UnknownField] = []
    events = list(batch.events)
    for index, event in enumerate(events):
        changed: dict[str, object] = {}
        for field, default in extras.get(type(event), ()):
            if getattr(event, field) != default:
                if strict:
                    raise EventFieldNotInProfileError(
                        profile=profile.name,
                        event_index=index,
                        event_type=type(event).__name__,
                        field=field,
                    )
                changed[field] = default
                dropped.append(UnknownField(index, type(event).__name__, field))
        if changed:
            events[index] = msgspec.structs.replace(event, **changed)
    if not dropped:
        return batch, ()
    return msgspec.structs.replace(batch, events=tuple(events)), tuple(dropped)


def _require_payload(payload: object) -> None:
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise KVEventArgumentTypeError(
            argument="payload", expected="bytes, bytearray or memoryview", value=payload
        )


def _require_flag(name: str, value: object) -> bool:
    if type(value) is not bool:
        raise KVEventArgumentTypeError(argument=name, expected="True or False", value=value)
    return value


def _decode(
    payload: Payload, profile: EventProfile | None, strict: bool
) -> tuple[KVEventBatch, tuple[UnknownField, ...], bytes | None]:
    """The batch, what was skipped, and the bytes decoded when unknown keys were
    stripped from them (None when the payload was read as is)."""
    _require_payload(payload)
    _require_flag("strict", strict)
    if profile is not None:
        profile = _require_profile(profile)
    unknown: tuple[UnknownField, ...] = ()
    clean: bytes | None = None
    try:
        batch = _decode_whole(payload)
    except msgspec.ValidationError as err:
        if strict or not is_unknown_field(err):
            raise from_validation(err, bytes(payload)) from None
        batch, unknown, clean = _decode_tolerant(bytes(payload))
    except (msgspec.DecodeError, RecursionError) as err:
        raise from_broken_bytes(err, bytes(payload)) from None
    if profile is not None:
        batch, dropped = _drop_fields_not_in(batch, profile, strict)
        unknown += dropped
    return batch, unknown, clean


def decode_report(
    payload: Payload, *, profile: EventProfile | None = None, strict: bool = False
) -> DecodedBatch:
    """The batch in ``payload`` and the fields it carries that its events do not declare.

    As vLLM's own decoder does, a key that no event declares (and an element of the
    batch array past ``data_parallel_rank``) is skipped; with ``profile``, so is a
    field that version's events lack (it reads as None). Each is named in
    ``unknown_fields``. With ``strict=True`` they are refused instead:
    :class:`UnknownEventFieldError` (:class:`EventFieldNotInProfileError` for a field
    of another version). Anything else wrong raises a :class:`KVEventDecodeError`
    subclass naming the event index and field.
    """
    batch, unknown, _ = _decode(payload, profile, strict)
    return DecodedBatch(batch, unknown)


def decode_batch(
    payload: Payload, *, profile: EventProfile | None = None, strict: bool = False
) -> KVEventBatch:
    """The batch in ``payload`` (one PUB payload frame), as frozen values.

    Fields the events do not declare are skipped as vLLM's decoder skips them
    (:func:`decode_report` also names them); ``strict=True`` refuses them. Anything
    else wrong raises a :class:`KVEventDecodeError` subclass naming the event index
    and field.
    """
    if type(payload) is bytes and profile is None and strict is False:
        try:  # the fast path: a clean payload, no profile to apply
            read = accel.current_decode
            if read is not None and len(payload) < GC_PAUSE_BYTES:
                # A small payload (vLLM publishes a few events per step): the C reader
                # called at once, as the per-call cost is most of the work there.
                batch = read(payload)
                if batch is not None:
                    return batch
                decoded: KVEventBatch = _DECODER.decode(payload)
                return decoded
            return _decode_whole(payload)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            pass
    return decode_report(payload, profile=profile, strict=strict).batch


GC_PAUSE_BYTES = 1 << 16
"""Payloads from this size on are decoded with the cyclic garbage collector paused."""


def _decode_whole(payload: Payload) -> KVEventBatch:
    """:func:`_decode_now`; for a large payload with the collector paused.

    Decoding allocates many new containers (a tuple per block list, a struct per
    event), and every 700 of them CPython runs a collection, which can free
    nothing: all of them are reachable from the batch being built, and none forms
    a cycle. Pausing it (as ``timeit`` does) saves that work; it is turned back on
    at once, only if it was on, so a thread that turned it off keeps it off.
    """
    if len(payload) < GC_PAUSE_BYTES or not gc.isenabled():
        return _decode_now(payload)
    gc.disable()
    try:
        return _decode_now(payload)
    finally:
        gc.enable()


def _decode_now(payload: Payload) -> KVEventBatch:
    """The C reader of :mod:`kvpure.events.accel` where built and where it handles the
    payload, else ``_DECODER.decode(payload)`` (the reference)."""
    read = accel.reader()
    if read is not None and type(payload) is bytes:
        batch = read(payload)
        if batch is not None:
            return batch
    result: KVEventBatch = _DECODER.decode(payload)
    return result


# --- encoding -----------------------------------------------------------------------


def _fit_header(raw: bytes, profile: EventProfile, event_type: str) -> bytes:
    """``raw`` (msgspec's bytes for kvpure's struct) with the header vLLM's struct gets."""
    if profile.uses_map16(event_type):
        if raw[0] == 0xDE:
            return raw
        return b"\xde" + (raw[0] & 0x0F).to_bytes(2, "big") + raw[1:]
    if raw[0] != 0xDE:
        return raw
    return bytes((0x80 | int.from_bytes(raw[1:3], "big"),)) + raw[3:]


def _encode(value: object) -> bytes:
    try:
        return _ENCODER.encode(value)
    except (msgspec.EncodeError, OverflowError, TypeError, ValueError) as err:
        raise KVEventEncodeError(reason=str(err)) from None


def encode_event(event: KVEvent, *, profile: EventProfile) -> bytes:
    """One event as ``profile``'s vLLM encodes it (``msgspec.msgpack.encode(event)``)."""
    if not isinstance(event, EVENT_TYPES):
        raise KVEventArgumentTypeError(argument="event", expected="a KV event", value=event)
    profile = _require_profile(profile)
    _check_profile((event,), profile)
    return _fit_header(_encode(event), profile, type(event).__name__)


def encode_batch(batch: KVEventBatch, *, profile: EventProfile) -> bytes:
    """The payload ``profile``'s vLLM publishes for ``batch``, byte for byte."""
    if not isinstance(batch, KVEventBatch):
        raise KVEventArgumentTypeError(argument="batch", expected="KVEventBatch", value=batch)
    profile = _require_profile(profile)
    _check_profile(batch.events, profile)
    patched = _rules(profile).patched
    if patched and any(type(event) in patched for event in batch.events):
        events = [
            msgspec.Raw(_fit_header(_encode(event), profile, type(event).__name__))
            for event in batch.events
        ]
        raw = _RawBatch(ts=batch.ts, events=events, data_parallel_rank=batch.data_parallel_rank)
        return _encode(raw)
    return _encode(batch)


# --- detection ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DetectedBatch:
    """A decoded batch and the vLLM versions whose encoder writes exactly its bytes."""

    batch: KVEventBatch
    profiles: tuple[EventProfile, ...]
    """One profile when the bytes tell the version (a BlockStored's header, a newer
    field); every profile when they cannot (only BlockRemoved / AllBlocksCleared);
    none when no vLLM writes these bytes (another encoder, keys in another order).
    Fields no event declares are left out before comparing."""
    unknown_fields: tuple[UnknownField, ...] = ()
    """What the payload carries that no kvpure event declares (left out)."""


def _writes(batch: KVEventBatch, profile: EventProfile, data: bytes) -> bool:
    try:
        return encode_batch(batch, profile=profile) == data
    except EventFieldNotInProfileError:
        return False


def decode_and_detect(payload: Payload, *, strict: bool = False) -> DetectedBatch:
    """Decode ``payload`` and find which profiles' encoders reproduce it byte for byte
    (apart from fields no event declares: they are left out and named, or refused when
    ``strict``)."""
    batch, unknown, clean = _decode(payload, None, strict)
    data = bytes(payload) if clean is None else clean
    profiles = tuple(p for p in EVENT_PROFILES.values() if _writes(batch, p, data))
    return DetectedBatch(batch=batch, profiles=profiles, unknown_fields=unknown)
