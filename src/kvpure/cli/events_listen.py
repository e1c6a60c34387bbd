"""``kvpure events listen ENDPOINT``: subscribe to a vLLM server's KV events and print them.

Connects a ZMQ SUB socket to ENDPOINT (the server's ``--kv-events-config``
endpoint, e.g. ``tcp://127.0.0.1:5557``; data-parallel rank ``r`` publishes on
port + ``r``), prints each batch as ``decode`` does (``--json``: one line per
batch, with its ``topic`` and ``seq``), says when sequence numbers skip (the
batches in between are lost; the server's replay socket still has them), and
with ``--capture FILE`` appends each payload to a capture file. Needs pyzmq
(``pip install pyzmq``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kvpure.events.errors import KVEventError
from kvpure.events.frames import capture_record, decode_message
from kvpure.events.profiles import EVENT_PROFILES, EventProfile, get_event_profile
from kvpure.events.wire import decode_and_detect
from kvpure.interop.kv_events import batch_to_json

if TYPE_CHECKING:
    import zmq

EXIT_BAD_INPUT = 2


def add_listen(actions: Any) -> None:
    """Add ``listen`` to the ``events`` actions (an argparse subparsers action)."""
    listen: argparse.ArgumentParser = actions.add_parser(
        "listen",
        help="subscribe to a server's KV events",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    listen.add_argument("endpoint", metavar="ENDPOINT", help="e.g. tcp://127.0.0.1:5557")
    listen.add_argument("--topic", default="", help="the publisher's topic (default: all)")
    listen.add_argument("--count", type=int, default=None, help="stop after this many batches")
    listen.add_argument(
        "--timeout", type=float, default=None, help="stop after this many seconds without a batch"
    )
    listen.add_argument("--capture", default=None, metavar="FILE", help="append payloads here")
    listen.add_argument("--profile", choices=tuple(EVENT_PROFILES), help="the server's version")
    listen.add_argument("--json", action="store_true", help="one JSON line per batch")
    listen.set_defaults(run=run_listen)


def _error(message: str) -> int:
    print(f"kvpure: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_listen(args: argparse.Namespace) -> int:
    try:
        import zmq
    except ImportError:
        return _error("kvpure events listen needs pyzmq: pip install pyzmq")
    if args.count is not None and args.count < 1:
        return _error(f"--count {args.count}: expected at least 1 batch")
    profile = get_event_profile(args.profile) if args.profile else None
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    try:
        socket.connect(args.endpoint)
    except zmq.ZMQError as err:
        socket.close(linger=0)
        return _error(f"{args.endpoint}: {err}")
    socket.setsockopt(zmq.SUBSCRIBE, args.topic.encode("utf-8"))
    capture = Path(args.capture).open("ab") if args.capture else None  # noqa: SIM115
    try:
        return _loop(socket, args, profile, capture)
    finally:
        socket.close(linger=0)
        if capture is not None:
            capture.close()


def _loop(
    socket: zmq.Socket[bytes],
    args: argparse.Namespace,
    profile: EventProfile | None,
    capture: IO[bytes] | None,
) -> int:
    from kvpure.cli.events_command import describe_event  # events_command imports this module

    timeout_ms = None if args.timeout is None else int(args.timeout * 1000)
    received = 0
    last_seq: int | None = None
    while args.count is None or received < args.count:
        if not socket.poll(timeout_ms):
            break
        frames: list[bytes] = socket.recv_multipart()
        try:
            message = decode_message(frames, profile=profile)
            profiles = (profile,) if profile else decode_and_detect(frames[-1]).profiles
        except KVEventError as err:
            return _error(f"message {received}: {err}")
        if last_seq is not None and message.seq != last_seq + 1:
            missed = message.seq - last_seq - 1
            print(f"seq {message.seq} follows {last_seq}: {missed} batches missed", file=sys.stderr)
        last_seq = message.seq
        if capture is not None:
            capture.write(capture_record(frames[-1]))
            capture.flush()
        shown = profiles[-1] if profiles else tuple(EVENT_PROFILES.values())[-1]
        if args.json:
            line = {
                "topic": message.topic,
                "seq": message.seq,
                **batch_to_json(message.batch, shown),
                "profiles": [p.name for p in profiles],
            }
            print(json.dumps(line, separators=(",", ":")), flush=True)
        else:
            batch = message.batch
            print(
                f"seq {message.seq} topic {message.topic!r}: ts {batch.ts!r}, "
                f"data_parallel_rank {batch.data_parallel_rank}, {len(batch.events)} events"
            )
            for number, event in enumerate(batch.events):
                print(f"  [{number}] {describe_event(event)}", flush=True)
        received += 1
    return 0
