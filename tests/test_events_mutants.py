"""Edges of events/ that the mutation run (issue 24, round 2) found unread.

Expected values are vLLM's: the wire fields of its ``kv_events.py`` (0.26.0,
0.34.0) and msgspec's own errors, not kvpure's output.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from beartype.door import is_bearable

from kvpure.events import (
    VLLM_0_26_EVENTS,
    BlockRemoved,
    BlockStored,
    EventFieldTypeError,
    EventProfile,
    KVEventArgumentTypeError,
    KVEventBatch,
    KVEventDecodeError,
    LiveBlocks,
    MalformedEventBatchError,
    MissingEventFieldError,
    TruncatedEventBatchError,
    UnknownEventFieldError,
    UnknownEventTypeError,
    decode_batch,
    decode_report,
    encode_event,
    get_event_profile,
)
from kvpure.events.live import _key
from kvpure.events.profiles import extra_fields
from kvpure.events.translate import from_broken_bytes, from_validation
from tests.conftest import GOLDEN_026, GOLDEN_033


@pytest.mark.parametrize(
    "event_fields",
    [
        (("BlockStored", "block_hashes"),),  # the fields as a str, not a tuple
        (("BlockStored", ("block_hashes", 1)),),
        ((1, ("block_hashes",)),),
        (("BlockStored", ("block_hashes",), ("x",)),),
        (("BlockStored",),),
    ],
)
def test_a_profile_refuses_malformed_event_fields(event_fields: object) -> None:
    # beartype (tests/conftest.py) refuses these at __init__ already; the check that
    # stands without it, in an installed kvpure, is __post_init__'s: run it directly
    profile = object.__new__(EventProfile)
    values = {
        "name": "bad",
        "vllm_version": "0",
        "event_fields": event_fields,
        "hash_profile": VLLM_0_26_EVENTS.hash_profile,
    }
    for name, value in values.items():
        object.__setattr__(profile, name, value)
    with pytest.raises(KVEventArgumentTypeError, match=r"EventProfile\.event_fields"):
        profile.__post_init__()


def test_an_unknown_event_type_lists_the_tags_vllm_sends() -> None:
    # vLLM's kv_events.py: BlockStored, BlockRemoved, AllBlocksCleared (a tagged union)
    payload = msgspec.msgpack.encode([1.0, [{"type": "Foo"}], None])
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_batch(payload)
    assert caught.value.event_index == 0
    assert caught.value.field == "type"
    assert caught.value.event_type == "Foo"  # the tag as it was on the wire
    assert str(caught.value).endswith(
        "unknown event type; vLLM sends BlockStored, BlockRemoved, AllBlocksCleared"
    )


def _msgspec_uses_map16(num_fields: int) -> bool:
    # vLLM's KVCacheEvent: msgspec.Struct, omit_defaults=True, tag=True
    struct = msgspec.defstruct(
        "BlockStored",
        [(f"f{i}", object, None) for i in range(num_fields)],
        tag=True,
        omit_defaults=True,
    )
    return msgspec.msgpack.encode(struct(f0=1))[0] == 0xDE


@pytest.mark.parametrize("num_fields", [13, 14, 15])
def test_the_map16_boundary_is_msgspecs(num_fields: int) -> None:
    # 14 fields + the tag are 15 keys (a fixmap); 15 fields + the tag need a map16
    fields = BlockStored.__struct_fields__[:num_fields]
    profile = EventProfile(
        name="cut",
        vllm_version="0",
        event_fields=(("BlockStored", fields),),
        hash_profile=VLLM_0_26_EVENTS.hash_profile,
    )
    expected = _msgspec_uses_map16(num_fields)
    assert expected == (num_fields == 15)
    assert profile.uses_map16("BlockStored") is expected
    event = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(),
        block_size=1,
        lora_id=None,
        medium=None,
        lora_name=None,
    )
    assert (encode_event(event, profile=profile)[0] == 0xDE) is expected


@pytest.mark.parametrize(
    ("path", "field"),
    [("$[0]", "ts"), ("$[2]", "data_parallel_rank"), ("$[3]", "[3]"), ("$[1][0]", None)],
)
def test_a_batch_path_names_the_batch_field(path: str, field: str | None) -> None:
    # vLLM's KVEventBatch is array_like: [ts, events, data_parallel_rank]; msgspec
    # refuses a longer array before reading past it, so [3] is named by position
    error = from_validation(
        msgspec.ValidationError(f"Expected `int`, got `str` - at `{path}`"), b""
    )
    assert isinstance(error, EventFieldTypeError)
    assert error.field == field


def _stored(*hashes: int, group_idx: int | None = 0, medium: str | None = "GPU") -> BlockStored:
    return BlockStored(
        block_hashes=hashes,
        parent_block_hash=None,
        token_ids=tuple(range(len(hashes))),
        block_size=1,
        lora_id=None,
        medium=medium,
        lora_name=None,
        group_idx=group_idx,
    )


def test_live_copies_count_up_and_down_like_the_block_pool() -> None:
    # vLLM's block pool: every BlockStored hash is one more cached block, every
    # BlockRemoved one fewer; the hash stays cached while a block holds it
    state = LiveBlocks().apply_all([_stored(7), _stored(7), _stored(7)])
    assert state.copies_of(7, group_idx=0) == 3
    state = state.apply(BlockRemoved(block_hashes=(7,), medium="GPU", group_idx=0))
    assert state.copies_of(7, group_idx=0) == 2
    state = state.apply(BlockRemoved(block_hashes=(7, 7), medium="GPU", group_idx=0))
    assert state.copies_of(7, group_idx=0) == 0
    assert not state.is_cached(7, group_idx=0)
    assert (state.num_cached_hashes, state.unmatched_removals) == (0, 0)


def test_live_blocks_take_one_event_or_one_batch() -> None:
    batch = KVEventBatch(ts=0.0, events=(_stored(1), _stored(1)), data_parallel_rank=None)
    assert LiveBlocks().apply_all([batch]).copies_of(1, group_idx=0) == 2
    other = LiveBlocks().apply_all([_stored(1, group_idx=None, medium=None)])
    assert other.copies_of(1, group_idx=None, medium=None) == 1
    assert other.copies_of(1, group_idx=None) == 0  # the default medium is "GPU"


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ((True, 0, "GPU"), "block_hash"),
        ((1.0, 0, "GPU"), "block_hash"),
        ((1, True, "GPU"), "group_idx"),
        ((1, "0", "GPU"), "group_idx"),
        ((1, 0, 5), "medium"),
    ],
)
def test_a_live_key_refuses_bad_parts(arguments: tuple[object, object, object], name: str) -> None:
    with pytest.raises(KVEventArgumentTypeError, match=name):
        _key(*arguments)
    assert _key(b"\x01" * 32, None, None) == (None, None, b"\x01" * 32)
    assert _key(3, 0, "CPU") == ("CPU", 0, 3)


@pytest.mark.parametrize("golden_dir", [GOLDEN_026, GOLDEN_033], ids=["0.26", "0.33"])
def test_a_profile_is_its_goldens_release(golden_dir: Path) -> None:
    golden = json.loads((golden_dir / "kv_events.json").read_text())
    version = golden["vllm_version"]
    profile = get_event_profile("vllm-" + version.rsplit(".", 1)[0])
    assert profile.vllm_version == version
    for event_type in ("BlockStored", "BlockRemoved", "AllBlocksCleared"):
        fields = tuple(f["name"] for f in golden["schema"][event_type]["fields"])
        assert profile.fields_of(event_type) == fields
    assert profile.fields_of("KVCacheEvent") == ()
    # every event type the golden declares is listed, AllBlocksCleared (no fields) too
    declared = [name for name in golden["schema"] if name in ("BlockStored", "BlockRemoved")]
    declared.append("AllBlocksCleared")
    assert [name for name, _ in profile.event_fields] == declared


def test_a_missing_field_names_its_event() -> None:
    # vLLM 0.26's BlockStored declares block_size without a default (always written)
    event = {"type": "BlockStored", "block_hashes": [1], "parent_block_hash": None}
    event |= {"token_ids": [1], "lora_id": None, "medium": "GPU", "lora_name": None}
    payload = msgspec.msgpack.encode([1.0, [event], None])
    with pytest.raises(MissingEventFieldError) as caught:
        decode_batch(payload)
    error = caught.value
    assert (error.event_index, error.field, error.event_type) == (0, "block_size", "BlockStored")
    assert error.reason == "missing (vLLM writes this field even when it is None)"
    untagged = msgspec.msgpack.encode([1.0, [{"block_hashes": [1]}], None])
    with pytest.raises(MissingEventFieldError) as caught:
        decode_batch(untagged)
    assert (caught.value.event_index, caught.value.field) == (0, "type")
    assert caught.value.reason == "missing: the tag that names the event"


_UNKNOWN_REASON = (
    "no event of any known vLLM version has this field (vLLM skips it; strict mode refuses it)"
)
_TOO_LONG_REASON = (
    "Expected `array` of at most length 3, got 4: elements past ts, events, "
    "data_parallel_rank are not declared (vLLM skips them; strict mode refuses them)"
)


@pytest.mark.parametrize(
    ("batch", "error_class", "where", "reason"),
    [
        (
            [1.0, [{"type": "AllBlocksCleared", "colour": 1}], None],
            UnknownEventFieldError,
            (0, "colour", "AllBlocksCleared"),
            _UNKNOWN_REASON,
        ),
        ([1.0, [], None, 4], UnknownEventFieldError, (None, None, None), _TOO_LONG_REASON),
        (
            [1.0, [{"type": "BlockRemoved", "block_hashes": "x", "medium": None}], None],
            EventFieldTypeError,
            (0, "block_hashes", "BlockRemoved"),
            "Expected `array`, got `str`",  # msgspec's words, as vLLM's decoder says them
        ),
    ],
)
def test_strict_decoding_names_what_vllm_skips_or_refuses(
    batch: list[object], error_class: type[Exception], where: tuple[object, ...], reason: str
) -> None:
    with pytest.raises(error_class) as caught:
        decode_batch(msgspec.msgpack.encode(batch), strict=True)
    error = caught.value
    assert isinstance(error, KVEventDecodeError)
    assert type(error) is error_class
    assert (error.event_index, error.field, error.event_type) == where
    assert error.reason == reason


def test_broken_bytes_are_truncated_or_malformed_where_they_break() -> None:
    # 0x93 is a 3-array, 0xcb a float64 (ts) with none of its 8 bytes; 0xc1 is never used
    with pytest.raises(TruncatedEventBatchError) as truncated:
        decode_batch(b"\x93\xcb")
    assert (truncated.value.field, truncated.value.offset) == ("ts", 2)
    with pytest.raises(MalformedEventBatchError) as malformed:
        decode_batch(b"\xc1")
    assert type(malformed.value) is MalformedEventBatchError
    assert malformed.value.offset == 0


def test_extra_fields_are_the_newer_releases_fields() -> None:
    # kvpure's structs hold 0.33's fields; 0.26 lacks the ones its golden schema lacks
    schemas = [
        json.loads((golden_dir / "kv_events.json").read_text())["schema"]
        for golden_dir in (GOLDEN_026, GOLDEN_033)
    ]
    for event_type in ("BlockStored", "BlockRemoved", "AllBlocksCleared"):
        old, new = ([f["name"] for f in schema[event_type]["fields"]] for schema in schemas)
        expected = tuple(name for name in new if name not in old)
        assert extra_fields(VLLM_0_26_EVENTS, event_type) == expected
        assert extra_fields(get_event_profile("vllm-0.33"), event_type) == ()
    assert extra_fields(VLLM_0_26_EVENTS, "BlockStored")  # 0.33 added BlockStored fields


def test_bytes_the_scanner_finds_whole_keep_msgspecs_reason() -> None:
    # when msgspec refuses bytes that the scanner reads through, its own words stay
    whole = msgspec.msgpack.encode([1.0, [], None])
    error = from_broken_bytes(msgspec.DecodeError("boom"), whole)
    assert type(error) is MalformedEventBatchError
    assert (error.reason, error.offset) == ("boom", None)
    assert from_broken_bytes(msgspec.DecodeError(), whole).reason == "DecodeError"


def test_live_blocks_take_one_event_or_one_batch_unwrapped() -> None:
    # apply_all's hint names a lone event and a lone batch too: beartype (tests/conftest.py)
    # checks these calls against it, and mypy --strict checks them statically
    assert LiveBlocks().apply_all(_stored(1, 2)).num_cached_hashes == 2
    batch = KVEventBatch(ts=0.0, events=(_stored(1), _stored(1)), data_parallel_rank=None)
    assert LiveBlocks().apply_all(batch).copies_of(1, group_idx=0) == 2
    assert LiveBlocks().apply_all(iter((batch, _stored(1)))).copies_of(1, group_idx=0) == 3
    assert LiveBlocks().apply_all(()).num_cached_hashes == 0
    hint = typing.get_type_hints(LiveBlocks.apply_all)["events"]
    assert is_bearable(batch, hint)
    assert is_bearable(_stored(1), hint)
    assert is_bearable([], hint)
    assert not is_bearable(5, hint)
    # past the hint (an installed kvpure runs without beartype): the typed error
    apply_all: Callable[[LiveBlocks, object], LiveBlocks] = inspect.unwrap(LiveBlocks.apply_all)
    with pytest.raises(KVEventArgumentTypeError, match="events"):
        apply_all(LiveBlocks(), 5)


def test_batch_elements_past_the_third_are_skipped_unless_strict() -> None:
    # vLLM's EventBatch is array_like and does not forbid unknown fields: msgspec
    # itself skips trailing elements, so a newer server's batch reaches an old reader
    class VllmBatch(msgspec.Struct, array_like=True, omit_defaults=True):
        ts: float
        events: list[object]
        data_parallel_rank: int | None = None

    payload = msgspec.msgpack.encode([1.0, [], None, 4, "x"])
    assert msgspec.msgpack.decode(payload, type=VllmBatch) == VllmBatch(1.0, [], None)
    report = decode_report(payload)
    assert (report.batch.ts, report.batch.events, report.batch.data_parallel_rank) == (
        1.0,
        (),
        None,
    )
    assert [field.describe() for field in report.unknown_fields] == [
        "batch element [3]",
        "batch element [4]",
    ]
    with pytest.raises(UnknownEventFieldError):
        decode_batch(payload, strict=True)
