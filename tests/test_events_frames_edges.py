"""ZMQ frame and capture edges (issue 24, round 2 of mutation testing).

Expected values: vLLM's framing as recorded in the goldens (``end_seq_hex``:
``(-1).to_bytes(8, "big", signed=True)``), the MessagePack spec's array
headers (fixarray ``0x90``-``0x9f``, array16 ``0xdc``, array32 ``0xdd``), and
the capture format as docs state it: a 4-byte big-endian length, at most 1 GiB.
"""

from __future__ import annotations

import json

import pytest

from kvpure.events import (
    EventCaptureError,
    EventFrameError,
    EventMessage,
    KVEventArgumentTypeError,
    KVEventBatch,
    encode_replay_request,
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
