"""Edges of events/ that the mutation run (issue 24, round 2) found unread.

Expected values are vLLM's: the wire fields of its ``kv_events.py`` (0.26.0,
0.34.0) and msgspec's own errors, not kvpure's output.
"""

from __future__ import annotations

import msgspec
import pytest

from kvpure.events import (
    VLLM_0_26_EVENTS,
    BlockStored,
    EventFieldTypeError,
    EventProfile,
    KVEventArgumentTypeError,
    UnknownEventTypeError,
    decode_batch,
    encode_event,
)
from kvpure.events.translate import from_validation


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
