"""ZMQ frame and capture edges (issue 24, round 2 of mutation testing).

Expected values: vLLM's framing as recorded in the goldens (``end_seq_hex``:
``(-1).to_bytes(8, "big", signed=True)``), the MessagePack spec's array
headers (fixarray ``0x90``-``0x9f``, array16 ``0xdc``, array32 ``0xdd``), and
the capture format as docs state it: a 4-byte big-endian length, at most 1 GiB.
"""

from __future__ import annotations

import inspect
import json

import pytest

import kvpure.events.frames as frames_module
from kvpure.events import (
    BlockStored,
    EventCaptureError,
    EventFrameError,
    EventMessage,
    KVEventArgumentTypeError,
    KVEventBatch,
    KVEventDecodeError,
    decode_message,
    encode_message,
    encode_replay_request,
    get_event_profile,
    is_replay_end,
)
from kvpure.events.frames import capture_record, split_capture
from tests.conftest import GOLDEN_026

_END_SEQ = int(
    json.loads((GOLDEN_026 / "kv_events.json").read_text())["framing"]["end_seq_hex"], 16
)


def test_the_last_seq_before_the_end_marker_is_allowed() -> None:
    assert _END_SEQ == 2**64 - 1
    assert encode_replay_request(_END_SEQ - 1) == (b"", b"\xff" * 7 + b"\xfe")
    with pytest.raises(EventFrameError):
        encode_replay_request(_END_SEQ)
    with pytest.raises(EventFrameError):
        encode_replay_request(-1)


def test_a_capture_record_is_a_4_byte_big_endian_length() -> None:
    assert capture_record(b"abc") == b"\x00\x00\x00\x03abc"
    assert split_capture(b"\x00\x00\x00\x03abc\x00\x00\x00\x00") == (b"abc", b"")


@pytest.mark.parametrize("first", [0x90, 0x95, 0x9F, 0xDC, 0xDD])
def test_a_msgpack_array_header_starts_a_bare_payload(first: int) -> None:
    data = bytes((first,)) + b"\x00\x00\x00\x00"
    assert split_capture(data) == (data,)


@pytest.mark.parametrize("first", [0x8F, 0xA0, 0xDB, 0xDE])
def test_other_first_bytes_are_read_as_a_capture(first: int) -> None:
    # not array headers: read as a length prefix, which is then too short or too long
    with pytest.raises(EventCaptureError):
        split_capture(bytes((first,)) + b"\x00\x00")


def test_a_record_may_say_1_gib_but_not_more() -> None:
    with pytest.raises(EventCaptureError, match="says 1073741824 bytes, 0 are left"):
        split_capture(b"\x40\x00\x00\x00")
    with pytest.raises(EventCaptureError, match="length 1073741825 exceeds 1073741824 bytes"):
        split_capture(b"\x40\x00\x00\x01")


def test_a_message_seq_out_of_range_names_seq() -> None:
    batch = KVEventBatch(ts=0.0, events=(), data_parallel_rank=None)
    with pytest.raises(EventFrameError) as caught:
        EventMessage(topic="", seq=_END_SEQ, batch=batch)
    assert caught.value.field == "seq"
    with pytest.raises(KVEventArgumentTypeError, match="seq"):
        EventMessage(topic="", seq=True, batch=batch)
    assert EventMessage(topic="", seq=_END_SEQ - 1, batch=batch).seq == _END_SEQ - 1


# --- round 4 (mutedge): frames #26-#124 -------------------------------------------------


def _golden_case() -> dict[str, list[list[str]]]:
    case: dict[str, list[list[str]]] = json.loads((GOLDEN_026 / "kv_events.json").read_text())[
        "cases"
    ]["dp_rank_1_with_topic"]["replay"]
    return case


def test_the_replay_end_marker_is_its_last_three_frames() -> None:
    # vLLM's ROUTER sends (client_id, b"", b"", END_SEQ, b""); a DEALER drops client_id,
    # and the marker is the last three frames of either
    end = [bytes.fromhex(frame) for frame in _golden_case()["reply_frames_hex"][-1]]
    assert end[-3:] == [b"", (-1).to_bytes(8, "big", signed=True), b""]
    for frames in (end, end[1:], end[-3:]):
        assert is_replay_end(frames) is True
    assert is_replay_end(end[-2:]) is False
    assert is_replay_end([]) is False
    seq = b"\xff" * 8
    assert is_replay_end([b"t", seq, b""]) is False  # a topic: not the marker
    assert is_replay_end([b"", seq, b"\x90"]) is False  # a payload: not the marker
    assert is_replay_end([b"", b"\xff" * 7 + b"\xfe", b""]) is False
    assert is_replay_end([b"", b"\xff" * 7, b""]) is False


def test_decode_message_applies_the_profile_and_strict() -> None:
    # vLLM 0.26's BlockStored has no session_id: its decoder skips the key, and a
    # 0.26 profile sets it back to the default (strict refuses it)
    stored = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        session_id="s-1",
    )
    batch = KVEventBatch(ts=1.0, events=(stored,), data_parallel_rank=None)
    message = EventMessage(topic="kv", seq=5, batch=batch)
    frames = list(encode_message(message, profile=get_event_profile("vllm-0.33")))
    old = get_event_profile("vllm-0.26")
    assert decode_message(frames).batch == batch
    assert decode_message(frames, strict=True).batch == batch
    decoded = decode_message(frames, profile=old).batch.events[0]
    assert isinstance(decoded, BlockStored)
    assert decoded.session_id is None
    with pytest.raises(KVEventDecodeError, match="session_id"):
        decode_message(frames, profile=old, strict=True)
    assert decode_message(frames, profile=old).seq == 5
    assert decode_message(frames, profile=old).topic == "kv"


def test_frame_functions_name_their_arguments() -> None:
    with pytest.raises(EventFrameError) as caught:
        encode_replay_request(2**64 - 1)
    assert caught.value.field == "start_seq"
    unwrapped_record = inspect.unwrap(capture_record)
    unwrapped_split = inspect.unwrap(split_capture)
    with pytest.raises(KVEventArgumentTypeError, match="payload") as typed:
        unwrapped_record("abc")
    assert typed.value.argument == "payload"
    with pytest.raises(KVEventArgumentTypeError) as typed:
        unwrapped_split("abc")
    assert typed.value.argument == "data"
    assert unwrapped_split(bytearray(b"\x00\x00\x00\x01a")) == (b"a",)
    assert unwrapped_record(memoryview(b"ab")) == b"\x00\x00\x00\x02ab"


def test_a_capture_record_of_exactly_the_bound_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the bound is read when called; a small one stands for 1 GiB (no 1 GiB payload)
    monkeypatch.setattr(frames_module, "MAX_RECORD_BYTES", 3)
    assert capture_record(b"abc") == b"\x00\x00\x00\x03abc"
    with pytest.raises(EventCaptureError, match="4 bytes exceed 3"):
        capture_record(b"abcd")
    assert split_capture(b"\x00\x00\x00\x03abc") == (b"abc",)
    with pytest.raises(EventCaptureError, match="length 4 exceeds 3"):
        split_capture(b"\x00\x00\x00\x04abcd")


def test_split_capture_reads_every_record_in_order() -> None:
    records = [b"", b"a", b"", b"bc", b"\x93" * 3, b""]
    data = b"".join(capture_record(r) for r in records)
    assert split_capture(data) == tuple(records)
    assert split_capture(b"") == ()
    assert split_capture(capture_record(b"")) == (b"",)
    with pytest.raises(EventCaptureError, match="3 bytes left"):
        split_capture(data + b"\x00\x00\x00")
    with pytest.raises(EventCaptureError, match="says 5 bytes, 4 are left") as caught:
        split_capture(capture_record(b"x") + b"\x00\x00\x00\x05abcd")
    assert (caught.value.record_index, caught.value.offset) == (1, 5)


def test_a_frame_that_is_not_bytes_is_refused_by_name() -> None:
    # beartype checks one item of a list; unwrapped, kvpure's own check reads them all
    for call in (inspect.unwrap(decode_message), inspect.unwrap(is_replay_end)):
        for frames in ([b"", b"\xff" * 8, 1], [b"", 5, b""], (b"", b"\0" * 8, "x")):
            with pytest.raises(KVEventArgumentTypeError) as caught:
                call(frames)
            assert caught.value.argument == "frames"
