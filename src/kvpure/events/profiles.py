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

from kvpure.events.errors import KVEventArgumentTypeError, UnknownEventProfileError
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

    def __post_init__(self) -> None:
        for name in ("name", "vllm_version"):
            if not isinstance(getattr(self, name), str):
                raise KVEventArgumentTypeError(
                    argument=f"EventProfile.{name}", expected="str", value=getattr(self, name)
                )
        if not isinstance(self.hash_profile, VllmHashProfile):
            raise KVEventArgumentTypeError(
                argument="EventProfile.hash_profile",
                expected="VllmHashProfile",
                value=self.hash_profile,
            )
        if not isinstance(self.event_fields, tuple) or not all(
            isinstance(entry, tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], tuple)
            and all(isinstance(field, str) for field in entry[1])
            for entry in self.event_fields
        ):
            raise KVEventArgumentTypeError(
                argument="EventProfile.event_fields",
                expected="a tuple of (event type, tuple of field names) pairs",
                value=self.event_fields,
            )

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
"""Every distinct wire format by name, oldest first."""

EVENT_PROFILE_ALIASES: Mapping[str, EventProfile] = MappingProxyType(
    {"vllm-0.34": VLLM_0_33_EVENTS}
)
"""Releases whose wire is an older release's: ``vllm/distributed/kv_events.py`` is
identical in 0.33.0 and 0.34.0, so 0.34's frames are 0.33's byte for byte."""

EVENT_PROFILE_NAMES: tuple[str, ...] = (*EVENT_PROFILES, *EVENT_PROFILE_ALIASES)
"""Every name :func:`get_event_profile` accepts (the CLI's ``--profile`` choices)."""


def get_event_profile(name: str) -> EventProfile:
    """The profile called ``name``: ``"vllm-0.26"``, ``"vllm-0.33"`` or ``"vllm-0.34"``
    (an alias of ``"vllm-0.33"``: the same wire)."""
    if not isinstance(name, str):
        raise KVEventArgumentTypeError(argument="name", expected="a profile name", value=name)
    profile = EVENT_PROFILES.get(name) or EVENT_PROFILE_ALIASES.get(name)
    if profile is None:
        raise UnknownEventProfileError(name=name, valid_names=EVENT_PROFILE_NAMES)
    return profile


def extra_fields(profile: EventProfile, event_type: str) -> tuple[str, ...]:
    """The fields kvpure's struct has beyond those of ``profile`` (None in its events)."""
    own = profile.fields_of(event_type)
    return tuple(field for field in _ALL_FIELDS[event_type] if field not in own)
