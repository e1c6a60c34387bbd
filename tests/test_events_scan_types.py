"""Every MessagePack type inside a batch, cut at every byte: the scanner's reports.

vLLM's events carry few MessagePack types; a payload can carry any of them in a key no
event declares (vLLM's decoder skips it, so kvpure does). The batch below holds one
value of each type (MessagePack spec: nil, bools, every int and float width, fixext
1-16, bin/ext/str 8/16/32, arrays and maps of every header) under unknown keys
``u0``, ``u1``... of one ``BlockRemoved``. The expectations come from msgspec (the
decoder vLLM uses) and from the layout itself:

- whole, msgspec decodes it and so does kvpure, naming each unknown key;
- cut at any byte, msgspec says the input was truncated; kvpure raises
  :class:`TruncatedEventBatchError`, with the batch field of vLLM's ``KVEventBatch``
  (``ts``, ``events``, ``data_parallel_rank``) the cut falls in, and inside a value the
  unknown key it belongs to;
- a value's first byte made ``0xc1`` (the one byte MessagePack never uses): msgspec says
  malformed at that byte; kvpure raises :class:`MalformedEventBatchError` at the same
  offset, naming the key.
"""

from __future__ import annotations

import msgspec
import pytest

from kvpure.events import (
    BlockRemoved,
    EventFieldTypeError,
    KVEventBatch,
    MalformedEventBatchError,
    TruncatedEventBatchError,
    decode_batch,
    decode_report,
)

_VALUES: tuple[bytes, ...] = (
    b"\xc0",  # nil
    b"\xc2",  # false
    b"\xc3",  # true
    b"\xca" + bytes(4),  # float32
    b"\xcb" + bytes(8),  # float64
    b"\xcc\x01",  # uint8
    b"\xcd\x01\x02",  # uint16
    b"\xce" + bytes(4),  # uint32
    b"\xcf" + bytes(8),  # uint64
    b"\xd0\xff",  # int8
    b"\xd1" + bytes(2),  # int16
    b"\xd2" + bytes(4),  # int32
    b"\xd3" + bytes(8),  # int64
    b"\xd4\x01" + bytes(1),  # fixext 1
    b"\xd5\x01" + bytes(2),  # fixext 2
    b"\xd6\x01" + bytes(4),  # fixext 4
    b"\xd7\x01" + bytes(8),  # fixext 8
    b"\xd8\x01" + bytes(16),  # fixext 16
    b"\xc4\x02ab",  # bin 8
    b"\xc5\x00\x02ab",  # bin 16
    b"\xc6\x00\x00\x00\x02ab",  # bin 32
    b"\xc7\x02\x01ab",  # ext 8
    b"\xc8\x00\x02\x01ab",  # ext 16
    b"\xc9\x00\x00\x00\x02\x01ab",  # ext 32
    b"\xa2ab",  # fixstr
    b"\xd9\x02ab",  # str 8
    b"\xda\x00\x02ab",  # str 16
    b"\xdb\x00\x00\x00\x02ab",  # str 32
    b"\x92\x01\x02",  # fixarray
    b"\xdc\x00\x02\x01\x02",  # array 16
    b"\xdd\x00\x00\x00\x02\x01\x02",  # array 32
    b"\x81\xa1k\x01",  # fixmap
    b"\xde\x00\x01\xa1k\x01",  # map 16
    b"\xdf\x00\x00\x00\x01\xa1k\x01",  # map 32
    b"\x05",  # positive fixint
    b"\xe0",  # negative fixint
    b"\x90",  # empty array
    b"\x80",  # empty map
    # the first and last byte of each header family
    b"\x00",  # positive fixint 0
    b"\x7f",  # positive fixint 127
    b"\xff",  # negative fixint -1
    b"\xa0",  # empty fixstr
    b"\xbf" + b"s" * 31,  # fixstr of 31 bytes
    b"\x9f" + bytes(15),  # fixarray of 15
    b"\x8f" + b"".join(bytes([0xA1, 0x61 + i, i]) for i in range(15)),  # fixmap of 15
)


def _payload() -> tuple[bytes, dict[int, tuple[str, str]]]:
    """The batch's bytes, and for each byte offset (a cut there ends the data just
    before that byte) the batch field and the unknown key whose value holds the byte
    ("" outside the event, "?" elsewhere in it)."""
    where: dict[int, tuple[str, str]] = {}
    data = bytearray(b"\x93")
    ts = msgspec.msgpack.encode(1.5)  # a float64
    for i in range(len(ts)):
        where[len(data) + i] = ("ts", "")
    data += ts
    header = b"\xdc\x00\x01"  # events: an array16 of one event
    known = [(b"\xa4type", b"\xacBlockRemoved"), (b"\xacblock_hashes", b"\x91\x01")]
    known.append((b"\xa6medium", b"\xa3GPU"))
    pairs = known + [(msgspec.msgpack.encode(f"u{i}"), v) for i, v in enumerate(_VALUES)]
    event = bytearray(b"\xde" + len(pairs).to_bytes(2, "big"))
    value_at: dict[int, str] = {}
    for number, (key, value) in enumerate(pairs):
        event += key
        if number >= len(known):
            for i in range(len(value)):
                value_at[len(event) + i] = key[1:].decode()
        event += value
    for i in range(len(header)):
        where[len(data) + i] = ("events", "")  # the events array's own header
    for i in range(len(event)):
        where[len(data) + len(header) + i] = ("events", value_at.get(i, "?"))
    data += header
    data += event
    rank = b"\xcf" + (2**40).to_bytes(8, "big")
    for i in range(len(rank)):
        where[len(data) + i] = ("data_parallel_rank", "")
    data += rank
    return bytes(data), where


PAYLOAD, WHERE = _payload()
_BATCH = KVEventBatch(
    ts=1.5, events=(BlockRemoved(block_hashes=(1,), medium="GPU"),), data_parallel_rank=2**40
)


def test_the_whole_payload_decodes_skipping_the_unknown_keys() -> None:
    assert msgspec.msgpack.decode(PAYLOAD)[2] == 2**40
    report = decode_report(PAYLOAD)
    assert report.batch == _BATCH
    assert [f.field for f in report.unknown_fields] == [f"u{i}" for i in range(len(_VALUES))]
    assert decode_batch(PAYLOAD) == _BATCH


@pytest.mark.parametrize("cut", range(1, len(PAYLOAD)))
def test_every_cut_is_truncated_where_it_falls(cut: int) -> None:
    with pytest.raises(msgspec.DecodeError, match="truncated"):
        msgspec.msgpack.decode(PAYLOAD[:cut])
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(PAYLOAD[:cut])
    batch_field, key = WHERE[cut]
    error = info.value
    if batch_field == "ts" and cut == 1:  # nothing after the batch's header
        assert error.reason == "a value needs 1 bytes, 0 left"
    if not key:  # in ts, the events array's header or data_parallel_rank
        assert (error.event_index, error.field) == (None, batch_field)
    elif key != "?":  # in the value of an unknown key ("?": in a key or a known field)
        assert (error.event_index, error.event_type, error.field) == (0, "BlockRemoved", key)


@pytest.mark.parametrize("key", range(len(_VALUES)))
def test_a_reserved_byte_is_malformed_at_its_offset(key: int) -> None:
    name = f"u{key}".encode()
    at = PAYLOAD.index(bytes([0xA0 | len(name)]) + name + _VALUES[key]) + 1 + len(name)
    broken = PAYLOAD[:at] + b"\xc1" + PAYLOAD[at + 1 :]
    with pytest.raises(msgspec.DecodeError) as found:
        msgspec.msgpack.decode(broken)
    msgspec_offset = int(str(found.value).rsplit("(byte ", 1)[1].rstrip(")"))
    with pytest.raises(MalformedEventBatchError) as info:
        decode_batch(broken)
    error = info.value
    assert error.offset == msgspec_offset == at
    assert (error.event_index, error.event_type, error.field) == (0, "BlockRemoved", f"u{key}")


@pytest.mark.parametrize("cut", range(2, 10))
def test_a_cut_float_says_how_many_of_its_bytes_are_there(cut: int) -> None:
    """``ts`` is a float64 (``0xcb`` at byte 1, its 8 bytes from byte 2): cut inside them,
    the reason counts the bytes needed and those left, from where they start."""
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(PAYLOAD[:cut])
    assert info.value.reason == f"a scalar needs 8 bytes, {cut - 2} left"
    assert (info.value.offset, info.value.field) == (2, "ts")


def test_a_cut_after_an_empty_key_names_it() -> None:
    """The field is the map key being read, a string key by its text, even empty."""
    event = b"\x84\xa4type\xacBlockRemoved\xacblock_hashes\x91\x01\xa6medium\xa3GPU"
    payload = b"\x93" + msgspec.msgpack.encode(1.5) + b"\x91" + event + b"\xa0\xcf\x00\x00"
    with pytest.raises(msgspec.DecodeError, match="truncated"):
        msgspec.msgpack.decode(payload)
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(payload)
    error = info.value
    assert (error.event_index, error.event_type, error.field) == (0, "BlockRemoved", "")


@pytest.mark.parametrize("left", range(3))
def test_a_cut_string_says_how_many_of_its_bytes_are_there(left: int) -> None:
    """``medium``'s value ``"GPU"`` (a fixstr: its header, then 3 bytes) cut inside."""
    start = PAYLOAD.index(b"\xa6medium\xa3GPU") + len(b"\xa6medium\xa3")
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(PAYLOAD[: start + left])
    assert info.value.reason == f"a string needs 3 bytes, {left} left"
    assert (info.value.offset, info.value.field) == (start, "medium")


def test_a_cut_first_key_is_named_by_its_place() -> None:
    """Cut inside an event's first key: no key has been read, so the field is ``key 0``
    (a later one is ``key N (after <the key before>)``)."""
    start = PAYLOAD.index(b"\xa4type")
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(PAYLOAD[: start + 2])
    assert (info.value.event_index, info.value.field) == (0, "key 0")
    after = PAYLOAD.index(b"\xacblock_hashes")
    with pytest.raises(TruncatedEventBatchError) as info:
        decode_batch(PAYLOAD[: after + 2])
    assert (info.value.event_index, info.value.field) == (0, "key 1 (after type)")


def test_bytes_after_the_batch_are_counted_where_msgspec_finds_them() -> None:
    broken = PAYLOAD + b"\x00\x01"
    with pytest.raises(msgspec.DecodeError) as found:
        msgspec.msgpack.decode(broken)
    assert f"(byte {len(PAYLOAD)})" in str(found.value)
    with pytest.raises(MalformedEventBatchError) as info:
        decode_batch(broken)
    assert (info.value.reason, info.value.offset) == ("2 bytes after the batch", len(PAYLOAD))


@pytest.mark.parametrize("rank", [b"", b"\x00"])  # [ts, events] and [ts, events, rank]
def test_a_wrong_field_type_names_the_events_type(rank: bytes) -> None:
    """msgspec names the path of a wrong type (``$[1][0].block_hashes``); the event's
    ``type`` tag is read off the payload."""
    event = b"\x83\xa4type\xacBlockRemoved\xacblock_hashes\xa1x\xa6medium\xa3GPU"
    header = b"\x93" if rank else b"\x92"
    payload = header + msgspec.msgpack.encode(1.5) + b"\x91" + event + rank
    with pytest.raises(EventFieldTypeError) as info:
        decode_batch(payload)
    error = info.value
    assert (error.event_index, error.event_type, error.field) == (
        0,
        "BlockRemoved",
        "block_hashes",
    )
