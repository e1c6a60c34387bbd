"""``kvpure events decode|audit``: through ``kvpure.cli.main`` with the command registered
by a parser built here (``kvpure.cli`` registers it once merged), and one real subprocess."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

import kvpure.cli as cli
from kvpure.cli import events_command
from kvpure.events import capture_record
from tests.conftest import GOLDEN_026, GOLDEN_033

GOLDENS = {
    "vllm-0.26": json.loads((GOLDEN_026 / "kv_events.json").read_text()),
    "vllm-0.33": json.loads((GOLDEN_033 / "kv_events.json").read_text()),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = cli._Parser(prog="kvpure")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=cli._Parser)
    sub.required = True
    events_command.register(sub)
    return parser


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "build_parser", _build_parser)


def _payloads(version: str, case: str) -> list[bytes]:
    batches = GOLDENS[version]["cases"][case]["batches"]
    return [bytes.fromhex(b["frames_hex"][2]) for b in batches]


def _capture(tmp_path: Path, version: str, case: str) -> Path:
    path = tmp_path / f"{version}-{case}.kvcap"
    path.write_bytes(b"".join(capture_record(p) for p in _payloads(version, case)))
    return path


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("version", ["vllm-0.26", "vllm-0.33"])
@pytest.mark.parametrize("case", ["int_block_hashes", "bytes_block_hashes", "dp_rank_1_with_topic"])
def test_decode_json_prints_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, case: str
) -> None:
    code, out, err = _run(
        capsys, ["events", "decode", str(_capture(tmp_path, version, case)), "--json"]
    )
    assert (code, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    golden = GOLDENS[version]["cases"][case]["batches"]
    assert len(lines) == len(golden)
    for number, (line, batch) in enumerate(zip(lines, golden, strict=True)):
        assert line["frame"] == number
        assert (line["ts"], line["data_parallel_rank"]) == (
            batch["ts"],
            batch["data_parallel_rank"],
        )
        expected = [{k: v for k, v in e.items() if k != "msgpack_hex"} for e in batch["events"]]
        assert line["events"] == expected
        assert version in line["profiles"]


def test_decode_reads_one_payload_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = _payloads("vllm-0.33", "int_block_hashes")[0]
    path = tmp_path / "one.msgpack"
    path.write_bytes(payload)
    code, out, _ = _run(capsys, ["events", "decode", str(path)])
    assert code == 0
    assert out.splitlines()[0] == (
        "frame 0: ts 1767225600.0, data_parallel_rank 0, 2 events, written as vllm-0.33"
    )
    assert "[1] BlockStored group 1 sliding_window 2 blocks of 4 tokens" in out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert _run(capsys, ["events", "decode", "-"])[1] == out


def test_decode_with_a_profile_checks_its_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _capture(tmp_path, "vllm-0.33", "bytes_block_hashes")
    code, out, _ = _run(capsys, ["events", "decode", str(path), "--profile", "vllm-0.26", "--json"])
    assert code == 0  # the 0.33 events here set no field 0.26 lacks
    assert all(json.loads(line)["profiles"] == ["vllm-0.26"] for line in out.splitlines())


def test_decode_shows_every_field_of_bytes_no_vllm_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    removed = {"type": "BlockRemoved", "medium": "GPU", "block_hashes": [7], "ownership": "t"}
    path = tmp_path / "other-encoder.msgpack"
    path.write_bytes(msgspec.msgpack.encode([1.0, [removed], 0]))  # keys in another order
    code, out, _ = _run(capsys, ["events", "decode", str(path), "--json"])
    line = json.loads(out)
    assert (code, line["profiles"]) == (0, [])
    assert line["events"] == [
        {"type": "BlockRemoved", "block_hashes": [7], "medium": "GPU", "group_idx": None,
         "locality": None, "ownership": "t"}
    ]  # fmt: skip


def test_audit_agrees_under_the_servers_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _capture(tmp_path, "vllm-0.33", "int_block_hashes")
    argv = ["events", "audit", str(path), "--algo", "sha256_cbor", "--seed", "0"]
    code, out, err = _run(capsys, [*argv, "--lora-path", "sql=/adapters/sql"])
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "settings: sha256_cbor, block_size 4 tokens, seed '0', profile vllm-0.33, "
        "lookahead 0 tokens",
        "12 BlockStored events: 12 agree, 0 disagree, 0 unverifiable (12 other events)",
    ]
    code, out, _ = _run(capsys, argv)  # without the LoRA path
    assert code == 1
    assert "LoRA path" in out
    assert _run(capsys, [*argv, "--allow-unverifiable"])[0] == 0


def test_audit_names_the_wrong_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _capture(tmp_path, "vllm-0.26", "int_block_hashes")
    argv = ["events", "audit", str(path), "--algo", "sha256_cbor", "--seed", "7", "--json"]
    code, out, err = _run(capsys, argv)
    assert (code, err) == (1, "")
    *events, summary = [json.loads(line) for line in out.splitlines()]
    assert len(events) == 12
    assert events[0]["status"] == "disagrees"
    # machine-readable: the values themselves, not their quoted text
    assert events[0]["explanations"] == [[{"setting": "seed", "yours": "7", "server": "0"}]]
    assert summary["summary"]["likely"] == [{"setting": "seed", "yours": "7", "server": "0"}]
    assert (summary["summary"]["seed"], summary["summary"]["block_size"]) == ("7", 4)
    assert summary["summary"]["disagrees"] == 12
    text = _run(capsys, argv[:-1])[1]
    assert text.splitlines()[-1] == "likely: the server uses seed '0' where you use '7'"
    hashes = ["events", "audit", str(path), "--algo", "sha256_cbor", "--seed", "0"]
    code, out, _ = _run(capsys, [*hashes, "--hashes", "bytes"])
    assert code == 1
    assert "hash_form int where you use bytes" in out


def test_audit_without_seed_tries_the_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _capture(tmp_path, "vllm-0.26", "bytes_block_hashes")
    code, out, _ = _run(capsys, ["events", "audit", str(path), "--algo", "sha256_cbor"])
    assert code == 1
    assert "NONE_HASH is random (PYTHONHASHSEED unset); agrees with seed '0' (yours unset)" in out


_FIRST = bytes.fromhex(
    GOLDENS["vllm-0.26"]["cases"]["int_block_hashes"]["batches"][0]["frames_hex"][2]
)
BAD_INPUTS: list[tuple[str, bytes, str]] = [
    ("cut capture record", capture_record(_FIRST)[:-5],
     "kvpure: error: capture record 0 at byte 0: the record says 494 bytes, 489 are left"),
    ("cut payload", _FIRST[:60],
     "kvpure: error: frame 0: KV event batch: event 0 (BlockStored), field block_hashes: "),
    ("wrong type", capture_record(b"\x93\xcb" + b"\0" * 8 + b"\x91\x81\xa4type\x05\x00"),
     "kvpure: error: frame 0: KV event batch: event 0, field type: Expected `str`, got `int`"),
    ("short prefix", b"\x00\x00", "kvpure: error: capture record 0 at byte 0: 2 bytes left"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS]
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, message: str
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(data)
    for action in (["decode"], ["audit", "--algo", "sha256"]):
        code, out, err = _run(capsys, ["events", action[0], str(path), *action[1:]])
        assert (code, out) == (2, "")
        assert err.startswith(message), err
        assert err.count("\n") == 1


def test_other_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _capture(tmp_path, "vllm-0.26", "int_block_hashes")
    cases: dict[str, list[str]] = {
        "kvpure: error: ": ["events", "audit", str(tmp_path / "missing"), "--algo", "sha256"],
        "kvpure: error: --lora-path 'sql': expected NAME=PATH": [
            "events", "audit", str(good), "--algo", "sha256", "--lora-path", "sql"
        ],
        "kvpure: error: events audit: argument --block-size: expected at least 1, got 0": [
            "events", "audit", str(good), "--algo", "sha256", "--block-size", "0"
        ],
        "kvpure: error: events: the following arguments are required": ["events"],
        "kvpure: error: events audit: argument --algo": [
            "events", "audit", str(good), "--algo", "md5"
        ],
    }  # fmt: skip
    for message, argv in cases.items():
        code, out, err = _run(capsys, argv)
        assert (code, out) == (2, ""), argv
        assert err.startswith(message), err
        assert err.count("\n") == 1


_SUBPROCESS = """
import sys
import kvpure.cli as cli
from kvpure.cli import events_command

def build():
    parser = cli._Parser(prog="kvpure")
    sub = parser.add_subparsers(dest="command", parser_class=cli._Parser)
    events_command.register(sub)
    return parser

cli.build_parser = build
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.msgpack"
    path.write_bytes(b"\x93\xcb\x00\x00")
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, "events", "decode", str(path)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "kvpure: error: frame 0: KV event batch: batch, field ts: a scalar needs 8 bytes, "
        "2 left (byte 2)\n"
    )


def test_listen_prints_what_a_publisher_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zmq = pytest.importorskip("zmq")
    batches = GOLDENS["vllm-0.33"]["cases"]["dp_rank_1_with_topic"]["batches"]
    messages = [[bytes.fromhex(f) for f in b["frames_hex"]] for b in batches]
    publisher = zmq.Context.instance().socket(zmq.XPUB)
    port = publisher.bind_to_random_port("tcp://127.0.0.1")

    def publish() -> None:
        publisher.recv()  # the subscription arrived: nothing sent is lost to a slow joiner
        for seq, frames in enumerate(messages):
            if seq != 2:  # one batch lost on the way
                publisher.send_multipart(frames)

    thread = threading.Thread(target=publish)
    thread.start()
    capture = tmp_path / "listen.kvcap"
    argv = ["events", "listen", f"tcp://127.0.0.1:{port}", "--count", "5", "--timeout", "20"]
    try:
        code, out, err = _run(capsys, [*argv, "--json", "--capture", str(capture)])
    finally:
        thread.join(timeout=20)
        publisher.close(linger=0)
    assert (code, err) == (0, "seq 3 follows 1: 1 batches missed\n")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["seq"] for line in lines] == [0, 1, 3, 4, 5]
    assert {line["topic"] for line in lines} == {"kv@node-7"}
    assert all(line["profiles"] for line in lines)
    kept = [m[2] for seq, m in enumerate(messages) if seq != 2]
    assert capture.read_bytes() == b"".join(capture_record(p) for p in kept)


def test_listen_stops_and_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("zmq")
    quiet = ["events", "listen", "tcp://127.0.0.1:9", "--timeout", "0.05"]
    assert _run(capsys, quiet) == (0, "", "")
    code, out, err = _run(capsys, ["events", "listen", "nowhere"])
    assert (code, out) == (2, "")
    assert err.startswith("kvpure: error: nowhere: ")
    assert err.count("\n") == 1
    assert _run(capsys, [*quiet, "--count", "0"])[0] == 2


def test_listen_validates_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["events", "listen", "tcp://127.0.0.1:9"]
    for option, value in (
        ("--timeout", "inf"),
        ("--timeout", "nan"),
        ("--timeout", "-1"),
        ("--timeout", "1e300"),
        ("--timeout", "soon"),
        ("--count", "0"),
        ("--count", "1.5"),
        ("--max-frame-bytes", "0"),
        ("--max-frame-bytes", str(2**40)),
    ):
        code, out, err = _run(capsys, [*base, option, value])
        assert (code, out) == (2, ""), (option, value)
        assert err.startswith(f"kvpure: error: events listen: argument {option}: "), err
        assert err.count("\n") == 1


def _publish_once(zmq: Any, frames: list[bytes]) -> tuple[Any, threading.Thread, int]:
    publisher = zmq.Context.instance().socket(zmq.XPUB)
    port = publisher.bind_to_random_port("tcp://127.0.0.1")

    def publish() -> None:
        publisher.recv()  # the subscription arrived
        publisher.send_multipart(frames)

    thread = threading.Thread(target=publish)
    thread.start()
    return publisher, thread, port


def test_listen_caps_frames(capsys: pytest.CaptureFixture[str]) -> None:
    zmq = pytest.importorskip("zmq")
    payload = bytes.fromhex(
        GOLDENS["vllm-0.33"]["cases"]["int_block_hashes"]["batches"][0]["frames_hex"][2]
    )
    for frames, cap, message in (
        ([b"", b"\0" * 8, payload], "64", "over --max-frame-bytes 64"),
        ([b"x"] * 6 + [b"", b"\0" * 8, payload], None, "more than 5 frames"),
    ):
        publisher, thread, port = _publish_once(zmq, frames)
        wait = "3" if cap else "20"  # ZMQ may drop the oversized frame: nothing then arrives
        argv = ["events", "listen", f"tcp://127.0.0.1:{port}", "--count", "1", "--timeout", wait]
        try:
            code, out, err = _run(capsys, argv + (["--max-frame-bytes", cap] if cap else []))
        finally:
            thread.join(timeout=20)
            publisher.close(linger=0)
        if cap:  # ZMQ drops a frame over MAXMSGSIZE before allocating it, or kvpure refuses it
            assert out == ""
            assert code in (0, 2)
            assert code == 0 or message in err
        else:
            assert (code, out) == (2, "")
            assert message in err
            assert err.count("\n") == 1
