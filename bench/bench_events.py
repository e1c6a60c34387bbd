"""Benchmark: decoding vLLM's KV event batches, kvpure against a BASELINE as vLLM decodes.

Input: one payload of 1,000 ``BlockStored`` events with 16 block hashes each
(block size 16, so 256 token ids per event), ``extra_keys`` a list of 16
nulls, group, spec kind and rank set, as vLLM 0.33 publishes it (the same
bytes as a subscriber receives). Once with 64-bit int hashes (vLLM's
default), once with 32-byte digest hashes.

BASELINE (below, written anew): vLLM's own structs, as the goldens' schema
declares them: the batch ``array_like`` (``[ts, events, rank]``), the
events ``tag``-ged maps with ``omit_defaults`` and ``gc=False``, lists,
``extra_keys: list[tuple[Any, ...] | None] | None``; one
``msgspec.msgpack.Decoder(KVEventBatch)``. (The events themselves are not
``array_like`` on vLLM's wire: they are maps whose first key is ``type``.)

kvpure: ``kvpure.events.decode_batch`` (frozen structs, tuples, extra keys
as hashable ``ExtraKey`` tuples; typed errors). Also shown, without a
baseline: re-encoding per version and ``decode_and_detect``.

Each line prints kvpure's time, the baseline's and kvpure/baseline (<= 1.0:
kvpure at least as fast). Times are process CPU time, the garbage collector
off in timed sections as ``timeit`` does, the best of 7 rounds, the two
decoders taking turns.

Measured (docs/events.md, "Speed"): kvpure/baseline 1.06 to 1.08 at the best of
many runs, above the target of 1.00: msgspec builds a tuple of more than 16
items (``token_ids``) through a list, which lists avoid; kvpure keeps tuples so
that events are immutable and hashable.

Run: ``python bench/bench_events.py`` (``--quick`` for fewer repetitions).
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

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
    lookahead_token_ids: list[int] | None = None


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

# ---------------------------------------------------------------------------

NUM_EVENTS = 1_000
HASHES_PER_EVENT = 16
BLOCK_SIZE = 16


def make_payload(*, int_hashes: bool, seed: int = 0) -> bytes:
    rng = random.Random(seed)

    def block_hash() -> int | bytes:
        return rng.getrandbits(64) if int_hashes else rng.randbytes(32)

    events: list[BlockStored | BlockRemoved | AllBlocksCleared] = [
        BlockStored(
            block_hashes=[block_hash() for _ in range(HASHES_PER_EVENT)],
            parent_block_hash=block_hash(),
            token_ids=[rng.randrange(152_000) for _ in range(HASHES_PER_EVENT * BLOCK_SIZE)],
            block_size=BLOCK_SIZE,
            lora_id=None,
            medium="GPU",
            lora_name=None,
            extra_keys=[None] * HASHES_PER_EVENT,
            group_idx=0,
            kv_cache_spec_kind="full_attention",
        )
        for _ in range(NUM_EVENTS)
    ]
    batch = BaselineKVEventBatch(ts=1767225600.0, events=events, data_parallel_rank=0)
    return msgspec.msgpack.Encoder().encode(batch)


def best_time(fn: Callable[[], object], repeat: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
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
    label: str, ours: Callable[[], object], baseline: Callable[[], object], repeat: int
) -> float:
    ours_best = baseline_best = float("inf")
    for _ in range(7):  # taking turns, so both see the same load
        ours_best = min(ours_best, best_time(ours, repeat, 1))
        baseline_best = min(baseline_best, best_time(baseline, repeat, 1))
    ratio = ours_best / baseline_best
    print(
        f"{label:<44} kvpure {ours_best * 1e3:8.3f} ms   baseline {baseline_best * 1e3:8.3f} ms"
        f"   kvpure/baseline {ratio:5.2f}"
    )
    return ratio


def alone(label: str, fn: Callable[[], object], repeat: int) -> None:
    print(f"{label:<44} kvpure {best_time(fn, repeat, 7) * 1e3:8.3f} ms")


def main(argv: list[str]) -> int:
    repeat = 3 if "--quick" in argv else 20
    print(
        f"{NUM_EVENTS} BlockStored x {HASHES_PER_EVENT} hashes "
        f"({HASHES_PER_EVENT * BLOCK_SIZE} token ids each), msgspec {msgspec.__version__}"
    )
    ratios = []
    for int_hashes in (True, False):
        payload = make_payload(int_hashes=int_hashes)
        kind = "int hashes" if int_hashes else "bytes hashes"
        ours = decode_batch(payload)
        theirs = BASELINE_DECODER.decode(payload)
        if [list(getattr(e, "block_hashes", ())) for e in ours.events] != [
            getattr(e, "block_hashes", []) for e in theirs.events
        ]:
            raise SystemExit("kvpure and the baseline decode different events")
        ratios.append(
            side_by_side(
                f"decode ({kind}, {len(payload) / 1e6:.2f} MB)",
                partial(decode_batch, payload),
                partial(BASELINE_DECODER.decode, payload),
                repeat,
            )
        )
        for profile in (VLLM_0_33_EVENTS, VLLM_0_26_EVENTS):
            encode = partial(encode_batch, ours, profile=profile)
            alone(f"  encode {profile.name} ({kind})", encode, repeat)
        alone(f"  decode_and_detect ({kind})", partial(decode_and_detect, payload), repeat)
    worst = max(ratios)
    print(f"decode: kvpure/baseline at most {worst:.2f} (target: <= 1.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
