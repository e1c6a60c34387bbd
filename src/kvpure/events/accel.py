"""The optional C reader of KV event payloads (``kvpure.events._decode``).

vLLM's payload is read in one pass straight into kvpure's frozen structs, with no
intermediate lists. The reader handles what vLLM's encoder writes; for anything else
(an unknown or repeated key, an int ``ts``, a wrong type, cut bytes) it returns None
and :mod:`kvpure.events.wire` decodes with msgspec, which stays the reference and raises
the typed errors. So the reader changes speed, never a result: the tests decode every
golden and every mutated payload both ways and compare.

:func:`set_accelerated` switches it off for the process (so does
``KVPURE_NO_EXTENSION=1``, read at import); :func:`accelerated` says whether it is in use.
"""

from __future__ import annotations

import os
import typing
from collections.abc import Callable
from types import ModuleType
from typing import Final

from kvpure.events.types import (
    EVENT_TYPES,
    ExtraKey,
    KVCacheEvent,
    KVEventBatch,
)

__all__ = ["accelerated", "built", "current_decode", "reader", "set_accelerated"]

# The field kinds the C reader knows (the K_* numbers of csrc/event_decode.c).
_KINDS: Final[dict[object, int]] = {
    tuple[int | bytes, ...]: 0,
    int | bytes | None: 1,
    tuple[int, ...]: 2,
    int: 3,
    int | None: 4,
    str | None: 5,
    tuple[ExtraKey | None, ...] | None: 6,
    tuple[tuple[int, ...], ...] | None: 7,
}


def _event_layout(cls: type[KVCacheEvent]) -> tuple[object, ...]:
    """``(class, tag, number of required fields, ((name, slot, kind), ...))``."""
    hints = typing.get_type_hints(cls)
    fields: tuple[str, ...] = cls.__struct_fields__
    defaults: tuple[object, ...] = cls.__struct_defaults__
    if any(default is not None for default in defaults):
        raise ValueError(f"{cls.__name__}: a default other than None")
    slots = vars(cls)
    layout = tuple((name, slots[name], _KINDS[hints[name]]) for name in fields)
    tag = cls.__struct_config__.tag
    return (cls, tag, len(fields) - len(defaults), layout)


def _load() -> ModuleType | None:
    try:
        from kvpure.events import _decode
    except ImportError:  # not built: msgspec decodes everything
        return None
    fields = KVEventBatch.__struct_fields__
    if fields != ("ts", "events", "data_parallel_rank") or KVEventBatch.__struct_defaults__ != (
        None,
    ):
        return None  # pragma: no cover - a layout this reader was not written for
    try:
        events = tuple(_event_layout(cls) for cls in EVENT_TYPES)
        batch_slots = tuple(vars(KVEventBatch)[name] for name in fields)
        _decode.configure(KVEventBatch, batch_slots, ExtraKey, events)
    except (KeyError, TypeError, ValueError, RuntimeError):  # pragma: no cover - as above
        return None
    return _decode


_BUILT: Final = _load()
# ``KVPURE_NO_EXTENSION=1`` (read once, at import) runs the pure path, as for hashing.
current_decode: Callable[[bytes], KVEventBatch | None] | None = (
    None if _BUILT is None or os.environ.get("KVPURE_NO_EXTENSION") == "1" else _BUILT.decode
)
"""The C reader's ``decode`` while it is switched on, else None: the one process-wide
switch, which :func:`kvpure.events.wire.decode_batch` reads as one module attribute."""


def built() -> bool:
    """Whether the C reader is built and configured (whether or not it is switched on)."""
    return _BUILT is not None


def accelerated() -> bool:
    """Whether payloads are read by the C reader (built and not switched off)."""
    return current_decode is not None


def set_accelerated(enabled: bool) -> bool:
    """Switch the C reader on or off for this process; returns whether it is now in use."""
    global current_decode  # the one process-wide switch
    current_decode = _BUILT.decode if enabled and _BUILT is not None else None
    return current_decode is not None


def reader() -> Callable[[bytes], KVEventBatch | None] | None:
    """The C reader's ``decode`` (payload bytes -> batch, or None when it does not handle
    them), or None when the reader is not built or switched off."""
    return current_decode
