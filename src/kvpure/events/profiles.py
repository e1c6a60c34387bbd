"""What each vLLM version puts on the wire: one frozen profile per version.

A profile lists, per event type, the fields that version's struct declares, in
order (the goldens' ``schema``). Everything else about the bytes follows from
that and from vLLM's encoder (msgspec): a field with a default is left out
when it equals the default, a field without one is always written, and an
event is a map written with a fixmap header when its struct has at most 15
keys (fields plus the ``type`` tag), else with a map16 header (``de 00 nn``)
whatever the number of keys present. So the same 0.26 ``BlockStored`` (12
fields) and 0.33 ``BlockStored`` (15 fields) differ by those two header bytes.

Each profile also names the block-hash rules (:class:`VllmHashProfile`) of
the same release, for the audit. A new vLLM version is a new profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kvpure.events.errors import UnknownEventProfileError
from kvpure.events.types import EVENT_TYPES, KVCacheEvent
from kvpure.hashing.scheme import VLLM_0_26, VLLM_0_33, VllmHashProfile

FIXMAP_MAX_KEYS = 15
"""msgspec writes a struct as a fixmap when it has at most this many keys."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventProfile:
    """The KV-event wire format of one vLLM release."""

    name: str
    vllm_version: str
    event_fields: tuple[tuple[str, tuple[str, ...]], ...]
    """Per event ``type``: its fields in declaration (wire) order."""
    hash_profile: VllmHashProfile

    def fields_of(self, event_type: str) -> tuple[str, ...]:
        """The fields of ``event_type`` in this version, in wire order."""
        for name, fields in self.event_fields:
            if name == event_type:
                return fields
        return ()

    def uses_map16(self, event_type: str) -> bool:
        """Whether vLLM's encoder writes this event with a map16 header."""
        return len(self.fields_of(event_type)) + 1 > FIXMAP_MAX_KEYS


def _all_fields(cls: type[KVCacheEvent]) -> tuple[str, ...]:
    return tuple(cls.__struct_fields__)


_ALL_FIELDS = {cls.__name__: _all_fields(cls) for cls in EVENT_TYPES}


def _prefix(event_type: str, last_field: str | None) -> tuple[str, ...]:
    fields = _ALL_FIELDS[event_type]
    return fields if last_field is None else fields[: fields.index(last_field) + 1]


VLLM_0_26_EVENTS = EventProfile(
    name="vllm-0.26",
    vllm_version="0.26.0",
    event_fields=(
        ("BlockStored", _prefix("BlockStored", "locality")),
        ("BlockRemoved", _prefix("BlockRemoved", "locality")),
        ("AllBlocksCleared", ()),
    ),
    hash_profile=VLLM_0_26,
)

VLLM_0_33_EVENTS = EventProfile(
    name="vllm-0.33",
    vllm_version="0.33.0",
    event_fields=(
        ("BlockStored", _prefix("BlockStored", None)),
        ("BlockRemoved", _prefix("BlockRemoved", None)),
        ("AllBlocksCleared", ()),
    ),
    hash_profile=VLLM_0_33,
)

EVENT_PROFILES: Mapping[str, EventProfile] = MappingProxyType(
    {profile.name: profile for profile in (VLLM_0_26_EVENTS, VLLM_0_33_EVENTS)}
)
"""Every profile by name, oldest first."""


def get_event_profile(name: str) -> EventProfile:
    """The profile called ``name`` (``"vllm-0.26"`` or ``"vllm-0.33"``)."""
    try:
        return EVENT_PROFILES[name]
    except KeyError:
        raise UnknownEventProfileError(name=name, valid_names=tuple(EVENT_PROFILES)) from None


def extra_fields(profile: EventProfile, event_type: str) -> tuple[str, ...]:
    """The fields kvpure's struct has beyond those of ``profile`` (None in its events)."""
    own = profile.fields_of(event_type)
    return tuple(field for field in _ALL_FIELDS[event_type] if field not in own)
