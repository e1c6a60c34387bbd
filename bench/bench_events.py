"""Benchmark: decoding vLLM's KV event batches, kvpure against msgspec into vLLM's structs.

Inputs (one payload each, as vLLM 0.33/0.34's publisher writes it, the bytes a
subscriber receives): 1,000 ``BlockStored`` events of 16 blocks (block size 16,
so 256 token ids per event), ``extra_keys`` 16 nulls, group, spec kind and rank
set; once with 64-bit int hashes (vLLM's default), once with 32-byte digests,
once from a lookahead server (L = 1: ``lookahead_token_ids`` one list per hash,
a cache salt on the first block).

BASELINE: ``msgspec.msgpack.Decoder(KVEventBatch)`` over vLLM's own struct classes,
executed from ``vllm/distributed/kv_events.py`` of the unpacked vLLM 0.26.0 and 0.34.0
wheels (``--vllm-sources DIR``, default ``/work/vllm``; 0.26 has no lookahead field, so
the lookahead payload runs against 0.34 only); where neither is present, the copy
below, declared as vLLM declares them (lists, ``Any`` extra keys,
``lookahead_token_ids: list[list[int]]``). The lines say which ran.

kvpure: ``kvpure.events.decode_batch``: its C reader (``kvpure.events._decode``, where
built) reads the payload straight into kvpure's frozen structs; each line is repeated
with the reader switched off (msgspec into kvpure's structs, the reference path). Also
shown, without a baseline: re-encoding per version and ``decode_and_detect``.

Each line prints kvpure's time, the baseline's and kvpure/baseline (<= 1.0:
kvpure at least as fast). Times are process CPU time, the best of 7 turns, the
two decoders taking turns; the garbage collector off in timed sections (as
``timeit`` does), and once more with it on. ``--runs N`` repeats everything and
prints the range of each ratio (shared machines are noisy).

Measured (docs/events.md, "Speed"; 2 runs, load average 9 to 11), collector off,
vs 0.26 / 0.34: 0.91-0.92 / 0.84-0.89 (int hashes), 0.79-0.92 / 0.86-0.99 (bytes),
- / 0.84 (lookahead); collector on 0.59-0.77; the reader off 1.07-1.33.

Run: ``python bench/bench_events.py`` (``--quick`` for fewer repetitions,
``--runs 3``).
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
import typing
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

import kvpure.events.accel as accel
from kvpure.events import (
    VLLM_0_26_EVENTS,
    VLLM_0_33_EVENTS,
    decode_and_detect,
    decode_batch,
    encode_batch,
)

# ---------------------------------------------------------------------------
# BASELINE: vLLM's event structs (0.33.0's fields), written anew
# ---------------------------------------------------------------------------


class BaselineEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class BaselineKVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(BaselineKVCacheEvent):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(BaselineKVCacheEvent):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(BaselineKVCacheEvent):
    pass


class BaselineKVEventBatch(BaselineEventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


BASELINE_DECODER = msgspec.msgpack.Decoder(BaselineKVEventBatch)


def vllm_classes(sources: Path, version: str = "0.34.0") -> ModuleType | None:
    """vLLM ``version``'s own event classes (``class EventBatch`` up to the aggregator of
    ``vllm/distributed/kv_events.py``), or None when the source is not there."""
    path = sources / version / "vllm" / "distributed" / "kv_events.py"
    if not path.is_file():
        return None
    text = path.read_text()
    code = text[text.index("class EventBatch(") : text.index("class KVEventAggregator")]
    module = ModuleType(f"vllm_{version.replace('.', '_')}_kv_events")
    module.__dict__.update(msgspec=msgspec, Any=typing.Any, ExternalBlockHash=bytes | int)
    sys.modules[module.__name__] = module  # msgspec resolves the annotations through it
    exec(compile(code, str(path), "exec"), module.__dict__)  # vLLM's own source
    return module


# ---------------------------------------------------------------------------

NUM_EVENTS = 1_000
HASHES_PER_EVENT = 16
BLOCK_SIZE = 16


def make_payload(*, int_hashes: bool, lookahead: int = 0, seed: int = 0) -> bytes:
    rng = random.Random(seed)

    def block_hash() -> int | bytes:
        return rng.getrandbits(64) if int_hashes else rng.randbytes(32)

    def event() -> BlockStored:
        tokens = [rng.randrange(152_000) for _ in range(HASHES_PER_EVENT * BLOCK_SIZE)]
        after = [rng.randrange(152_000) for _ in range(lookahead)]
        return BlockStored(
            block_hashes=[block_hash() for _ in range(HASHES_PER_EVENT)],
            parent_block_hash=block_hash(),
            token_ids=tokens,
            block_size=BLOCK_SIZE,
            lora_id=None,
            medium="GPU",
            lora_name=None,
            extra_keys=[("tenant-1",) if lookahead else None] + [None] * (HASHES_PER_EVENT - 1),
            group_idx=0,
            kv_cache_spec_kind="full_attention",
            lookahead_token_ids=[
                (tokens + after)[(j + 1) * BLOCK_SIZE : (j + 1) * BLOCK_SIZE + lookahead]
                for j in range(HASHES_PER_EVENT)
            ]
            if lookahead
            else None,
        )

    events: list[BlockStored | BlockRemoved | AllBlocksCleared] = [
        event() for _ in range(NUM_EVENTS)
    ]
    batch = BaselineKVEventBatch(ts=1767225600.0, events=events, data_parallel_rank=0)
    return msgspec.msgpack.Encoder().encode(batch)


def best_time(fn: Callable[[], object], repeat: int, rounds: int, *, gc_on: bool = False) -> float:
    best = float("inf")
    for _ in range(rounds):
        if not gc_on:
            gc.disable()
        try:
            start = time.process_time()
            for _ in range(repeat):
                fn()
            best = min(best, (time.process_time() - start) / repeat)
        finally:
            gc.enable()
    return best


def side_by_side(
    label: str,
    ours: Callable[[], object],
    baseline: Callable[[], object],
    repeat: int,
    *,
    gc_on: bool = False,
) -> float:
    ours_best = baseline_best = float("inf")
    for _ in range(7):  # taking turns, so both see the same load
        ours_best = min(ours_best, best_time(ours, repeat, 1, gc_on=gc_on))
        baseline_best = min(baseline_best, best_time(baseline, repeat, 1, gc_on=gc_on))
    ratio = ours_best / baseline_best
    print(
        f"{label:<46} kvpure {ours_best * 1e3:8.3f} ms   baseline {baseline_best * 1e3:8.3f} ms"
        f"   kvpure/baseline {ratio:5.2f}"
    )
    return ratio


def alone(label: str, fn: Callable[[], object], repeat: int) -> None:
    print(f"{label:<46} kvpure {best_time(fn, repeat, 7) * 1e3:8.3f} ms")


PAYLOADS = (
    ("int hashes", {"int_hashes": True}),
    ("bytes hashes", {"int_hashes": False}),
    ("int hashes, lookahead L=1", {"int_hashes": True, "lookahead": 1}),
)


def _decode_pure(payload: bytes) -> object:
    """kvpure's decoding with its C reader switched off (msgspec into kvpure's structs)."""
    accel.set_accelerated(False)
    try:
        return decode_batch(payload)
    finally:
        accel.set_accelerated(True)


GOLDEN_DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def golden_payloads(version: str) -> list[bytes]:
    """The payload frames of vLLM ``version``'s KV-event goldens (the copy in tests/data):
    the small batches a real server publishes, a few events per scheduler step."""
    golden = json.loads((GOLDEN_DATA / f"vllm-{version}" / "kv_events.json").read_text())
    return [
        bytes.fromhex(b["frames_hex"][2]) for c in golden["cases"].values() for b in c["batches"]
    ]


def _each(decode: Callable[[bytes], object], payloads: list[bytes]) -> None:
    for payload in payloads:
        decode(payload)


def small_batches(baselines: list[tuple[str, Any]], repeat: int) -> dict[str, float]:
    """The golden payloads of each baseline's release, one decode call per payload: where
    a batch holds a few events, the cost per call weighs most."""
    ratios: dict[str, float] = {}
    for name, decoder in baselines:
        payloads = golden_payloads("0.26.0" if name == "0.26" else "0.34.0")
        for payload in payloads:
            if _shape_of(decode_batch(payload)) != _shape_of(_decode_pure(payload)):
                raise SystemExit("kvpure's two paths decode different events")
        ratios[f"golden payloads (small batches) vs {name}"] = side_by_side(
            f"decode {len(payloads)} golden payloads one by one vs {name}",
            partial(_each, decode_batch, payloads),
            partial(_each, decoder.decode, payloads),
            repeat * 25,
        )
    return ratios


def _shape_of(batch: object) -> object:
    return msgspec.to_builtins(batch)


def one_run(baselines: list[tuple[str, Any]], repeat: int, *, extras: bool) -> dict[str, float]:
    ratios: dict[str, float] = small_batches(baselines, repeat)
    for kind, options in PAYLOADS:
        payload = make_payload(**options)
        ours = decode_batch(payload)
        if encode_batch(ours, profile=VLLM_0_33_EVENTS) != payload or _decode_pure(payload) != ours:
            raise SystemExit("kvpure's two paths decode different events")
        for name, decoder in baselines:
            if options.get("lookahead") and name == "0.26":
                continue  # 0.26's structs have no lookahead field (they would skip it)
            theirs = decoder.decode(payload)
            if [list(getattr(e, "block_hashes", ())) for e in ours.events] != [
                list(getattr(e, "block_hashes", [])) for e in theirs.events
            ]:
                raise SystemExit("kvpure and the baseline decode different events")
            label = f"decode ({kind}, {len(payload) / 1e6:.2f} MB) vs {name}"
            for gc_on in (False, True):
                suffix = ", gc on" if gc_on else ""
                ratios[f"{kind}{suffix} vs {name}"] = side_by_side(
                    label if not gc_on else "  the same, garbage collector on",
                    partial(decode_batch, payload),
                    partial(decoder.decode, payload),
                    repeat,
                    gc_on=gc_on,
                )
            ratios[f"{kind}, C reader off vs {name}"] = side_by_side(
                "  the same, kvpure's C reader off (msgspec)",
                partial(_decode_pure, payload),
                partial(decoder.decode, payload),
                repeat,
            )
        if extras:
            for profile in (VLLM_0_33_EVENTS, VLLM_0_26_EVENTS):
                if options.get("lookahead") and profile is VLLM_0_26_EVENTS:
                    continue
                alone(
                    f"  encode {profile.name} ({kind})",
                    partial(encode_batch, ours, profile=profile),
                    repeat,
                )
            alone(f"  decode_and_detect ({kind})", partial(decode_and_detect, payload), repeat)
    return ratios


def main(argv: list[str]) -> int:
    repeat = 3 if "--quick" in argv else 20
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 1
    sources = Path(argv[argv.index("--vllm-sources") + 1]) if "--vllm-sources" in argv else None
    baselines: list[tuple[str, Any]] = []
    for version in ("0.26.0", "0.34.0"):
        real = vllm_classes(sources or Path("/work/vllm"), version)
        if real is not None:
            name = version.rsplit(".", 1)[0]
            baselines.append((name, msgspec.msgpack.Decoder(real.KVEventBatch)))
            print(f"baseline {name}: vLLM {version}'s own structs (vllm/distributed/kv_events.py)")
    if not baselines:
        baselines.append(("copy", BASELINE_DECODER))
        print("baseline copy: the copy of vLLM's structs in this file (no vLLM source found)")
    print(
        f"{NUM_EVENTS} BlockStored x {HASHES_PER_EVENT} hashes "
        f"({HASHES_PER_EVENT * BLOCK_SIZE} token ids each), msgspec {msgspec.__version__}; "
        f"kvpure's C reader: {'built' if accel.built() else 'not built'}"
    )
    every: dict[str, list[float]] = {}
    for run in range(runs):
        if runs > 1:
            print(f"-- run {run + 1} of {runs}")
        for kind, ratio in one_run(baselines, repeat, extras=run == 0).items():
            every.setdefault(kind, []).append(ratio)
    print("kvpure/baseline per payload (range over runs; target <= 1.00):")
    for kind, ratios in every.items():
        print(f"  {kind:<48} {min(ratios):.2f} .. {max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
