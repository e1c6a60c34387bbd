"""``kvpure events decode|audit FILE|-``: vLLM's KV event batches, read and checked.

FILE (``-``: standard input) is one payload (the third frame of vLLM's PUB
message) or a capture: records of a 4-byte big-endian length followed by one
payload (see docs/events.md).

``decode`` prints each batch; ``--json`` prints one JSON line per batch with
every field (hashes as ints or hex) and the vLLM versions whose encoder
writes exactly its bytes. ``audit`` recomputes every BlockStored hash under
the router's settings (``--algo``, ``--seed``, ``--block-size``,
``--profile``) and, where they do not reproduce an event, names the setting
that does. Exit codes: 0 every event agrees, 1 some event disagrees or
cannot be checked (``--allow-unverifiable`` makes the latter 0), 2 bad input.
``listen ENDPOINT`` subscribes to a server (``kvpure.cli.events_listen``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kvpure.cli.events_listen import add_listen
from kvpure.cli.events_text import (
    audit_json,
    audit_summary,
    describe_event,
    print_audit_report,
    unknown_fields_json,
    unknown_fields_text,
)
from kvpure.cli.input_files import read_input_bytes
from kvpure.errors import KVPureError
from kvpure.events.audit import (
    AuditOptions,
    AuditReport,
    HashForm,
    RouterSettings,
    audit_batches,
)
from kvpure.events.audit_check import AuditStatus, event_lookahead
from kvpure.events.errors import EmptyEventInputError, KVEventError
from kvpure.events.frames import split_capture
from kvpure.events.profiles import (
    EVENT_PROFILE_NAMES,
    EVENT_PROFILES,
    EventProfile,
    get_event_profile,
)
from kvpure.events.types import BlockStored, KVEventBatch
from kvpure.events.unknown import UnknownField
from kvpure.events.wire import decode_and_detect, decode_report
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.scheme import DEFAULT_HASH_PROFILE, VllmHashProfile, get_hash_profile
from kvpure.interop.kv_events import batch_to_json

EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_MISMATCH",
    "describe_event",
    "register",
    "run_audit",
    "run_decode",
    "unknown_fields_json",
    "unknown_fields_text",
]

_NEWEST = tuple(EVENT_PROFILES.values())[-1]


def register(sub: Any) -> None:
    """Add the ``events`` subcommand (``decode``, ``audit``) to ``sub``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "events",
        help="decode or audit vLLM's KV event batches",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    actions = parser.add_subparsers(
        dest="events_command", metavar="ACTION", parser_class=type(parser)
    )
    actions.required = True
    profiles = EVENT_PROFILE_NAMES

    decode = actions.add_parser("decode", help="print each batch")
    decode.add_argument("file", metavar="FILE", help="a payload or a capture; - for stdin")
    decode.add_argument(
        "--profile",
        choices=profiles,
        help="the server's vLLM version (default: detected from the bytes)",
    )
    decode.add_argument("--json", action="store_true", help="one JSON line per batch")
    _add_strict(decode)
    decode.set_defaults(run=run_decode)

    audit = actions.add_parser("audit", help="recompute every BlockStored hash")
    audit.add_argument("file", metavar="FILE", help="a payload or a capture; - for stdin")
    audit.add_argument(
        "--algo", required=True, choices=HASH_ALGORITHM_NAMES, help="the router's hash algorithm"
    )
    audit.add_argument(
        "--seed",
        default=None,
        help="the router's PYTHONHASHSEED (default: unset, the profile's rule)",
    )
    audit.add_argument(
        "--block-size",
        type=_block_size,
        default=None,
        help="the router's hash block size in tokens (default: the smallest "
        "block_size of the events)",
    )
    audit.add_argument(
        "--profile",
        choices=profiles,
        default=None,
        help="the router's vLLM hashing rules (default: the version the bytes "
        f"show, else {DEFAULT_HASH_PROFILE.name})",
    )
    audit.add_argument(
        "--try-seed",
        action="append",
        default=[],
        metavar="SEED",
        help="another seed the diagnosis tries (repeatable; '0' and '42' always are)",
    )
    audit.add_argument(
        "--lora-path",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a LoRA adapter's path (vLLM 0.33 hashes it; repeatable)",
    )
    audit.add_argument(
        "--hashes",
        choices=[form.value for form in HashForm],
        default=None,
        help="the hash form the router compares (default: what the events carry)",
    )
    audit.add_argument(
        "--allow-unverifiable",
        action="store_true",
        help="exit 0 when nothing disagrees, even if some events cannot be checked",
    )
    audit.add_argument(
        "--lookahead",
        type=_lookahead_tokens,
        default=None,
        metavar="L",
        help="the router's num_hash_lookahead_tokens (default: the L the events show in "
        "lookahead_token_ids, 0 when they carry none)",
    )
    audit.add_argument("--json", action="store_true", help="one JSON line per BlockStored")
    _add_strict(audit)
    audit.set_defaults(run=run_audit)
    add_listen(actions)


def _add_strict(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse fields the events do not declare (default: skip and name them, as "
        "vLLM's decoder skips them)",
    )


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected at least {minimum}, got {value}")
    return value


def _block_size(text: str) -> int:
    return _whole_number(text, 1)


def _lookahead_tokens(text: str) -> int:
    return _whole_number(text, 0)


def _read(name: str) -> bytes:
    data = read_input_bytes(name)
    if not data:
        raise EmptyEventInputError(source="standard input" if name == "-" else name)
    return data


def _error(message: str) -> int:
    print(f"kvpure: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


_Decoded = tuple[KVEventBatch, tuple[EventProfile, ...], tuple[UnknownField, ...]]


def _decode_all(
    payloads: Sequence[bytes], profile: EventProfile | None, strict: bool
) -> list[_Decoded]:
    """Each payload's batch, the profiles that write it (``profile`` when given) and
    the fields it carries that its events do not declare."""
    result: list[_Decoded] = []
    for index, payload in enumerate(payloads):
        try:
            if profile is not None:
                report = decode_report(payload, profile=profile, strict=strict)
                result.append((report.batch, (profile,), report.unknown_fields))
            else:
                detected = decode_and_detect(payload, strict=strict)
                result.append((detected.batch, detected.profiles, detected.unknown_fields))
        except KVEventError as err:
            raise _FrameError(index, err) from None
    return result


class _FrameError(Exception):
    def __init__(self, index: int | None, err: KVEventError) -> None:
        super().__init__(str(err) if index is None else f"frame {index}: {err}")


def _stream_profile(decoded: Sequence[_Decoded]) -> EventProfile | None:
    """The version the bytes show: the first batch written by exactly one profile."""
    for _, profiles, _ in decoded:
        if len(profiles) == 1:
            return profiles[0]
    return None


def _load(args: argparse.Namespace) -> list[_Decoded]:
    profile = get_event_profile(args.profile) if args.profile else None
    try:
        payloads = split_capture(_read(args.file))
    except KVEventError as err:
        raise _FrameError(None, err) from None
    return _decode_all(payloads, profile, args.strict)


def run_decode(args: argparse.Namespace) -> int:
    try:
        decoded = _load(args)
    except _FrameError as err:
        return _error(str(err))
    shown = _stream_profile(decoded) or _NEWEST
    for index, (batch, profiles, unknown) in enumerate(decoded):
        # the stream's version where it writes these bytes; every field when none does
        profile = shown if shown in profiles else (profiles[-1] if profiles else _NEWEST)
        if args.json:
            line = {
                "frame": index,
                **batch_to_json(batch, profile),
                "profiles": [p.name for p in profiles],
                "unknown_fields": unknown_fields_json(unknown),
            }
            print(json.dumps(line, separators=(",", ":")))
            continue
        written = ", ".join(p.name for p in profiles) or "no vLLM version (not its encoder)"
        print(
            f"frame {index}: ts {batch.ts!r}, data_parallel_rank {batch.data_parallel_rank}, "
            f"{len(batch.events)} events, written as {written}"
        )
        if unknown:
            print(f"  {unknown_fields_text(unknown)}")
        for number, event in enumerate(batch.events):
            print(f"  [{number}] {describe_event(event)}")
    return 0


def _lora_paths(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    result = []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--lora-path {pair!r}: expected NAME=PATH")
        result.append((name, path))
    return tuple(result)


def _exit_code(report: AuditReport, allow_unverifiable: bool) -> int:
    if report.count(AuditStatus.DISAGREES):
        return EXIT_MISMATCH
    if report.count(AuditStatus.UNVERIFIABLE) and not allow_unverifiable:
        return EXIT_MISMATCH
    return 0


def _hash_profile(name: str | None, decoded: Sequence[_Decoded]) -> VllmHashProfile:
    """The router's hashing rules: ``--profile``'s release (its own hash profile where
    kvpure has one under that name), else the version the bytes show."""
    if name is None:
        shown = _stream_profile(decoded)
        return shown.hash_profile if shown else DEFAULT_HASH_PROFILE
    try:
        return get_hash_profile(name)
    except KVPureError:  # an events-only alias: its wire's release
        return get_event_profile(name).hash_profile


def _shown_lookahead(batches: Sequence[KVEventBatch]) -> int:
    """The L the events show (the first BlockStored with lookahead lists), else 0."""
    for batch in batches:
        for event in batch.events:
            if isinstance(event, BlockStored) and event.lookahead_token_ids:
                try:
                    return event_lookahead(event)
                except ValueError:
                    continue
    return 0


def run_audit(args: argparse.Namespace) -> int:
    try:
        decoded = _load(args)
        lora_paths = _lora_paths(args.lora_path)
    except _FrameError as err:
        return _error(str(err))
    except ValueError as err:
        return _error(str(err))
    batches = [batch for batch, _, _ in decoded]
    unknown = [u for _, _, found in decoded for u in found]
    sizes = [e.block_size for b in batches for e in b.events if isinstance(e, BlockStored)]
    block_size = args.block_size if args.block_size is not None else max(min(sizes, default=1), 1)
    router = RouterSettings(
        algorithm=args.algo,
        block_size=block_size,
        seed=args.seed,
        profile=_hash_profile(args.profile, decoded),
        num_hash_lookahead_tokens=(
            args.lookahead if args.lookahead is not None else _shown_lookahead(batches)
        ),
    )
    options = AuditOptions(
        candidate_seeds=tuple(dict.fromkeys(("0", "42", *args.try_seed))),
        lora_paths=lora_paths,
        hash_form=HashForm(args.hashes) if args.hashes else None,
    )
    report = audit_batches(batches, router, options)
    if args.json:
        for audit in report.events:
            print(json.dumps(audit_json(audit), separators=(",", ":")))
    summary = audit_summary(report, router, unknown)
    if args.json:
        print(json.dumps({"summary": summary}, separators=(",", ":")))
    else:
        print_audit_report(report, router, unknown)
    return _exit_code(report, args.allow_unverifiable)
