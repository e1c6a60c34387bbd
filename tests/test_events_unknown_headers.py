"""Unknown keys stripped under each MessagePack map header width (issue 24, round 2).

msgspec (vLLM's decoder) reads a map of any header width: fixmap, map16 and
map32 all decode. The stripped event keeps its header's width with the new
count, and the batch decodes as vLLM's tolerant decoder reads the original.
"""

from __future__ import annotations

import msgspec
import pytest

from kvpure.events import AllBlocksCleared, KVEventArgumentTypeError, decode_batch
from kvpure.events.unknown import UnknownField, strip_unknown_fields

_ENC = msgspec.msgpack.encode
_TYPE_ENTRY = _ENC("type") + _ENC("AllBlocksCleared")


@pytest.mark.parametrize(
    ("two_keys", "one_key"),
    [
        (b"\x82", b"\x81"),
        (b"\xde\x00\x02", b"\xde\x00\x01"),
        (b"\xdf\x00\x00\x00\x02", b"\xdf\x00\x00\x00\x01"),
    ],
    ids=["fixmap", "map16", "map32"],
)
def test_a_stripped_event_keeps_its_header_width(two_keys: bytes, one_key: bytes) -> None:
    event = two_keys + _TYPE_ENTRY + _ENC("colour") + _ENC(1)
    assert msgspec.msgpack.decode(event) == {"type": "AllBlocksCleared", "colour": 1}
    payload = b"\x93" + _ENC(1.0) + b"\x91" + event + b"\xc0"
    stripped, found = strip_unknown_fields(payload, {"AllBlocksCleared": frozenset({"type"})})
    assert stripped == b"\x93" + _ENC(1.0) + b"\x91" + one_key + _TYPE_ENTRY + b"\xc0"
    assert found == (UnknownField(0, "AllBlocksCleared", "colour"),)
    assert decode_batch(payload).events == (AllBlocksCleared(),)


def test_an_unknown_field_describes_where_it_was() -> None:
    assert UnknownField(None, None, "[3]").describe() == "batch element [3]"
    described = UnknownField(2, "BlockStored", "colour").describe()
    assert described == "event 2 (BlockStored) field 'colour'"


@pytest.mark.parametrize(
    ("values", "name"),
    [((True, None, "x"), "event_index"), ((0, 5, "x"), "event_type"), ((0, None, 5), "field")],
)
def test_an_unknown_field_refuses_bad_parts(
    values: tuple[object, object, object], name: str
) -> None:
    # beartype refuses some at __init__ in the tests; an installed kvpure relies on
    # __post_init__, run here directly
    record = object.__new__(UnknownField)
    for attribute, value in zip(("event_index", "event_type", "field"), values, strict=True):
        object.__setattr__(record, attribute, value)
    with pytest.raises(KVEventArgumentTypeError, match=name):
        record.__post_init__()


_CLEARED = {"type": "AllBlocksCleared"}
_COLOURED = {"type": "AllBlocksCleared", "colour": 1}


@pytest.mark.parametrize(
    ("batch", "expected", "found"),
    [
        # an event that is not a map is kept as it is; the next one is still read
        ([1.0, [5, _COLOURED], None], [1.0, [5, _CLEARED], None], [(1, "AllBlocksCleared")]),
        # a key that is not a string is kept (msgspec refuses it on decoding)
        (
            [1.0, [{1: 2, "type": "AllBlocksCleared", "colour": 1}], None],
            [1.0, [{1: 2, "type": "AllBlocksCleared"}], None],
            [(0, "AllBlocksCleared")],
        ),
        # an event of an unknown type, or with a type that is not a string, is kept whole
        (
            [1.0, [{"type": "Nope", "colour": 1}, {"type": 5, "colour": 1}, _COLOURED], None],
            [1.0, [{"type": "Nope", "colour": 1}, {"type": 5, "colour": 1}, _CLEARED], None],
            [(2, "AllBlocksCleared")],
        ),
        # events that are not an array are kept; the fourth element is left out
        ([1.0, "x", None, 4], [1.0, "x", None], [(None, None)]),
        ([1.0, {"a": 1}, None, 4], [1.0, {"a": 1}, None], [(None, None)]),
    ],
)
def test_stripping_is_msgspecs_encoding_without_the_unknown_keys(
    batch: list[object], expected: list[object], found: list[tuple[object, object]]
) -> None:
    stripped, unknown = strip_unknown_fields(_ENC(batch), {"AllBlocksCleared": frozenset({"type"})})
    assert stripped == _ENC(expected)
    assert [(u.event_index, u.event_type) for u in unknown] == found


def test_a_payload_that_is_not_an_array_is_returned_as_is() -> None:
    payload = _ENC({"type": "AllBlocksCleared", "colour": 1})
    assert strip_unknown_fields(payload, {"AllBlocksCleared": frozenset({"type"})}) == (
        payload,
        (),
    )


def test_a_three_element_batch_keeps_its_array16_header() -> None:
    # msgspec reads an array16 header of count 3 as vLLM's batch; only the event changes
    event = _ENC(_COLOURED)
    payload = b"\xdc\x00\x03" + _ENC(1.0) + b"\x91" + event + b"\xc0"
    stripped, _ = strip_unknown_fields(payload, {"AllBlocksCleared": frozenset({"type"})})
    assert stripped == b"\xdc\x00\x03" + _ENC(1.0) + b"\x91" + _ENC(_CLEARED) + b"\xc0"
    assert decode_batch(payload).events == (AllBlocksCleared(),)


def test_nothing_unknown_returns_the_payload_and_trailing_bytes_are_kept() -> None:
    known = {"AllBlocksCleared": frozenset({"type"})}
    clean = _ENC([1.0, [_CLEARED], None])
    assert strip_unknown_fields(clean, known) == (clean, ())
    stripped, found = strip_unknown_fields(_ENC([1.0, [_COLOURED], None]) + b"\x00", known)
    assert stripped == clean + b"\x00"  # decoding then refuses the trailing byte
    assert len(found) == 1
