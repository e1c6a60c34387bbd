"""The C reader of KV event payloads gives exactly what msgspec gives (the reference).

Every golden payload of vLLM 0.26, 0.33 and 0.34 is read by the C reader (none is left
to msgspec) into values equal to msgspec's, field by field and type by type; every
truncation, every changed byte and every built edge case either decodes to the same
values both ways or raises the same typed error with the same message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvpure.events.accel as accel
from kvpure.events import (
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    BlockRemoved,
    BlockStored,
    ExtraKey,
    KVEventBatch,
    KVEventDecodeError,
    decode_and_detect,
    decode_batch,
    decode_report,
    encode_batch,
)
from tests.conftest import DATA_DIR

pytestmark = pytest.mark.skipif(not accel.built(), reason="the C reader is not built")


@pytest.fixture(autouse=True)
def _reader_on() -> Iterator[None]:
    """Each test runs with the reader on and leaves the switch as it found it (``make
    unit`` runs the events tests again with it off)."""
    was_on = accel.accelerated()
    accel.set_accelerated(True)
    yield
    accel.set_accelerated(was_on)


_E = msgspec.msgpack.Encoder().encode


def _golden_payloads() -> list[bytes]:
    payloads = []
    for version in ("0.26.0", "0.33.0", "0.34.0"):
        golden = json.loads((DATA_DIR / f"vllm-{version}" / "kv_events.json").read_text())
        for case in golden["cases"].values():
            payloads += [bytes.fromhex(b["frames_hex"][2]) for b in case["batches"]]
    return payloads


GOLDEN_PAYLOADS = _golden_payloads()


def _shape(value: object) -> object:
    """``value`` as nested (type, content) pairs: equal shapes mean equal values of the
    same types all the way down (floats by their bits, so NaN equals NaN)."""
    kind = type(value)
    if isinstance(value, msgspec.Struct):
        fields = value.__struct_fields__
        return (kind, tuple((f, _shape(getattr(value, f))) for f in fields))
    if isinstance(value, tuple):
        return (kind, tuple(_shape(item) for item in value))
    if kind is float:
        return (kind, value.hex())  # type: ignore[attr-defined]  # a float, checked above
    return (kind, value)


def _outcome(payload: bytes, *, on: bool) -> tuple[str, object]:
    accel.set_accelerated(on)
    try:
        return ("ok", _shape(decode_batch(payload)))
    except KVEventDecodeError as err:
        return (type(err).__name__, str(err))
    finally:
        accel.set_accelerated(True)


def _same_both_ways(payload: bytes) -> tuple[str, object]:
    fast = _outcome(payload, on=True)
    assert fast == _outcome(payload, on=False)
    return fast


def _reads(payload: bytes) -> bool:
    """Whether the C reader itself handles ``payload`` (not left to msgspec)."""
    read = accel.reader()
    assert read is not None
    return read(payload) is not None


@pytest.mark.parametrize("index", range(len(GOLDEN_PAYLOADS)))
def test_golden_payloads_read_in_c_as_msgspec_reads_them(index: int) -> None:
    payload = GOLDEN_PAYLOADS[index]
    assert _reads(payload)
    assert _same_both_ways(payload)[0] == "ok"
    for profile in (VLLM_0_26_EVENTS, VLLM_0_33_EVENTS):
        accel.set_accelerated(False)
        slow = decode_report(payload, profile=profile)
        accel.set_accelerated(True)
        assert _shape(decode_report(payload, profile=profile).batch) == _shape(slow.batch)
    assert decode_and_detect(payload).profiles


def test_switch() -> None:
    assert accel.accelerated()
    assert accel.current_decode == accel.reader()
    assert accel.reader() is not None
    assert not accel.set_accelerated(False)
    assert accel.reader() is None
    assert accel.current_decode == accel.reader()
    assert not accel.accelerated()
    assert accel.set_accelerated(True)
    assert accel.current_decode == accel.reader()


def test_small_payload_the_reader_declines_is_decoded_by_msgspec() -> None:
    # An int ts: vLLM's encoder never writes one, the C reader leaves it to msgspec
    # (which reads it as a float), on decode_batch's direct path for small payloads.
    payload = _E([1767225600, [{"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU"}], 0])
    read = accel.reader()
    assert read is not None
    assert read(payload) is None
    batch = decode_batch(payload)
    assert type(batch.ts) is float
    assert batch.ts == 1767225600.0
    assert batch.events == (BlockRemoved(block_hashes=(5,), medium="GPU"),)
    assert _same_both_ways(payload)[0] == "ok"


@pytest.mark.parametrize("index", [0, 5, len(GOLDEN_PAYLOADS) - 1])
def test_every_truncation_fails_alike(index: int) -> None:
    payload = GOLDEN_PAYLOADS[index]
    for cut in range(len(payload)):
        assert not _reads(payload[:cut])
        assert _same_both_ways(payload[:cut])[0] == "TruncatedEventBatchError"
    assert not _reads(payload + b"\x00")
    assert _same_both_ways(payload + b"\x00")[0] != "ok"


@given(
    index=st.integers(min_value=0, max_value=len(GOLDEN_PAYLOADS) - 1),
    changes=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=4,
    ),
)
def test_changed_bytes_give_the_same_outcome(index: int, changes: list[tuple[int, int]]) -> None:
    data = bytearray(GOLDEN_PAYLOADS[index])
    for position, value in changes:
        data[position % len(data)] = value
    _same_both_ways(bytes(data))


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


def _edge_cases() -> Iterator[tuple[str, bytes, bool]]:
    """(name, payload, whether the C reader handles it itself)."""

    def batch(*events: object, ts: object = 1.5, rank: object = 0) -> bytes:
        return _E([ts, list(events), rank])

    def stored(**fields: object) -> dict[str, object]:
        return {**STORED, **fields}

    yield "plain", batch(STORED, REMOVED, {"type": "AllBlocksCleared"}), True
    yield "no rank element", _E([1.5, [REMOVED]]), True
    yield "rank None", batch(REMOVED, rank=None), True
    yield "float32 ts", b"\x93\xca\x3f\xc0\x00\x00\x91" + _E(REMOVED) + b"\x00", True
    yield "int ts", batch(REMOVED, ts=7), False
    yield "nan ts", batch(REMOVED, ts=math.nan), True
    yield "four elements", _E([1.5, [REMOVED], 0, 1]), False
    yield "one element", _E([1.5]), False
    yield "no events", batch(), True
    widths = [0, 127, 128, 255, 256, 65535, 65536, 2**18 - 1, 2**18, 2**32 - 1, 2**32]
    widths += [2**63 - 1, 2**63, 2**64 - 1, -1, -32, -33, -128, -129, -(2**15), -(2**31)]
    widths += [-(2**31) - 1, -(2**63)]
    yield "every int width", batch(stored(block_hashes=widths, token_ids=widths)), True
    yield (
        "bytes hashes",
        batch(stored(block_hashes=[b"\x00" * 32, b""], parent_block_hash=b"x")),
        True,
    )
    yield "long bytes", batch(stored(block_hashes=[b"y" * 70000])), True
    yield "bool token", batch(stored(token_ids=[True])), False
    yield "float token", batch(stored(token_ids=[1.0])), False
    yield "str hash", batch(stored(block_hashes=["a"])), False
    yield "str block size", batch(stored(block_size="2")), False
    yield "int medium", batch(stored(medium=1)), False
    yield "unicode strings", batch(stored(medium="GPU\u00e9", lora_name="\U0001f600" * 40)), True
    yield "long string", batch(stored(lora_name="n" * 70000)), True
    yield "bad utf-8", batch(stored(medium="GPU")).replace(b"\xa3GPU", b"\xa3G\xffU"), False
    keys = [None, ["a", b"b", 1, -2, 1.5, True, None, 2**64 - 1], [["img", 3], ["x", [1, [2]]]]]
    yield "extra keys", batch(stored(extra_keys=keys)), True
    yield "deep extra keys", batch(stored(extra_keys=[[[[[[1]]]]]])), False
    yield "map extra key", batch(stored(extra_keys=[[{"a": 1}]])), False
    yield "extra keys not arrays", batch(stored(extra_keys=["a"])), False
    yield "extra keys None", batch(stored(extra_keys=None)), True
    yield "lookahead", batch(stored(lookahead_token_ids=[[5], [6, 7], []])), True
    yield "lookahead flat", batch(stored(lookahead_token_ids=[5])), False
    yield (
        "every field",
        batch(
            stored(
                group_idx=3,
                kv_cache_spec_kind="sliding_window",
                kv_cache_spec_sliding_window=4096,
                locality="local",
                ownership="owned",
                session_id="s",
                lora_id=7,
                lora_name="adapter",
            ),
            {**REMOVED, "group_idx": 1, "locality": "l", "ownership": "o"},
        ),
        True,
    )
    yield (
        "fields out of order",
        batch({**dict(reversed(list(STORED.items()))), "type": "BlockStored"}),
        False,
    )
    reordered = {
        "type": "BlockStored",
        **{k: v for k, v in reversed(STORED.items()) if k != "type"},
    }
    yield "keys reversed after the tag", batch(reordered), True
    yield "unknown key", batch(stored(future="x")), False
    yield "missing field", batch({k: v for k, v in STORED.items() if k != "medium"}), False
    yield "unknown type", batch({"type": "BlockMoved"}), False
    yield "no type", batch({"medium": "GPU"}), False
    repeated = _E(STORED)[:-1] + b"\xa6medium\xa3CPU"
    repeated = bytes([repeated[0] + 1]) + repeated[1:]
    yield "repeated key", b"\x93" + _E(1.5) + b"\x91" + repeated + b"\x00", False
    map16 = b"\xde\x00\x09" + _E(STORED)[1:]
    yield "map16 header", b"\x93" + _E(1.5) + b"\x91" + map16 + b"\x00", True
    array16 = b"\xdc\x00\x01" + _E(REMOVED)
    yield "array16 events", b"\x93" + _E(1.5) + array16 + b"\x00", True
    yield "event not a map", batch([1, 2]), False
    yield "batch not an array", _E({"ts": 1.0}), False
    yield "huge declared array", b"\x93" + _E(1.5) + b"\xdd\xff\xff\xff\xff", False


EDGE_CASES = list(_edge_cases())


@pytest.mark.parametrize(
    ("payload", "handled"), [c[1:] for c in EDGE_CASES], ids=[c[0] for c in EDGE_CASES]
)
def test_edge_cases_alike(payload: bytes, handled: bool) -> None:
    assert _reads(payload) is handled
    _same_both_ways(payload)


def test_values_are_kvpure_types() -> None:
    keys = [None, ["a", ["img", 3]]]
    payload = _E([1.5, [{**STORED, "extra_keys": keys, "lookahead_token_ids": [[1], [2]]}], 0])
    batch = decode_batch(payload)
    assert type(batch) is KVEventBatch
    event = batch.events[0]
    assert type(event) is BlockStored
    assert event.extra_keys is not None
    assert type(event.extra_keys[1]) is ExtraKey
    assert type(event.extra_keys[1][1]) is tuple
    assert event.lookahead_token_ids == ((1,), (2,))
    assert hash(event) == hash(decode_batch(payload).events[0])
    assert decode_batch(encode_batch(batch, profile=VLLM_0_33_EVENTS)) == batch
    with pytest.raises(AttributeError):
        event.medium = "CPU"  # type: ignore[misc]  # frozen: the point of the test


def test_memoryview_and_bytearray_go_to_msgspec() -> None:
    payload = GOLDEN_PAYLOADS[0]
    assert (
        decode_batch(memoryview(payload))
        == decode_batch(bytearray(payload))
        == decode_batch(payload)
    )
    read = accel.reader()
    assert read is not None
    assert read(bytearray(payload)) is None  # type: ignore[arg-type]  # the point of the test


def test_ints_of_every_width_are_plain_ints() -> None:
    payload = _E([1.5, [{**STORED, "token_ids": [300, 300, 2**18 - 1, 2**18]}], 0])
    first = decode_batch(payload).events[0]
    again = decode_batch(payload).events[0]
    assert isinstance(first, BlockStored)
    assert isinstance(again, BlockStored)
    assert first.token_ids == again.token_ids == (300, 300, 2**18 - 1, 2**18)
    assert all(type(token) is int for token in first.token_ids)


@given(
    hashes=st.lists(
        st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.binary(max_size=40), max_size=5
    ),
    tokens=st.lists(st.integers(min_value=-(2**63), max_value=2**64 - 1), max_size=40),
    medium=st.none() | st.text(max_size=8),
    rank=st.none() | st.integers(min_value=0, max_value=2**20),
    ts=st.floats(allow_nan=False, allow_infinity=False),
)
def test_built_batches_read_alike(
    hashes: list[Any], tokens: list[int], medium: str | None, rank: int | None, ts: float
) -> None:
    events = (
        BlockStored(
            block_hashes=tuple(hashes),
            parent_block_hash=hashes[0] if hashes else None,
            token_ids=tuple(tokens),
            block_size=16,
            lora_id=None,
            medium=medium,
            lora_name=None,
            extra_keys=tuple(None for _ in hashes),
        ),
        BlockRemoved(block_hashes=tuple(hashes), medium=medium),
    )
    batch = KVEventBatch(ts=ts, events=events, data_parallel_rank=rank)
    for profile in (VLLM_0_26_EVENTS, VLLM_0_33_EVENTS):
        payload = encode_batch(batch, profile=profile)
        assert _reads(payload)
        assert _same_both_ways(payload) == ("ok", _shape(batch))


_TEXTS = st.sampled_from(["GPU", "GP", "GPUX", "CPU", "", "é", "éé", "x" * 64, "x" * 65, "日本"])


@given(
    media=st.lists(st.none() | _TEXTS, min_size=1, max_size=12),
    lora_names=st.lists(st.none() | _TEXTS, min_size=1, max_size=12),
)
def test_repeated_texts_read_alike(media: list[str | None], lora_names: list[str | None]) -> None:
    """The reader shares a str field's value with the previous event's when the bytes are
    the same: every sequence of equal, prefixed, longer and non-ASCII texts reads as
    msgspec reads it, event after event and payload after payload."""
    events: list[BlockStored | BlockRemoved] = []
    for index, medium in enumerate(media):
        lora = lora_names[index % len(lora_names)]
        events.append(
            BlockStored(
                block_hashes=(index,),
                parent_block_hash=None,
                token_ids=(1, 2),
                block_size=2,
                lora_id=None if lora is None else 1,
                medium=medium,
                lora_name=lora,
            )
        )
        events.append(BlockRemoved(block_hashes=(index,), medium=medium))
    batch = KVEventBatch(ts=1.0, events=tuple(events), data_parallel_rank=None)
    payload = encode_batch(batch, profile=VLLM_0_33_EVENTS)
    assert _reads(payload)
    for _ in range(2):  # the second read starts from the texts the first one left
        assert _same_both_ways(payload) == ("ok", _shape(batch))


def test_invalid_utf8_after_a_shared_text_fails_alike() -> None:
    good = {"type": "BlockRemoved", "block_hashes": [1], "medium": "GPU"}
    payload = _E([1.0, [good, good], None])
    assert _same_both_ways(payload)[0] == "ok"
    bad = payload.replace(b"\xa3GPU", b"\xa3G\xffU")
    assert bad != payload
    assert not _reads(bad)
    assert _same_both_ways(bad)[0] != "ok"
