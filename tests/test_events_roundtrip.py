"""Any event, not only the goldens': kvpure writes the bytes vLLM's own structs write.

The reference is vLLM's own struct classes, executed from the unpacked wheels
(``tests/vllm_event_structs.py``); where those are absent, the copies below,
declared as the goldens' ``schema`` says (lists, ``Any`` extra keys,
``lookahead_token_ids: list[list[int]]``, the same options). Both directions:
kvpure's bytes equal vLLM's for random kvpure values, and random batches of
vLLM's structs (``lookahead_token_ids`` set) decode and re-encode byte for byte.
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
    get_event_profile,
)
from kvpure.interop.kv_events import event_from_json, event_to_json
from tests.vllm_event_structs import vllm_event_structs

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
    lookahead_token_ids: list[list[int]] | None = None


class _Removed026(_Event, tag="BlockRemoved"):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None


class _Removed033(_Removed026, tag="BlockRemoved"):
    ownership: str | None = None


class _Cleared(_Event, tag="AllBlocksCleared"):
    pass


_COPIES: dict[str, dict[type, Any]] = {
    "vllm-0.26": {BlockStored: _Stored026, BlockRemoved: _Removed026, AllBlocksCleared: _Cleared},
    "vllm-0.33": {BlockStored: _Stored033, BlockRemoved: _Removed033, AllBlocksCleared: _Cleared},
}


def _reference(name: str) -> tuple[dict[type, Any], Any]:
    """Per kvpure class, vLLM's class of that release, and vLLM's batch class."""
    real = vllm_event_structs(name)
    if real is None:
        return _COPIES[name], _Batch
    classes: dict[type, Any] = {
        BlockStored: real.BlockStored,
        BlockRemoved: real.BlockRemoved,
        AllBlocksCleared: real.AllBlocksCleared,
    }
    return classes, real.KVEventBatch


_REFERENCE = {name: _reference(name) for name in ("vllm-0.26", "vllm-0.33", "vllm-0.34")}


def _as_vllm(value: object) -> object:
    """kvpure's tuples as the lists vLLM's structs hold (extra keys stay tuples)."""
    if isinstance(value, tuple) and not isinstance(value, ExtraKey):
        return [_as_vllm(item) for item in value]
    return value


def _reference_bytes(batch: KVEventBatch, profile: EventProfile | str) -> bytes:
    classes, batch_class = _REFERENCE[profile if isinstance(profile, str) else profile.name]
    events = []
    for event in batch.events:
        cls = classes[type(event)]
        fields = {f: _as_vllm(getattr(event, f)) for f in cls.__struct_fields__}
        events.append(cls(**fields))
    reference = batch_class(ts=batch.ts, events=events, data_parallel_rank=batch.data_parallel_rank)
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


_LOOKAHEAD = st.none() | st.lists(
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3).map(tuple), max_size=4
).map(tuple)


def _stored(newer: bool) -> st.SearchStrategy[BlockStored]:
    extra = {
        "ownership": _TEXT if newer else st.none(),
        "session_id": _TEXT if newer else st.none(),
        "lookahead_token_ids": _LOOKAHEAD if newer else st.none(),
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
        ts=st.floats(allow_nan=False, allow_infinity=False),
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


@st.composite
def _lookahead_stored(draw: st.DrawFn) -> BlockStored:
    """A 0.33/0.34 BlockStored of a lookahead server: L tokens per block hash."""
    event = draw(_stored(newer=True))
    lookahead = draw(st.integers(1, 3))
    tokens = st.integers(-(2**31), 2**31 - 1)
    lists = draw(
        st.lists(
            st.lists(tokens, min_size=lookahead, max_size=lookahead).map(tuple),
            min_size=len(event.block_hashes),
            max_size=len(event.block_hashes),
        )
    )
    return msgspec.structs.replace(event, lookahead_token_ids=tuple(lists))


_LOOKAHEAD_BATCHES = st.builds(
    KVEventBatch,
    ts=st.floats(allow_nan=False, allow_infinity=False),
    events=st.lists(_lookahead_stored() | _removed(newer=True), min_size=1, max_size=4).map(tuple),
    data_parallel_rank=_INT,
)


@given(batch=_LOOKAHEAD_BATCHES)
def test_vllm_batches_with_lookahead_round_trip_byte_for_byte(batch: KVEventBatch) -> None:
    # vLLM's own classes (0.33 and 0.34) write the payload; kvpure reads it and writes it back
    for name in ("vllm-0.33", "vllm-0.34"):
        payload = _reference_bytes(batch, name)
        profile = get_event_profile(name)
        decoded = decode_batch(payload, profile=profile, strict=True)
        assert decoded == batch
        assert encode_batch(decoded, profile=profile) == payload
        for event in decoded.events:
            if isinstance(event, BlockStored) and event.lookahead_token_ids is not None:
                assert len(event.lookahead_token_ids) == len(event.block_hashes)
                assert all(type(tokens) is tuple for tokens in event.lookahead_token_ids)
        detected = decode_and_detect(payload).profiles
        told = any(
            getattr(e, "ownership", None) is not None or isinstance(e, BlockStored)
            for e in batch.events
        )
        assert detected == ((VLLM_0_33_EVENTS,) if told else (VLLM_0_26_EVENTS, VLLM_0_33_EVENTS))


@given(batch=_batches(newer=False))
def test_vllm_026_batches_round_trip_byte_for_byte(batch: KVEventBatch) -> None:
    payload = _reference_bytes(batch, "vllm-0.26")
    decoded = decode_batch(payload, profile=VLLM_0_26_EVENTS, strict=True)
    assert encode_batch(decoded, profile=VLLM_0_26_EVENTS) == payload
