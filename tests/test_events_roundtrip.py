"""Any event, not only the goldens': kvpure writes the bytes vLLM's own structs write.

The reference below declares each version's structs as vLLM does (the goldens'
``schema``: lists, ``Any`` extra keys, the same options) and encodes with
msgspec, as vLLM's publisher does. kvpure's bytes must equal them for random
events, decode back to the same values, and be detected as that version.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from kvpure.events import (
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventProfile,
    ExtraKey,
    KVEvent,
    KVEventBatch,
    decode_and_detect,
    decode_batch,
    encode_batch,
)
from kvpure.interop.kv_events import event_from_json, event_to_json

# --- the reference: vLLM's structs as the goldens' schema declares them -------------------


class _Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class _Event(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class _Stored026(_Event, tag="BlockStored"):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None


class _Stored033(_Stored026, tag="BlockStored"):
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[int] | None = None


class _Removed026(_Event, tag="BlockRemoved"):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None


class _Removed033(_Removed026, tag="BlockRemoved"):
    ownership: str | None = None


class _Cleared(_Event, tag="AllBlocksCleared"):
    pass


_REFERENCE = {
    "vllm-0.26": {BlockStored: _Stored026, BlockRemoved: _Removed026, AllBlocksCleared: _Cleared},
    "vllm-0.33": {BlockStored: _Stored033, BlockRemoved: _Removed033, AllBlocksCleared: _Cleared},
}


def _reference_bytes(batch: KVEventBatch, profile: EventProfile) -> bytes:
    classes = _REFERENCE[profile.name]
    events = []
    for event in batch.events:
        cls = classes[type(event)]
        fields = {f: getattr(event, f) for f in cls.__struct_fields__}
        events.append(cls(**fields))
    reference = _Batch(ts=batch.ts, events=events, data_parallel_rank=batch.data_parallel_rank)
    return msgspec.msgpack.Encoder().encode(reference)


# --- random events -----------------------------------------------------------------------

_HASH = st.integers(0, 2**64 - 1) | st.binary(min_size=16, max_size=32)
_TEXT = st.none() | st.text(max_size=6)
_INT = st.none() | st.integers(-(2**63), 2**64 - 1)
_KEY_ITEM = (
    st.text(max_size=6)
    | st.integers(-(2**31), 2**31)
    | st.binary(max_size=32)
    | st.tuples(st.text(max_size=6), st.integers(-64, 64))
)
_KEYS = st.none() | st.lists(
    st.none() | st.lists(_KEY_ITEM, max_size=3).map(ExtraKey), max_size=4
).map(tuple)


def _stored(newer: bool) -> st.SearchStrategy[BlockStored]:
    extra = {
        "ownership": _TEXT if newer else st.none(),
        "session_id": _TEXT if newer else st.none(),
        "lookahead_token_ids": (st.none() | st.lists(st.integers(0, 2**20)).map(tuple))
        if newer
        else st.none(),
    }
    return st.builds(
        BlockStored,
        block_hashes=st.lists(_HASH, max_size=4).map(tuple),
        parent_block_hash=st.none() | _HASH,
        token_ids=st.lists(st.integers(0, 2**32), max_size=16).map(tuple),
        block_size=st.integers(1, 2**16),
        lora_id=_INT,
        medium=_TEXT,
        lora_name=_TEXT,
        extra_keys=_KEYS,
        group_idx=_INT,
        kv_cache_spec_kind=_TEXT,
        kv_cache_spec_sliding_window=_INT,
        locality=_TEXT,
        **extra,
    )


def _removed(newer: bool) -> st.SearchStrategy[BlockRemoved]:
    return st.builds(
        BlockRemoved,
        block_hashes=st.lists(_HASH, max_size=4).map(tuple),
        medium=_TEXT,
        group_idx=_INT,
        locality=_TEXT,
        ownership=_TEXT if newer else st.none(),
    )


def _batches(newer: bool) -> st.SearchStrategy[KVEventBatch]:
    event: st.SearchStrategy[KVEvent] = (
        _stored(newer) | _removed(newer) | st.just(AllBlocksCleared())
    )
    return st.builds(
        KVEventBatch,
        ts=st.floats(allow_nan=False),
        events=st.lists(event, max_size=5).map(tuple),
        data_parallel_rank=_INT,
    )


@given(batch=_batches(newer=False))
def test_026_bytes_are_vllms(batch: KVEventBatch) -> None:
    _check(batch, VLLM_0_26_EVENTS)
    _check(batch, VLLM_0_33_EVENTS)  # every 0.26 event is also a 0.33 event


@given(batch=_batches(newer=True))
def test_033_bytes_are_vllms(batch: KVEventBatch) -> None:
    _check(batch, VLLM_0_33_EVENTS)


def _check(batch: KVEventBatch, profile: EventProfile) -> None:
    payload = encode_batch(batch, profile=profile)
    assert payload == _reference_bytes(batch, profile)
    assert decode_batch(payload, profile=profile) == batch
    detected = decode_and_detect(payload)
    newer = any(
        getattr(e, f, None) is not None
        for e in batch.events
        for f in ("ownership", "session_id", "lookahead_token_ids")
    )
    if newer or any(isinstance(e, BlockStored) for e in batch.events):
        assert detected.profiles == (profile,)
    else:
        assert detected.profiles == (VLLM_0_26_EVENTS, VLLM_0_33_EVENTS)


@given(batch=_batches(newer=True))
def test_the_json_form_round_trips(batch: KVEventBatch) -> None:
    for event in batch.events:
        data = json.loads(json.dumps(event_to_json(event, VLLM_0_33_EVENTS)))
        assert event_from_json(data) == event
