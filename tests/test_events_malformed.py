"""Malformed batches: a typed error naming the event and field, never a crash, never
an event dropped.

A corpus of hand-made bad payloads (each with the error class, event index and
field it must report), every truncation of a golden payload, and random byte
changes (hypothesis) compared with a schema-less MessagePack decode.
"""

from __future__ import annotations

import contextlib
import json
import pickle
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.events import (
    VLLM_0_26_EVENTS,
    EventFieldTypeError,
    KVEventDecodeError,
    MalformedEventBatchError,
    MissingEventFieldError,
    TruncatedEventBatchError,
    UnknownEventFieldError,
    UnknownEventTypeError,
    decode_batch,
    encode_batch,
)
from kvpure.events.scan import MAX_DEPTH, scan_batch
from tests.conftest import GOLDEN_026, GOLDEN_033

_E = msgspec.msgpack.encode
STORED: dict[str, object] = {
    "type": "BlockStored",
    "block_hashes": [1, 2],
    "parent_block_hash": None,
    "token_ids": [1, 2, 3, 4],
    "block_size": 2,
    "lora_id": None,
    "medium": "GPU",
    "lora_name": None,
    "extra_keys": [None, None],
}
REMOVED: dict[str, object] = {"type": "BlockRemoved", "block_hashes": [1], "medium": "GPU"}
FLOAT_TS = b"\xcb" + b"\x00" * 8


def _batch(*events: object, ts: object = 1.0) -> bytes:
    return _E([ts, list(events), 0])


def _with(**fields: object) -> dict[str, object]:
    return {**STORED, **fields}


def _without(name: str) -> dict[str, object]:
    return {k: v for k, v in STORED.items() if k != name}


def _golden_payloads() -> list[bytes]:
    payloads = []
    for path in (GOLDEN_026, GOLDEN_033):
        golden = json.loads((path / "kv_events.json").read_text())
        for case in golden["cases"].values():
            payloads += [bytes.fromhex(b["frames_hex"][2]) for b in case["batches"]]
    return payloads


GOLDEN_PAYLOADS = _golden_payloads()

# (name, payload, error class, event_index, field)
CORPUS: list[tuple[str, bytes, type[KVEventDecodeError], int | None, str | None]] = [
    ("empty", b"", TruncatedEventBatchError, None, None),
    ("cut in ts", b"\x93\xcb\x00\x00", TruncatedEventBatchError, None, "ts"),
    ("cut in event 1", _batch(REMOVED, STORED)[:-3], TruncatedEventBatchError, 1, "extra_keys"),
    ("cut in a key", _batch(REMOVED, STORED)[:-5], TruncatedEventBatchError, 1,
     "key 8 (after lora_name)"),
    ("cut after a key", _batch(REMOVED)[:-4], TruncatedEventBatchError, 0, "medium"),
    ("huge events array", b"\x93" + FLOAT_TS + b"\xdd\xff\xff\xff\xff" + _E(REMOVED),
     TruncatedEventBatchError, 1, None),
    ("huge string", b"\x93" + FLOAT_TS + b"\x91\x81\xa4type\xdb\xff\xff\xff\xff",
     TruncatedEventBatchError, 0, "type"),
    ("huge map", b"\x93" + FLOAT_TS + b"\x92" + _E(REMOVED) + b"\xdf\xff\xff\xff\xff\xa4type",
     TruncatedEventBatchError, 1, "type"),
    ("huge bin hash", _batch(REMOVED).replace(b"\x91\x01", b"\x91\xc6\xff\xff\xff\xff\x01"),
     TruncatedEventBatchError, 0, "block_hashes"),
    ("reserved byte", _batch(REMOVED).replace(b"\xa3GPU", b"\xc1GPU"), MalformedEventBatchError,
     0, "medium"),
    ("invalid UTF-8", _batch(REMOVED).replace(b"\xa3GPU", b"\xa3\xff\xfeU"),
     MalformedEventBatchError, 0, "medium"),
    ("trailing bytes", _batch(REMOVED) + b"\x00", MalformedEventBatchError, None, None),
    ("deep nesting", b"\x93" + FLOAT_TS + b"\x91\x81\xaaextra_keys" + b"\x91" * 5000 + b"\xc0\x00",
     MalformedEventBatchError, 0, "extra_keys"),
    ("wrong type", _batch(REMOVED, _with(block_size="2")), EventFieldTypeError, 1, "block_size"),
    ("bool is not int", _batch(_with(block_size=True)), EventFieldTypeError, 0, "block_size"),
    ("float is not int", _batch(_with(lora_id=1.0)), EventFieldTypeError, 0, "lora_id"),
    ("str hash", _batch(_with(block_hashes=[1, "2"])), EventFieldTypeError, 0, "block_hashes[1]"),
    ("null token ids", _batch(_with(token_ids=None)), EventFieldTypeError, 0, "token_ids"),
    ("extra keys not a list", _batch(_with(extra_keys="k")), EventFieldTypeError, 0,
     "extra_keys"),
    ("extra key entry a string", _batch(_with(extra_keys=["k"])), EventFieldTypeError, 0,
     "extra_keys[0]"),
    ("map in extra keys", _batch(_with(extra_keys=[[{"a": 1}]])), EventFieldTypeError, 0,
     "extra_keys[0]"),
    ("ext in extra keys", _batch(_with(extra_keys=[[msgspec.msgpack.Ext(5, b"x")]])),
     EventFieldTypeError, 0, "extra_keys[0]"),
    ("too deep extra keys", _batch(_with(extra_keys=[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]])),
     EventFieldTypeError, 0, "extra_keys[0]"),
    ("unknown tag", _batch(REMOVED, {**REMOVED, "type": "BlockMigrated"}),
     UnknownEventTypeError, 1, "type"),
    ("tag not a string", _batch({**REMOVED, "type": 3}), EventFieldTypeError, 0, "type"),
    ("no tag", _batch({k: v for k, v in REMOVED.items() if k != "type"}),
     MissingEventFieldError, 0, "type"),
    ("missing field", _batch(_without("token_ids")), MissingEventFieldError, 0, "token_ids"),
    ("missing null field", _batch(_without("lora_name")), MissingEventFieldError, 0,
     "lora_name"),
    ("unknown field", _batch(REMOVED, {**REMOVED, "colour": 1}), UnknownEventFieldError, 1,
     "colour"),
    ("event not a map", _batch([1, 2]), EventFieldTypeError, 0, None),
    ("events not a list", _E([1.0, None, 0]), EventFieldTypeError, None, "events"),
    ("ts a string", _E(["1", [], 0]), EventFieldTypeError, None, "ts"),
    ("rank a string", _E([1.0, [], "0"]), EventFieldTypeError, None, "data_parallel_rank"),
    ("batch a map", _E({"ts": 1.0}), EventFieldTypeError, None, None),
    ("batch too short", _E([1.0]), EventFieldTypeError, None, None),
    ("batch too long", _E([1.0, [], 0, 1]), UnknownEventFieldError, None, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "error", "event_index", "field"),
    [case[1:] for case in CORPUS],
    ids=[case[0] for case in CORPUS],
)
def test_corpus_gives_typed_errors_with_their_place(
    payload: bytes, error: type[KVEventDecodeError], event_index: int | None, field: str | None
) -> None:
    # strict: the unknown field and the long batch are refused (by default vLLM's
    # decoder, and kvpure's, skip them: tests/test_events_unknown.py)
    with pytest.raises(KVEventDecodeError) as caught:
        decode_batch(payload, strict=True)
    err = caught.value
    assert type(err) is error, err
    assert (err.event_index, err.field) == (event_index, field), err
    assert isinstance(err, ValueError)
    message = str(err)
    assert "\n" not in message
    if event_index is not None:
        assert f"event {event_index}" in message
    if field is not None:
        assert f"field {field}" in message
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.event_index) == (error, message, event_index)


def test_errors_name_the_event_type_when_it_was_read() -> None:
    with pytest.raises(EventFieldTypeError, match=r"event 1 \(BlockStored\), field block_size"):
        decode_batch(_batch(REMOVED, _with(block_size="2")))
    with pytest.raises(TruncatedEventBatchError, match=r"event 0 \(BlockRemoved\)") as err:
        decode_batch(_batch(REMOVED)[:-2])
    assert err.value.offset is not None


@pytest.mark.parametrize("payload", GOLDEN_PAYLOADS[:6] + GOLDEN_PAYLOADS[-6:])
def test_every_truncation_is_a_truncation_error(payload: bytes) -> None:
    for cut in range(len(payload)):
        with pytest.raises(TruncatedEventBatchError) as caught:
            decode_batch(payload[:cut])
        problem = scan_batch(payload[:cut])
        assert problem is not None
        assert caught.value.event_index == problem.event_index
    assert scan_batch(payload) is None


def _raw_events(payload: bytes) -> list[Any] | None:
    try:
        raw = msgspec.msgpack.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        return None
    if isinstance(raw, list) and len(raw) > 1 and isinstance(raw[1], list):
        return raw[1]
    return None


@given(
    index=st.integers(min_value=0, max_value=len(GOLDEN_PAYLOADS) - 1),
    changes=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=4,
    ),
)
def test_changed_bytes_decode_or_fail_typed_and_drop_no_event(
    index: int, changes: list[tuple[int, int]]
) -> None:
    data = bytearray(GOLDEN_PAYLOADS[index])
    for position, value in changes:
        data[position % len(data)] = value
    payload = bytes(data)
    try:
        batch = decode_batch(payload)
    except KVEventDecodeError as err:
        message = str(err)
    else:
        message = ""
    if message:
        assert "\n" not in message
        return
    raw = _raw_events(payload)
    assert raw is not None
    assert len(batch.events) == len(raw)
    assert decode_batch(encode_batch(batch, profile=VLLM_0_26_EVENTS)) == batch


@given(st.binary(max_size=64))
def test_random_bytes_never_crash(payload: bytes) -> None:
    with contextlib.suppress(KVEventDecodeError):
        decode_batch(b"\x93" + FLOAT_TS + payload)


def test_scanner_limits() -> None:
    nested = b"\x93" + FLOAT_TS + b"\x91\x81\xa1x" + b"\x91" * (MAX_DEPTH + 1) + b"\xc0\x00"
    problem = scan_batch(nested)
    assert problem is not None
    assert problem.kind == "malformed"
    assert (problem.event_index, problem.field) == (0, "x")
    assert scan_batch(_E([1.0, [{1: 2, "type": "AllBlocksCleared"}], 0])) is None
    ext = b"\x93" + FLOAT_TS + b"\x91\xc7\x01\x05x\x00"
    assert scan_batch(ext) is None
    assert scan_batch(_E("not an array")) is None


def test_the_nesting_bound_is_64_levels() -> None:
    """The stated bound (``MAX_DEPTH``'s docstring and the problem's text: deeper than 64
    levels is malformed), at literal depths: a field's value of 64 levels (63 arrays
    around a nil) is scanned as well formed, one of 65 is refused."""
    field = b"\x93" + FLOAT_TS + b"\x91\x81\xa1x"
    assert scan_batch(field + b"\x91" * 63 + b"\xc0\x00") is None
    problem = scan_batch(field + b"\x91" * 64 + b"\xc0\x00")
    assert problem is not None
    assert problem.kind == "malformed"
    assert (problem.event_index, problem.field) == (0, "x")
    assert problem.reason == "values nest deeper than 64 levels"
