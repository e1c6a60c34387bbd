"""``kvpure events listen ENDPOINT``: subscribe to a vLLM server's KV events and print them.

Connects a ZMQ SUB socket to ENDPOINT (the server's ``--kv-events-config``
endpoint, e.g. ``tcp://127.0.0.1:5557``; data-parallel rank ``r`` publishes on
port + ``r``), prints each batch as ``decode`` does (``--json``: one line per
batch, with its ``topic`` and ``seq``), says when sequence numbers skip (the
batches in between are lost; the server's replay socket still has them), and
with ``--capture FILE`` appends each payload to a capture file. Needs pyzmq
(``pip install pyzmq``).

Bounded against a hostile or broken publisher: a message may hold at most
:data:`MAX_MESSAGE_FRAMES` frames and a frame at most ``--max-frame-bytes``
(default :data:`DEFAULT_MAX_FRAME_BYTES`; ZMQ drops a larger frame before
allocating it, and a frame that still arrives larger is refused). ``--timeout``
is a finite number of seconds, 0 to :data:`MAX_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import IO, TYPE_CHECKING, Any

from kvpure.cli.events_text import describe_event, unknown_fields_json, unknown_fields_text
from kvpure.errors import InvalidFieldError
from kvpure.events.errors import EventFrameError, KVEventError
from kvpure.events.frames import MAX_RECORD_BYTES, capture_record, decode_message
from kvpure.events.profiles import (
    EVENT_PROFILE_NAMES,
    EVENT_PROFILES,
    EventProfile,
    get_event_profile,
)
from kvpure.events.wire import decode_and_detect, decode_report
from kvpure.interop.kv_events import batch_to_json
from kvpure.user_files import open_regular_for_writing

if TYPE_CHECKING:
    import zmq

EXIT_BAD_INPUT = 2
MAX_MESSAGE_FRAMES = 5
"""A PUB message has 3 frames (topic, seq, payload); a replay answer 2 more."""
DEFAULT_MAX_FRAME_BYTES = 64 << 20
"""64 MiB: a batch of 1,000 BlockStored events of 16 blocks is about 1.4 MB."""
MAX_TIMEOUT_SECONDS = (2**31 - 1) // 1000
"""ZMQ's poll takes a 32-bit count of milliseconds (about 24.8 days)."""


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds from 0 to {MAX_TIMEOUT_SECONDS}, got {text}"
        )
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 2**62:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 2**62, got {text}")
    return value


def _frame_bytes(text: str) -> int:
    value = _positive(text)
    if value > MAX_RECORD_BYTES:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_RECORD_BYTES} (a capture record's limit), got {value}"
        )
    return value


def add_listen(actions: Any) -> None:
    """Add ``listen`` to the ``events`` actions (an argparse subparsers action)."""
    listen: argparse.ArgumentParser = actions.add_parser(
        "listen",
        help="subscribe to a server's KV events",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    listen.add_argument("endpoint", metavar="ENDPOINT", help="e.g. tcp://127.0.0.1:5557")
    listen.add_argument("--topic", default="", help="the publisher's topic (default: all)")
    listen.add_argument(
        "--count", type=_positive, default=None, help="stop after this many batches"
    )
    listen.add_argument(
        "--timeout",
        type=_timeout,
        default=None,
        help="stop after this many seconds without a batch (finite, >= 0; default: wait)",
    )
    listen.add_argument(
        "--max-frame-bytes",
        type=_frame_bytes,
        default=DEFAULT_MAX_FRAME_BYTES,
        metavar="N",
        help=f"refuse a frame larger than this (default: {DEFAULT_MAX_FRAME_BYTES})",
    )
    listen.add_argument("--capture", default=None, metavar="FILE", help="append payloads here")
    listen.add_argument("--profile", choices=EVENT_PROFILE_NAMES, help="the server's version")
    listen.add_argument("--json", action="store_true", help="one JSON line per batch")
    listen.add_argument(
        "--strict",
        action="store_true",
        help="refuse fields the events do not declare (default: skip and name them)",
    )
    listen.set_defaults(run=run_listen)


def _error(message: str) -> int:
    print(f"kvpure: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_listen(args: argparse.Namespace) -> int:
    try:
        import zmq
    except ImportError:
        return _error("kvpure events listen needs pyzmq: pip install pyzmq")
    try:
        topic = args.topic.encode("utf-8")
    except UnicodeEncodeError:
        return _error(f"--topic {args.topic!r}: not encodable as UTF-8")
    profile = get_event_profile(args.profile) if args.profile else None
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    try:
        socket.setsockopt(zmq.MAXMSGSIZE, args.max_frame_bytes)
        socket.connect(args.endpoint)
    except (zmq.ZMQError, ValueError, TypeError) as err:
        socket.close(linger=0)
        return _error(f"{args.endpoint}: {err}")
    socket.setsockopt(zmq.SUBSCRIBE, topic)
    try:
        capture = (
            open_regular_for_writing(args.capture, "--capture", append=True)
            if args.capture
            else None
        )
    except (InvalidFieldError, OSError) as err:
        socket.close(linger=0)
        return _error(str(err) if isinstance(err, InvalidFieldError) else f"--capture: {err}")
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
    timeout_ms = None if args.timeout is None else int(args.timeout * 1000)
    received = 0
    last_seq: int | None = None
    while args.count is None or received < args.count:
        if not socket.poll(timeout_ms):
            break
        try:
            frames = _receive(socket, args.max_frame_bytes)
            message = decode_message(frames, profile=profile, strict=args.strict)
            if profile:
                profiles: tuple[EventProfile, ...] = (profile,)
                unknown = decode_report(frames[-1], profile=profile).unknown_fields
            else:
                detected = decode_and_detect(frames[-1], strict=args.strict)
                profiles, unknown = detected.profiles, detected.unknown_fields
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
                "unknown_fields": unknown_fields_json(unknown),
            }
            print(json.dumps(line, separators=(",", ":")), flush=True)
        else:
            batch = message.batch
            print(
                f"seq {message.seq} topic {message.topic!r}: ts {batch.ts!r}, "
                f"data_parallel_rank {batch.data_parallel_rank}, {len(batch.events)} events"
            )
            if unknown:
                print(f"  {unknown_fields_text(unknown)}")
            for number, event in enumerate(batch.events):
                print(f"  [{number}] {describe_event(event)}", flush=True)
        received += 1
    return 0


def _receive(socket: zmq.Socket[bytes], max_frame_bytes: int) -> list[bytes]:
    """One message, frame by frame: at most :data:`MAX_MESSAGE_FRAMES` frames of at most
    ``max_frame_bytes`` each (the rest of a longer message is read and dropped)."""
    import zmq

    frames: list[bytes] = []
    while True:
        frame = socket.recv()
        if len(frame) > max_frame_bytes:
            _drain(socket)
            raise EventFrameError(
                reason=f"frame {len(frames)} has {len(frame)} bytes, over --max-frame-bytes "
                f"{max_frame_bytes}"
            )
        frames.append(frame)
        if not socket.getsockopt(zmq.RCVMORE):
            return frames
        if len(frames) == MAX_MESSAGE_FRAMES:
            _drain(socket)
            raise EventFrameError(
                reason=f"more than {MAX_MESSAGE_FRAMES} frames; vLLM sends [topic, seq, payload]"
            )


def _drain(socket: zmq.Socket[bytes]) -> None:
    import zmq

    while socket.getsockopt(zmq.RCVMORE):
        socket.recv()
