"""KV event batches against vLLM's own bytes (kv_events.json of 0.26.0 and 0.33.0).

Every golden batch decodes to the recorded fields and re-encodes to the
recorded payload, byte for byte; every event re-encodes to its own recorded
msgpack; values built from the recorded JSON (not from the bytes) encode to
the same bytes; the version is detected from the bytes; the ZMQ frames
(topic, seq, replay) are vLLM's.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from typing import Any

import msgspec
import pytest
from beartype.roar import BeartypeCallHintParamViolation

from kvpure.events import (
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventFieldNotInProfileError,
    EventFrameError,
    EventMessage,
    EventProfile,
    ExtraKey,
    KVEventArgumentTypeError,
    KVEventBatch,
    KVEventEncodeError,
    UnknownEventFieldError,
    UnknownEventProfileError,
    decode_and_detect,
    decode_batch,
    decode_message,
    decode_report,
    encode_batch,
    encode_event,
    encode_message,
    encode_replay_request,
    get_event_profile,
    is_replay_end,
)
from kvpure.interop.kv_events import batch_to_json, event_from_json, event_to_json
from tests.conftest import GOLDEN_026, GOLDEN_033

GOLDENS = {
    "vllm-0.26": json.loads((GOLDEN_026 / "kv_events.json").read_text()),
    "vllm-0.33": json.loads((GOLDEN_033 / "kv_events.json").read_text()),
}
PROFILES = {"vllm-0.26": VLLM_0_26_EVENTS, "vllm-0.33": VLLM_0_33_EVENTS}


def _batches() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (version, case_name, batch)
        for version, golden in GOLDENS.items()
        for case_name, case in golden["cases"].items()
        for batch in case["batches"]
    ]


BATCHES = _batches()
IDS = [f"{v}-{c}-{b['seq']}" for v, c, b in BATCHES]


def _payload(batch: dict[str, Any]) -> bytes:
    return bytes.fromhex(batch["frames_hex"][2])


def _expected_events(batch: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "msgpack_hex"} for e in batch["events"]]


def test_every_golden_case_is_covered() -> None:
    assert len(BATCHES) == 36
    kinds = {e["type"] for _, _, b in BATCHES for e in b["events"]}
    assert kinds == {"BlockStored", "BlockRemoved", "AllBlocksCleared"}


@pytest.mark.parametrize(("version", "case", "golden"), BATCHES, ids=IDS)
def test_decodes_to_the_recorded_fields(version: str, case: str, golden: dict[str, Any]) -> None:
    profile = PROFILES[version]
    batch = decode_batch(_payload(golden), profile=profile)
    assert batch.ts == golden["ts"]
    assert batch.data_parallel_rank == golden["data_parallel_rank"]
    assert batch_to_json(batch, profile)["events"] == _expected_events(golden)


@pytest.mark.parametrize(("version", "case", "golden"), BATCHES, ids=IDS)
def test_reencodes_byte_for_byte(version: str, case: str, golden: dict[str, Any]) -> None:
    profile = PROFILES[version]
    payload = _payload(golden)
    batch = decode_batch(payload)
    assert encode_batch(batch, profile=profile) == payload
    for event, recorded in zip(batch.events, golden["events"], strict=True):
        assert encode_event(event, profile=profile).hex() == recorded["msgpack_hex"]


@pytest.mark.parametrize(("version", "case", "golden"), BATCHES, ids=IDS)
def test_values_from_the_recorded_json_encode_to_the_recorded_bytes(
    version: str, case: str, golden: dict[str, Any]
) -> None:
    profile = PROFILES[version]
    events = tuple(event_from_json(e) for e in golden["events"])
    batch = KVEventBatch(
        ts=golden["ts"], events=events, data_parallel_rank=golden["data_parallel_rank"]
    )
    assert encode_batch(batch, profile=profile) == _payload(golden)
    assert batch == decode_batch(_payload(golden))


@pytest.mark.parametrize(("version", "case", "golden"), BATCHES, ids=IDS)
def test_the_version_is_detected_from_the_bytes(
    version: str, case: str, golden: dict[str, Any]
) -> None:
    detected = decode_and_detect(_payload(golden))
    names = [p.name for p in detected.profiles]
    if any(e["type"] == "BlockStored" for e in golden["events"]):
        assert names == [version]
    else:  # BlockRemoved and AllBlocksCleared are the same bytes in both versions
        assert names == ["vllm-0.26", "vllm-0.33"]


def test_033_writes_block_stored_two_bytes_longer() -> None:
    # batch 1 (a plain request) has the same hashes in both versions
    golden_033 = GOLDENS["vllm-0.33"]["cases"]["int_block_hashes"]["batches"][1]
    batch = decode_batch(_payload(golden_033))
    old = encode_batch(batch, profile=VLLM_0_26_EVENTS)
    new = encode_batch(batch, profile=VLLM_0_33_EVENTS)
    assert len(new) - len(old) == 2 * len(batch.events)
    assert new.hex().count("de000ba474797065") == 1  # map16 header, 11 keys, then "type"
    assert old.hex().count("8ba474797065") == 1  # the fixmap of the same event
    event_026 = GOLDENS["vllm-0.26"]["cases"]["int_block_hashes"]["batches"][1]["events"][0]
    assert (
        encode_event(batch.events[0], profile=VLLM_0_26_EVENTS).hex() == (event_026["msgpack_hex"])
    )


def test_nested_extra_keys_come_back_as_tuples() -> None:
    # vLLM's own typed decode gives lists there ("typed_decode_equal": false)
    golden = GOLDENS["vllm-0.26"]["cases"]["int_block_hashes"]["batches"][0]
    assert golden["typed_decode_equal"] is False
    event = decode_batch(_payload(golden)).events[0]
    assert isinstance(event, BlockStored)
    assert event.extra_keys == (("sql", ("img-1", 1), "tenant-1"), ("sql", ("img-1", -3)))
    assert isinstance(event.extra_keys[0], ExtraKey)
    assert type(event.extra_keys[0][1]) is tuple
    assert hash(event) == hash(decode_batch(_payload(golden)).events[0])
    assert repr(event.extra_keys[1]) == "ExtraKey(('sql', ('img-1', -3)))"


def test_values_are_frozen() -> None:
    event = BlockRemoved(block_hashes=(1,), medium="GPU")
    with pytest.raises(AttributeError):
        event.medium = "CPU"  # type: ignore[misc]
    assert {event, BlockRemoved(block_hashes=(1,), medium="GPU")} == {event}


def test_a_field_the_profile_lacks_is_refused() -> None:
    stored = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        ownership="tier-1",
        session_id="s",
        lookahead_token_ids=((3, 4),),
    )
    batch = KVEventBatch(ts=1.0, events=(AllBlocksCleared(), stored), data_parallel_rank=0)
    payload = encode_batch(batch, profile=VLLM_0_33_EVENTS)
    assert decode_batch(payload) == batch
    assert decode_batch(payload, profile=VLLM_0_33_EVENTS) == batch
    with pytest.raises(EventFieldNotInProfileError) as err:
        decode_batch(payload, profile=VLLM_0_26_EVENTS, strict=True)
    assert (err.value.event_index, err.value.field) == (1, "ownership")
    assert isinstance(err.value, UnknownEventFieldError)
    # not strict: vLLM 0.26's decoder skips what its BlockStored lacks; named in the report
    report = decode_report(payload, profile=VLLM_0_26_EVENTS)
    assert report.batch.events[1] == msgspec.structs.replace(
        stored, ownership=None, session_id=None, lookahead_token_ids=None
    )
    assert [(u.event_index, u.event_type, u.field) for u in report.unknown_fields] == [
        (1, "BlockStored", "ownership"),
        (1, "BlockStored", "session_id"),
        (1, "BlockStored", "lookahead_token_ids"),
    ]
    with pytest.raises(EventFieldNotInProfileError):
        encode_batch(batch, profile=VLLM_0_26_EVENTS)
    assert [p.name for p in decode_and_detect(payload).profiles] == ["vllm-0.33"]
    removed = BlockRemoved(block_hashes=(1,), medium="GPU", ownership="tier-1")
    with pytest.raises(EventFieldNotInProfileError, match="BlockRemoved"):
        encode_event(removed, profile=VLLM_0_26_EVENTS)


def test_profiles_match_the_goldens_schema() -> None:
    for name, golden in GOLDENS.items():
        profile = get_event_profile(name)
        for event_type in ("BlockStored", "BlockRemoved", "AllBlocksCleared"):
            fields = tuple(f["name"] for f in golden["schema"][event_type]["fields"])
            assert profile.fields_of(event_type) == fields
        batch_fields = [f["name"] for f in golden["schema"]["KVEventBatch"]["fields"]]
        assert batch_fields == list(KVEventBatch.__struct_fields__)
    assert profile.hash_profile.name == "vllm-0.33"
    with pytest.raises(UnknownEventProfileError, match=r"vllm-0\.26, vllm-0\.33"):
        get_event_profile("vllm-0.1")


def test_a_custom_profile_follows_its_field_count() -> None:
    # a version whose BlockStored has 16 fields would be map16 as well; one with the
    # 0.33 fields but a fixmap-sized BlockRemoved keeps the fixmap
    trimmed = EventProfile(
        name="trimmed",
        vllm_version="0",
        event_fields=(("BlockStored", VLLM_0_26_EVENTS.fields_of("BlockStored")[:7]),),
        hash_profile=VLLM_0_26_EVENTS.hash_profile,
    )
    event = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(),
        block_size=1,
        lora_id=None,
        medium=None,
        lora_name=None,
    )
    assert encode_event(event, profile=trimmed)[0] == 0x88
    with pytest.raises(EventFieldNotInProfileError, match="block_hashes"):
        encode_event(BlockRemoved(block_hashes=(1,), medium=None), profile=trimmed)


def test_pub_frames_and_replay_are_vllms() -> None:
    for golden in GOLDENS.values():
        case = golden["cases"]["dp_rank_1_with_topic"]
        for batch in case["batches"]:
            frames = [bytes.fromhex(f) for f in batch["frames_hex"]]
            message = decode_message(frames)
            assert message.topic == "kv@node-7"
            assert message.seq == batch["seq"]
            assert message.batch.data_parallel_rank == 1
            profile = decode_and_detect(frames[2]).profiles[-1]
            assert list(encode_message(message, profile=profile)) == frames
        replay = case["replay"]
        request = [bytes.fromhex(f) for f in replay["request_frames_hex"]]
        assert list(encode_replay_request(1)) == request[1:]
        *replies, end = [[bytes.fromhex(f) for f in reply] for reply in replay["reply_frames_hex"]]
        assert is_replay_end(end)
        with pytest.raises(EventFrameError, match="end marker"):
            decode_message(end)
        assert [decode_message(r).seq for r in replies] == list(range(1, len(replies) + 1))
        assert not any(is_replay_end(r) for r in replies)


def test_frame_errors() -> None:
    with pytest.raises(EventFrameError, match="2 frames"):
        decode_message([b"", b"\0" * 8])
    with pytest.raises(EventFrameError, match="seq frame has 4 bytes"):
        decode_message([b"", b"\0" * 4, b"\x92\x00\x90"])
    with pytest.raises(EventFrameError, match="UTF-8"):
        decode_message([b"\xff", b"\0" * 8, b"\x92\x00\x90"])
    with pytest.raises(EventFrameError, match="outside"):
        encode_replay_request(-1)
    with pytest.raises(EventFrameError, match="outside"):  # refused when the value is built
        EventMessage(topic="", seq=2**64 - 1, batch=KVEventBatch(ts=0.0, events=()))
    with pytest.raises(EventFrameError, match="outside"):  # the end marker with a payload
        decode_message([b"t", b"\xff" * 8, b"\x92\x00\x90"])
    assert not is_replay_end([b"", b""])


_WRONG_TYPES = """
from kvpure.events import *
checks = [
    lambda: decode_batch("93"),
    lambda: encode_batch(AllBlocksCleared(), profile=VLLM_0_33_EVENTS),
    lambda: encode_event(KVEventBatch(ts=0.0, events=()), profile=VLLM_0_33_EVENTS),
    lambda: encode_batch(KVEventBatch(ts=0.0, events=()), profile="vllm-0.33"),
]
for check in checks:
    try:
        check()
    except KVEventArgumentTypeError as err:
        assert isinstance(err, TypeError), err
        print(err.argument)
"""


def test_argument_types_are_checked_in_a_users_process() -> None:
    # under pytest beartype checks first; a user's process has kvpure's own checks
    with pytest.raises(BeartypeCallHintParamViolation):
        decode_batch("93")  # type: ignore[arg-type]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _WRONG_TYPES], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["payload", "batch", "event", "profile"]


def test_unencodable_values_are_typed_errors() -> None:
    event = BlockRemoved(block_hashes=(2**64,), medium="GPU")
    with pytest.raises(KVEventEncodeError):
        encode_event(event, profile=VLLM_0_33_EVENTS)
    fields: dict[str, Any] = {
        "block_hashes": (1,),
        "parent_block_hash": None,
        "token_ids": (1,),
        "block_size": 1,
        "lora_id": None,
        "medium": None,
        "lora_name": None,
    }
    with pytest.raises(KVEventArgumentTypeError, match=r"BlockStored\.extra_keys\[0\]"):
        BlockStored(**fields, extra_keys=(ExtraKey((object(),)),))
    # built past the checks (msgspec.structs.replace does not call the class)
    keys = msgspec.structs.replace(BlockStored(**fields), extra_keys=(ExtraKey((object(),)),))
    with pytest.raises(KVEventEncodeError):
        encode_event(keys, profile=VLLM_0_33_EVENTS)


def test_errors_pickle_with_their_attributes() -> None:
    err = EventFieldNotInProfileError(
        profile="vllm-0.26", event_index=3, event_type="BlockStored", field="ownership"
    )
    again = pickle.loads(pickle.dumps(err))
    assert (again.event_index, again.field, str(again)) == (3, "ownership", str(err))


def test_json_form_round_trips_bytes_in_extra_keys() -> None:
    event = BlockStored(
        block_hashes=(b"\x01" * 32,),
        parent_block_hash=b"\x02" * 32,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        extra_keys=(ExtraKey((b"\x03\x04", ("img", -1))),),
    )
    data = event_to_json(event, VLLM_0_33_EVENTS)
    assert data["extra_keys"] == [[{"$bin": "0304"}, ["img", -1]]]
    assert event_from_json(json.loads(json.dumps(data))) == event
    raw = msgspec.msgpack.decode(encode_event(event, profile=VLLM_0_33_EVENTS))
    assert raw["extra_keys"] == [[b"\x03\x04", ["img", -1]]]
