"""vLLM's KV cache events: the wire format per version, and the hash audit.

- :mod:`kvpure.events.types`: ``BlockStored``, ``BlockRemoved``,
  ``AllBlocksCleared``, ``KVEventBatch`` as frozen values.
- :mod:`kvpure.events.profiles`: what vLLM 0.26 and 0.33 put on the wire
  (0.34's wire is 0.33's: ``vllm-0.34`` is an alias).
- :mod:`kvpure.events.wire`: payload bytes to values and back, byte for byte;
  version detection; typed errors naming the event and field.
- :mod:`kvpure.events.unknown`: fields the events do not declare, skipped and
  named as vLLM's decoder skips them (refused in strict mode).
- :mod:`kvpure.events.frames`: the ZMQ frames around a payload (PUB, replay)
  and kvpure's capture file format.
- :mod:`kvpure.events.audit`: recompute every ``BlockStored`` hash under a
  router's settings and name the setting that explains a mismatch.
- :mod:`kvpure.events.live`: live block copies per hash, as the block pool
  counts them.

``docs/events.md`` is the guide for router developers.
"""

from __future__ import annotations

from kvpure.events.audit import (
    AuditOptions,
    AuditReport,
    EventAudit,
    Explanation,
    HashForm,
    RouterSettings,
    SettingChange,
    audit_batches,
    iter_audit,
)
from kvpure.events.audit_check import AuditStatus, ParentSource
from kvpure.events.errors import (
    EmptyEventInputError,
    EventCaptureError,
    EventFieldNotInProfileError,
    EventFieldTypeError,
    EventFrameError,
    KVEventArgumentTypeError,
    KVEventDecodeError,
    KVEventEncodeError,
    KVEventError,
    MalformedEventBatchError,
    MissingEventFieldError,
    TruncatedEventBatchError,
    UnknownEventFieldError,
    UnknownEventProfileError,
    UnknownEventTypeError,
)
from kvpure.events.frames import (
    REPLAY_END_SEQ,
    EventMessage,
    capture_record,
    decode_message,
    encode_message,
    encode_replay_request,
    is_replay_end,
    split_capture,
)
from kvpure.events.live import LiveBlocks
from kvpure.events.profiles import (
    EVENT_PROFILE_ALIASES,
    EVENT_PROFILE_NAMES,
    EVENT_PROFILES,
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    EventProfile,
    get_event_profile,
)
from kvpure.events.types import (
    MEDIUM_CPU,
    MEDIUM_GPU,
    MEDIUM_STORAGE,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    ExtraKey,
    KVCacheEvent,
    KVEvent,
    KVEventBatch,
)
from kvpure.events.unknown import UnknownField
from kvpure.events.wire import (
    DecodedBatch,
    DetectedBatch,
    decode_and_detect,
    decode_batch,
    decode_report,
    encode_batch,
    encode_event,
)

__all__ = [
    "EVENT_PROFILES",
    "EVENT_PROFILE_ALIASES",
    "EVENT_PROFILE_NAMES",
    "MEDIUM_CPU",
    "MEDIUM_GPU",
    "MEDIUM_STORAGE",
    "REPLAY_END_SEQ",
    "VLLM_0_26_EVENTS",
    "VLLM_0_33_EVENTS",
    "AllBlocksCleared",
    "AuditOptions",
    "AuditReport",
    "AuditStatus",
    "BlockRemoved",
    "BlockStored",
    "DecodedBatch",
    "DetectedBatch",
    "EmptyEventInputError",
    "EventAudit",
    "EventCaptureError",
    "EventFieldNotInProfileError",
    "EventFieldTypeError",
    "EventFrameError",
    "EventMessage",
    "EventProfile",
    "Explanation",
    "ExtraKey",
    "HashForm",
    "KVCacheEvent",
    "KVEvent",
    "KVEventArgumentTypeError",
    "KVEventBatch",
    "KVEventDecodeError",
    "KVEventEncodeError",
    "KVEventError",
    "LiveBlocks",
    "MalformedEventBatchError",
    "MissingEventFieldError",
    "ParentSource",
    "RouterSettings",
    "SettingChange",
    "TruncatedEventBatchError",
    "UnknownEventFieldError",
    "UnknownEventProfileError",
    "UnknownEventTypeError",
    "UnknownField",
    "audit_batches",
    "capture_record",
    "decode_and_detect",
    "decode_batch",
    "decode_message",
    "decode_report",
    "encode_batch",
    "encode_event",
    "encode_message",
    "encode_replay_request",
    "get_event_profile",
    "is_replay_end",
    "iter_audit",
    "split_capture",
]
