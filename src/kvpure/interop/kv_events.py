"""KV events in the JSON shape of the goldens (``kv_events.json``, ``cache_replay``).

An event is ``{"type": <class name>, <every field of its profile, in order>}``
with block hashes as ints (64-bit hashes) or lowercase hex (digest bytes),
extra-key tuples as arrays and bytes inside extra keys as ``{"$bin": hex}``.
A batch is ``{"ts", "data_parallel_rank", "events"}``.

:func:`event_from_json` reads that shape (keys it does not know, like the
goldens' ``msgpack_hex``, are ignored; fields with a default may be absent)
and raises :class:`~kvpure.errors.InvalidFieldError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvpure.errors import InvalidFieldError
from kvpure.events.profiles import EventProfile
from kvpure.events.types import (
    EVENT_TYPES,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    ExtraKey,
    KVEvent,
    KVEventBatch,
)

_BIN = "$bin"
_MAX_DEPTH = 16


def _hash_to_json(value: int | bytes) -> object:
    return value.hex() if isinstance(value, bytes) else value


def _key_to_json(value: object) -> object:
    if isinstance(value, tuple):
        return [_key_to_json(item) for item in value]
    if isinstance(value, bytes):
        return {_BIN: value.hex()}
    return value


def _field_to_json(name: str, value: object) -> object:
    if value is None:
        return None
    if name == "parent_block_hash" and isinstance(value, int | bytes):
        return _hash_to_json(value)
    if not isinstance(value, tuple):
        return value
    if name == "block_hashes":
        return [_hash_to_json(h) for h in value]
    if name == "extra_keys":
        return [None if keys is None else _key_to_json(keys) for keys in value]
    if name == "lookahead_token_ids":
        return [list(tokens) for tokens in value]
    return list(value)


def event_to_json(event: KVEvent, profile: EventProfile) -> dict[str, object]:
    """``event`` as the goldens write it: its type, then ``profile``'s fields in order."""
    result: dict[str, object] = {"type": type(event).__name__}
    for name in profile.fields_of(type(event).__name__):
        result[name] = _field_to_json(name, getattr(event, name))
    return result


def batch_to_json(batch: KVEventBatch, profile: EventProfile) -> dict[str, object]:
    """``{"ts", "data_parallel_rank", "events"}`` with each event in the goldens' shape."""
    return {
        "ts": batch.ts,
        "data_parallel_rank": batch.data_parallel_rank,
        "events": [event_to_json(event, profile) for event in batch.events],
    }


# --- reading ------------------------------------------------------------------------


def _fail(field: str, value: object, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=field, value=value, reason=reason)


def _int(field: str, value: object) -> int:
    if type(value) is not int:
        raise _fail(field, value, "expected an integer")
    return value


def _opt_int(field: str, value: object) -> int | None:
    return None if value is None else _int(field, value)


def _opt_str(field: str, value: object) -> str | None:
    if value is not None and type(value) is not str:
        raise _fail(field, value, "expected a string or null")
    return value


def _hash(field: str, value: object) -> int | bytes:
    if type(value) is int:
        return value
    if type(value) is str:
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise _fail(field, value, "expected an int or the digest in hex") from None
    raise _fail(field, value, "expected an int or the digest in hex")


def _list(field: str, value: object) -> list[Any]:
    if type(value) is not list:
        raise _fail(field, value, "expected a list")
    return value


def _key(field: str, value: object, depth: int) -> object:
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            raise _fail(field, value, f"extra keys nest deeper than {_MAX_DEPTH} levels")
        return tuple(_key(f"{field}[{i}]", item, depth + 1) for i, item in enumerate(value))
    if isinstance(value, Mapping):
        if set(value) == {_BIN} and isinstance(value[_BIN], str):
            try:
                return bytes.fromhex(value[_BIN])
            except ValueError:
                pass
        raise _fail(field, value, 'expected a key: string, number, array or {"$bin": hex}')
    return value


def _extra_keys(field: str, value: object) -> tuple[ExtraKey | None, ...] | None:
    if value is None:
        return None
    result: list[ExtraKey | None] = []
    for index, keys in enumerate(_list(field, value)):
        name = f"{field}[{index}]"
        if keys is None:
            result.append(None)
        else:
            result.append(ExtraKey(_key(name, item, 1) for item in _list(name, keys)))
    return tuple(result)


def _required(data: Mapping[str, object], name: str) -> object:
    if name not in data:
        raise _fail(name, None, f"missing; {data.get('type')} events always carry it")
    return data[name]


def _ints(field: str, value: object) -> tuple[int, ...]:
    return tuple(_int(f"{field}[{i}]", v) for i, v in enumerate(_list(field, value)))


def _opt_int_lists(field: str, value: object) -> tuple[tuple[int, ...], ...] | None:
    if value is None:
        return None
    return tuple(_ints(f"{field}[{i}]", v) for i, v in enumerate(_list(field, value)))


def _hashes(field: str, value: object) -> tuple[int | bytes, ...]:
    return tuple(_hash(f"{field}[{i}]", v) for i, v in enumerate(_list(field, value)))


def event_from_json(data: Mapping[str, object]) -> KVEvent:
    """An event from its JSON form (the goldens' ``events`` entries)."""
    kind = data.get("type")
    if kind == "BlockStored":
        parent = _required(data, "parent_block_hash")
        return BlockStored(
            block_hashes=_hashes("block_hashes", _required(data, "block_hashes")),
            parent_block_hash=None if parent is None else _hash("parent_block_hash", parent),
            token_ids=_ints("token_ids", _required(data, "token_ids")),
            block_size=_int("block_size", _required(data, "block_size")),
            lora_id=_opt_int("lora_id", _required(data, "lora_id")),
            medium=_opt_str("medium", _required(data, "medium")),
            lora_name=_opt_str("lora_name", _required(data, "lora_name")),
            extra_keys=_extra_keys("extra_keys", data.get("extra_keys")),
            group_idx=_opt_int("group_idx", data.get("group_idx")),
            kv_cache_spec_kind=_opt_str("kv_cache_spec_kind", data.get("kv_cache_spec_kind")),
            kv_cache_spec_sliding_window=_opt_int(
                "kv_cache_spec_sliding_window", data.get("kv_cache_spec_sliding_window")
            ),
            locality=_opt_str("locality", data.get("locality")),
            ownership=_opt_str("ownership", data.get("ownership")),
            session_id=_opt_str("session_id", data.get("session_id")),
            lookahead_token_ids=_opt_int_lists(
                "lookahead_token_ids", data.get("lookahead_token_ids")
            ),
        )
    if kind == "BlockRemoved":
        return BlockRemoved(
            block_hashes=_hashes("block_hashes", _required(data, "block_hashes")),
            medium=_opt_str("medium", _required(data, "medium")),
            group_idx=_opt_int("group_idx", data.get("group_idx")),
            locality=_opt_str("locality", data.get("locality")),
            ownership=_opt_str("ownership", data.get("ownership")),
        )
    if kind == "AllBlocksCleared":
        return AllBlocksCleared()
    names = ", ".join(cls.__name__ for cls in EVENT_TYPES)
    raise _fail("type", kind, f"expected one of {names}")
