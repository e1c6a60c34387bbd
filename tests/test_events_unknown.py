"""Fields the events do not declare, vLLM 0.34's goldens, and mutated frames.

vLLM's decoder (``msgspec.msgpack.Decoder(KVEventBatch)``, structs that do not
forbid unknown fields) skips a key its struct does not declare and batch
elements past ``data_parallel_rank``; kvpure does the same and names them,
and refuses them in strict mode. The reference for "what vLLM's decoder
reads" is vLLM's own struct classes (``tests/vllm_event_structs.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from beartype.roar import BeartypeCallHintParamViolation

import kvpure.cli as cli
from kvpure.events import (
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    EmptyEventInputError,
    EventCaptureError,
    EventFieldNotInProfileError,
    EventFrameError,
    KVEventDecodeError,
    UnknownEventFieldError,
    decode_and_detect,
    decode_batch,
    decode_message,
    decode_report,
    encode_batch,
    get_event_profile,
    split_capture,
)
from tests.conftest import DATA_DIR
from tests.vllm_event_structs import vllm_event_structs

GOLDENS = {
    release: json.loads((DATA_DIR / f"vllm-{release}.0" / "kv_events.json").read_text())
    for release in ("0.26", "0.33", "0.34")
}


def _frames(release: str) -> list[list[bytes]]:
    return [
        [bytes.fromhex(frame) for frame in batch["frames_hex"]]
        for case in GOLDENS[release]["cases"].values()
        for batch in case["batches"]
    ]


_NEW_ENTRY = msgspec.msgpack.encode("hit_source") + msgspec.msgpack.encode(["gpu", 1])


def _grow(event: bytes) -> bytes:
    """One more key at the end of an event map, its header kept in its width."""
    if event[0] == 0xDE:
        count = int.from_bytes(event[1:3], "big") + 1
        return b"\xde" + count.to_bytes(2, "big") + event[3:] + _NEW_ENTRY
    return bytes((event[0] + 1,)) + event[1:] + _NEW_ENTRY


def _with_new_fields(payload: bytes) -> bytes:
    """``payload`` as a newer vLLM might write it: a new key at the end of every event,
    one more element in the batch array; every other byte as it was."""
    ts, events, *rest = msgspec.msgpack.decode(payload, type=list[Any])
    layout = tuple[float, list[msgspec.Raw], int] if rest else tuple[float, list[msgspec.Raw]]
    raw_events: list[msgspec.Raw] = msgspec.msgpack.decode(payload, type=layout)[1]  # type: ignore[assignment]  # the layout's second item
    grown = [msgspec.Raw(_grow(bytes(event))) for event in raw_events]
    assert len(grown) == len(events)
    return msgspec.msgpack.encode([ts, grown, *rest, "extra"])


# --- 0.34's goldens ---------------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.26", "0.33", "0.34"])
def test_goldens_decode_and_re_encode_byte_for_byte(release: str) -> None:
    profile = get_event_profile(f"vllm-{release}")
    for frames in _frames(release):
        payload = frames[2]
        batch = decode_batch(payload, profile=profile, strict=True)
        assert encode_batch(batch, profile=profile) == payload
        assert decode_message(frames).batch == batch


def test_034_is_033_on_the_wire() -> None:
    assert get_event_profile("vllm-0.34") is VLLM_0_33_EVENTS
    assert _frames("0.34") == _frames("0.33")  # the goldens' bytes, as the contract says
    for frames in _frames("0.34"):
        assert VLLM_0_33_EVENTS in decode_and_detect(frames[2]).profiles


# --- unknown fields -----------------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.26", "0.33", "0.34"])
def test_unknown_fields_are_skipped_as_vllm_skips_them(release: str) -> None:
    real = vllm_event_structs(f"vllm-{release}")
    for frames in _frames(release):
        payload = frames[2]
        grown = _with_new_fields(payload)
        if real is not None:  # vLLM's own decoder reads the grown payload, and the same events
            theirs = msgspec.msgpack.Decoder(real.KVEventBatch).decode(grown)
            assert len(theirs.events) == len(decode_batch(payload).events)
        report = decode_report(grown)
        assert report.batch == decode_batch(payload)
        events = report.batch.events
        assert [u.describe() for u in report.unknown_fields] == [
            *(f"event {i} ({type(e).__name__}) field 'hit_source'" for i, e in enumerate(events)),
            "batch element [3]",
        ]
        assert decode_batch(grown) == report.batch
        detected = decode_and_detect(grown)  # the version, apart from the new fields
        assert detected.batch == report.batch
        assert detected.profiles == decode_and_detect(payload).profiles
        assert detected.unknown_fields == report.unknown_fields
        with pytest.raises(UnknownEventFieldError):
            decode_batch(grown, strict=True)


def test_strict_mode_names_the_field() -> None:
    payload = _with_new_fields(_frames("0.33")[0][2])
    with pytest.raises(UnknownEventFieldError) as caught:
        decode_batch(payload, strict=True)
    assert (caught.value.event_index, caught.value.field) == (0, "hit_source")
    with pytest.raises(UnknownEventFieldError):
        decode_and_detect(payload, strict=True)
    with pytest.raises(UnknownEventFieldError):
        decode_message([b"", b"\0" * 8, payload], strict=True)
    with pytest.raises((TypeError, BeartypeCallHintParamViolation)):
        decode_report(payload, strict=1)  # type: ignore[arg-type]  # a flag, not an int


def test_a_field_another_release_has_is_dropped_under_that_profile() -> None:
    raw = msgspec.msgpack.decode(_frames("0.26")[0][2])
    raw[1][0]["session_id"] = "s-1"  # a 0.33 field in a 0.26 stream
    payload = msgspec.msgpack.encode(raw)
    report = decode_report(payload, profile=VLLM_0_26_EVENTS)
    assert [(u.event_index, u.field) for u in report.unknown_fields] == [(0, "session_id")]
    assert getattr(report.batch.events[0], "session_id", "?") is None
    assert decode_batch(payload).events[0] == decode_report(payload).batch.events[0]
    with pytest.raises(EventFieldNotInProfileError):
        decode_batch(payload, profile=VLLM_0_26_EVENTS, strict=True)


def test_unknown_fields_in_a_broken_payload_still_give_the_broken_bytes_error() -> None:
    grown = _with_new_fields(_frames("0.33")[0][2])
    for cut in range(1, len(grown), 7):
        with pytest.raises(KVEventDecodeError):
            decode_batch(grown[:cut])


# --- the command --------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_names_unknown_fields_and_strict_refuses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "grown.msgpack"
    path.write_bytes(_with_new_fields(_frames("0.33")[0][2]))
    code, out, err = _run(capsys, ["events", "decode", str(path), "--json"])
    assert (code, err) == (0, "")
    line = json.loads(out)
    assert line["unknown_fields"][0] == {"event": 0, "type": "BlockStored", "field": "hit_source"}
    assert line["unknown_fields"][-1] == {"event": None, "type": None, "field": "[3]"}
    code, out, err = _run(capsys, ["events", "decode", str(path)])
    assert code == 0
    assert "fields skipped (not declared by the events)" in out
    code, out, err = _run(capsys, ["events", "decode", str(path), "--strict"])
    assert (code, out) == (2, "")
    assert err.startswith("kvpure: error: frame 0: KV event batch: event 0 (BlockStored), ")
    assert err.count("\n") == 1
    audit = ["events", "audit", str(path), "--algo", "sha256_cbor", "--seed", "0", "--json"]
    code, out, _ = _run(capsys, [*audit, "--lora-path", "sql=/adapters/sql"])
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert (code, summary["agrees"]) == (0, 2)
    assert len(summary["unknown_fields"]) == 3
    assert _run(capsys, [*audit, "--strict"])[0] == 2


def test_empty_input_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, out, err = _run(capsys, ["events", "decode", "-"])
    assert (code, out) == (2, "")
    assert err == (
        "kvpure: error: standard input: the input is empty; expected one payload or a "
        "capture (4-byte big-endian length + payload, repeated)\n"
    )
    empty = tmp_path / "empty.kvcap"
    empty.write_bytes(b"")
    code, out, err = _run(capsys, ["events", "audit", str(empty), "--algo", "sha256"])
    assert (code, out) == (2, "")
    assert f"{empty}: the input is empty" in err
    assert issubclass(EmptyEventInputError, KVEventDecodeError)


# --- mutated frames: typed errors only ----------------------------------------------------

_TYPED = (KVEventDecodeError,)


def _mutate(rng: random.Random, data: bytes) -> bytes:
    mutated = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        action = rng.random()
        position = rng.randrange(len(mutated) + 1)
        if action < 0.6 and mutated:
            mutated[min(position, len(mutated) - 1)] = rng.randrange(256)
        elif action < 0.8:
            mutated[position:position] = bytes([rng.randrange(256)])
        elif mutated:
            del mutated[min(position, len(mutated) - 1)]
    return bytes(mutated)


@pytest.mark.parametrize("release", ["0.26", "0.33", "0.34"])
def test_600_mutated_payloads_give_typed_errors_only(release: str) -> None:
    rng = random.Random(f"kv-events-{release}")
    all_frames = _frames(release)
    outcomes = {"decoded": 0, "refused": 0}
    for _ in range(600):
        frames = rng.choice(all_frames)
        payload = _mutate(rng, frames[2])
        for strict in (False, True):
            try:
                decode_batch(payload, strict=strict)
                decode_and_detect(payload, strict=strict)
                outcomes["decoded"] += 1
            except _TYPED as err:
                message = str(err)
                outcomes["refused"] += 1
                assert "\n" not in message
        mutated = [_mutate(rng, frame) if rng.random() < 0.5 else frame for frame in frames]
        with contextlib.suppress(KVEventDecodeError):
            decode_message(mutated)
        capture = b"".join(len(f[2]).to_bytes(4, "big") + f[2] for f in all_frames[:3])
        with contextlib.suppress(KVEventDecodeError):
            for part in split_capture(_mutate(rng, capture)):
                decode_report(part)
    assert outcomes["refused"] > 100  # the mutations do break payloads
    assert issubclass(EventFrameError, KVEventDecodeError)
    assert issubclass(EventCaptureError, KVEventDecodeError)


def test_decoded_mutations_re_encode_to_what_decodes_the_same() -> None:
    rng = random.Random("re-encode")
    all_frames = _frames("0.33")
    for _ in range(300):
        payload = _mutate(rng, rng.choice(all_frames)[2])
        try:
            batch = decode_batch(payload)
        except KVEventDecodeError:
            continue
        again: Any = decode_batch(encode_batch(batch, profile=VLLM_0_33_EVENTS))
        assert again == batch


def test_a_large_decode_pauses_the_collector_and_restores_it() -> None:
    import gc

    from kvpure.events.wire import GC_PAUSE_BYTES

    events = [{"type": "BlockRemoved", "block_hashes": list(range(16)), "medium": "GPU"}] * 2000
    payload = msgspec.msgpack.encode([1.0, events, 0])
    assert len(payload) >= GC_PAUSE_BYTES
    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(phase == "start"))
    try:
        assert gc.isenabled()
        decode_batch(payload)
        assert gc.isenabled()  # on again
        assert not seen  # no collection ran inside the decode
        gc.disable()
        decode_batch(payload)
        assert not gc.isenabled()  # a caller's choice is kept
        gc.enable()
        with pytest.raises(KVEventDecodeError):
            decode_batch(payload[:-1])
        assert gc.isenabled()  # also after an error
    finally:
        gc.callbacks.pop()
        gc.enable()
