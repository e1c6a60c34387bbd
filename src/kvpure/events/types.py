"""vLLM's KV cache events as frozen typed values.

The classes carry vLLM's names and fields, in vLLM's order (the wire order):
:class:`BlockStored`, :class:`BlockRemoved`, :class:`AllBlocksCleared` and the
batch :class:`KVEventBatch` ``(ts, events, data_parallel_rank)``. They are the
union of the fields of every vLLM version kvpure knows (0.33's
``ownership``, ``session_id`` and ``lookahead_token_ids`` included, None when
absent); which fields a version has is its
:class:`~kvpure.events.profiles.EventProfile`.

They are msgspec Structs, as vLLM's are, so a payload decodes straight into
them: ``frozen`` (immutable and hashable), sequences as tuples, extra keys as
:class:`ExtraKey` tuples. Equal events compare and hash equal.

Field notes, for a router reading them:

- ``block_hashes`` / ``parent_block_hash``: 64-bit ints (the low 64 bits of
  the digest, read big-endian: vLLM's default
  ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``) or the digest bytes.
- ``token_ids``: the tokens of the blocks, ``block_size`` per block. In groups
  that cache only some blocks (Mamba, sliding window with a block mask), it
  also covers the blocks left out, so ``len(token_ids)`` can exceed
  ``len(block_hashes) * block_size``.
- ``extra_keys``: one entry per block, None for a block without keys; a plain
  request gives ``(None, None, ...)``, not None.
- ``lora_id`` is deprecated in vLLM (``lora_name`` is what is hashed).
- ``lookahead_token_ids`` (0.33+): one tuple of L token ids per block hash, the
  tokens after the block that its hash also covers (EAGLE/MTP servers); None
  without lookahead hashes.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from kvpure.events.errors import KVEventArgumentTypeError

MEDIUM_GPU = "GPU"
"""``medium`` of blocks in GPU memory (both versions)."""
MEDIUM_CPU = "CPU"
"""``medium`` of blocks offloaded to CPU memory."""
MEDIUM_STORAGE = "STORAGE"
"""``medium`` of blocks in an offloading storage tier (0.33; 0.26 had FS/OBJ media)."""

EventHash = int | bytes
"""A block hash as events carry it: a 64-bit int or the digest bytes."""


class ExtraKey(tuple[object, ...]):
    """The extra keys of one block, as published: a tuple of keys.

    A key is a string (LoRA name, cache salt), bytes (prompt-embeddings digest),
    a tuple (``(mm_identifier, offset)``), or another MessagePack scalar. Nested
    arrays are tuples, so the value is hashable. It compares equal to the plain
    tuple with the same items; hash it as ``tuple(key)`` (pickle would record
    the class).
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ExtraKey({tuple.__repr__(self)})"


MAX_EXTRA_KEY_DEPTH = 16
"""Nesting allowed inside one block's extra keys (vLLM's keys nest 2 deep)."""

_KEY_SCALARS = (type(None), bool, int, float, str, bytes)


def _freeze(value: object, depth: int) -> object:
    kind = type(value)
    if kind is list or kind is tuple:
        if depth >= MAX_EXTRA_KEY_DEPTH:
            raise ValueError(f"extra keys nest deeper than {MAX_EXTRA_KEY_DEPTH} levels")
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]  # checked above
        return tuple([_freeze(item, depth + 1) for item in items])
    if kind in _KEY_SCALARS:
        return value
    what = "a map" if kind is dict else f"a value of type {kind.__name__}"
    raise ValueError(
        f"{what} is not an extra key (vLLM's keys are strings, bytes, numbers, arrays)"
    )


_SCALAR_TYPES = frozenset(_KEY_SCALARS)


def extra_key_hook(kind: type, value: object) -> object:
    """msgspec's hook for :class:`ExtraKey`: an array (a list when decoding, a list or
    tuple when a value is built in Python) of hashable keys."""
    if kind is ExtraKey:
        if isinstance(value, list | tuple):
            items: list[object] | tuple[object, ...] = value
            for item in items:  # the common case, flat keys, in one pass
                if type(item) not in _SCALAR_TYPES:
                    return ExtraKey([_freeze(item, 1) for item in items])
            return ExtraKey(items)
        raise ValueError(f"Expected `array | null`, got `{type(value).__name__}`")
    raise TypeError(f"kvpure cannot decode {kind!r}")  # pragma: no cover - no other custom type


class _CheckedStruct(msgspec.StructMeta):
    """Checks every field when a value is built in Python, as decoding does.

    msgspec checks types when it decodes, not when a struct is built by calling its
    class; this metaclass builds it through ``msgspec.convert`` instead, so a wrong
    type (a str block size, a bool as an int, a list where a tuple belongs is
    converted) raises :class:`KVEventArgumentTypeError` naming the field. Decoding
    does not call the class, so it costs decoding nothing.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _build(cls, args, kwargs)


def _build(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    fields: tuple[str, ...] = cls.__struct_fields__
    name = cls.__name__
    if len(args) > len(fields):
        raise KVEventArgumentTypeError(
            argument=name, expected=f"at most {len(fields)} positional fields", value=args
        )
    data = dict(zip(fields, args, strict=False))
    for key, value in kwargs.items():
        if key in data:
            raise KVEventArgumentTypeError(
                argument=f"{name}.{key}", expected="one value (given twice)", value=value
            )
        data[key] = value
    if cls.__struct_config__.array_like:
        unknown = set(data) - set(fields)
        if unknown:
            raise KVEventArgumentTypeError(
                argument=f"{name}.{sorted(unknown)[0]}", expected="a field of " + name, value=None
            )
        defaults = cls.__struct_defaults__
        first_default = len(fields) - len(defaults)
        missing = [f for f in fields[:first_default] if f not in data]
        if missing:
            raise KVEventArgumentTypeError(
                argument=f"{name}.{missing[0]}", expected="a value (required)", value=None
            )
        source: object = [
            data[f] if f in data else defaults[i - first_default] for i, f in enumerate(fields)
        ]
    else:
        source = data
    try:
        value = msgspec.convert(source, type=cls, dec_hook=extra_key_hook)
    except msgspec.ValidationError as err:
        raise _field_error(name, fields, str(err), data) from None
    ts = getattr(value, "ts", 0.0)
    if not math.isfinite(ts):
        raise KVEventArgumentTypeError(
            argument=f"{name}.ts",
            expected="a finite time in seconds",
            value=ts,
            reason=f"expected a finite time in seconds, got {ts!r}",
        )
    return value


def _field_error(
    name: str, fields: tuple[str, ...], text: str, data: dict[str, Any]
) -> KVEventArgumentTypeError:
    reason, _, path = text.partition(" - at `$")
    path = path.rstrip("`")
    field = path.lstrip(".")
    if path.startswith("["):  # an array-like struct: $[i]...
        index, _, rest = path[1:].partition("]")
        if index.isdigit() and int(index) < len(fields):
            field = fields[int(index)] + rest
    for marker in ("unknown field `", "missing required field `"):
        if marker in reason:
            field = reason.split(marker, 1)[1].rstrip("`")
    top = field.split("[", 1)[0].split(".", 1)[0]
    return KVEventArgumentTypeError(
        argument=f"{name}.{field}" if field else name,
        expected=reason,
        value=data.get(top),
        reason=f"{reason} (vLLM's {name} declares it so)",
    )


class KVCacheEvent(
    msgspec.Struct,
    metaclass=_CheckedStruct,
    tag=True,
    omit_defaults=True,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    gc=False,
):
    """Base of the events; on the wire a map whose first key ``type`` is the class name."""


class BlockStored(KVCacheEvent, frozen=True):
    """Full blocks entered the prefix cache (one event per group per caching step)."""

    block_hashes: tuple[int | bytes, ...]
    parent_block_hash: int | bytes | None
    """The hash of the block before the first one; None when the first block starts the
    request (its parent is NONE_HASH)."""
    token_ids: tuple[int, ...]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: tuple[ExtraKey | None, ...] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: tuple[tuple[int, ...], ...] | None = None
    """vLLM 0.33+: per entry of ``block_hashes``, the tokens after that block that
    entered its hash (the server's ``num_hash_lookahead_tokens`` L of them); None
    without lookahead hashes. Written like ``extra_keys``: an array of arrays."""


class BlockRemoved(KVCacheEvent, frozen=True):
    """Cached blocks left the prefix cache: one event per evicted hash and group.

    The hash may still be cached: when a prompt is fully cached, vLLM recomputes
    its last block and caches it again under the same hash, so one hash can have
    two live blocks, and removing one leaves the other.
    """

    block_hashes: tuple[int | bytes, ...]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent, frozen=True):
    """The prefix cache was reset: no hash is cached any more."""


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared
"""Any one event."""

EVENT_TYPES: tuple[type[KVCacheEvent], ...] = (BlockStored, BlockRemoved, AllBlocksCleared)


class KVEventBatch(
    msgspec.Struct,
    metaclass=_CheckedStruct,
    array_like=True,
    omit_defaults=True,
    frozen=True,
    forbid_unknown_fields=True,
    gc=False,
):
    """One published batch: the array ``[ts, events, data_parallel_rank]``.

    ``data_parallel_rank`` is left out of the array when None; vLLM's publisher
    fills in its own rank before encoding, so published batches carry it.
    """

    ts: float
    events: tuple[KVEvent, ...]
    data_parallel_rank: int | None = None


def event_type_name(event: KVCacheEvent) -> str:
    """The event's ``type`` tag (its class name)."""
    return type(event).__name__
