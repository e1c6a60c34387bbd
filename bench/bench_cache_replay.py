"""Benchmark: replaying a synthetic serving workload through kvpure's prefix cache.

The workload: a hybrid model (one full-attention and one sliding-window
group, block 16), a pool of ``--blocks`` blocks, requests that share a few
system prompts (so hits, evictions and BlockStored/BlockRemoved events
happen), each admitted, decoded for a while and finished, with up to 32
requests live at once.

Two figures: the engine alone (admissions, decode steps and frees through
``KVCacheManager``, events and stats taken as the replay does, no per-op
snapshots) as steps per second, and the whole ``replay()`` of a shorter trace
in the goldens' shape (every record snapshots the free queue, which costs
O(blocks) per op). Times are CPU time with the garbage collector off, the best
of 3 rounds; the peak RSS of the process is printed at the end.

BASELINE: where vLLM 0.26.0 imports (its wheel unpacked on PYTHONPATH as in
``tools/vllm_oracle/README.md``), the same engine workload runs through
vLLM's own KVCacheManager via ``tools/vllm_oracle/cache_replay_vllm.py`` and
the ratio kvpure/vLLM is printed (<= 1.0: kvpure at least as fast).

The serving workload of issue 16 (prompts of 4,000 tokens, ``--requests N``, 1,000 by
default, 10,000 in the issue) runs the engine calls alone through kvpure and, where it
imports, vLLM's KVCacheManager on the same calls (``run_one(trace, records_wanted=False)``:
events and stats taken after every op, no records), and prints kvpure/vLLM.

Run: ``python bench/bench_cache_replay.py`` (``--quick`` for a smaller run).
"""

from __future__ import annotations

import gc
import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvpure.cache import CacheReplay, RequestStatus, parse_trace, replay
from kvpure.cache.setup import replay_config_from_plan_input
from kvpure.cache.trace import ArriveOp, DecodeOp, FinishOp


def _spec(kind: str, **extra: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "type": kind,
        "block_size": 16,
        "num_kv_heads": 8,
        "head_size": 128,
        "dtype": "bfloat16",
        "kv_quant_mode": "NONE",
        "page_size_padded": None,
        "indexes_kv_by_block_stride": False,
        "head_size_v": 128,
    }
    if kind == "FullAttentionSpec":
        spec.update(sliding_window=None, attention_chunk_size=None, non_causal=False)
    spec.update(extra)
    return spec


def workload(
    num_blocks: int, num_requests: int, seed: int = 0, prompt_tokens: int | None = None
) -> dict[str, Any]:
    """A trace: shared system prompts, user turns, decodes, finishes (at most 32 live).

    Prompts are a system prompt (200-900 tokens) and a user turn (10-400 tokens); with
    ``prompt_tokens``, a system prompt (500-3,000 tokens) and a user turn filling the
    prompt to exactly that many tokens (the serving workload of issue 16)."""
    rng = random.Random(seed)
    max_model_len = 4096
    low, high = (200, 900) if prompt_tokens is None else (500, 3000)
    systems = [[rng.randrange(32000) for _ in range(rng.randint(low, high))] for _ in range(8)]
    ops: list[dict[str, Any]] = []
    live: list[tuple[str, int]] = []
    for n in range(num_requests):
        if len(live) >= 32:
            rid, _ = live.pop(rng.randrange(len(live)))
            ops.append({"op": "finish", "request_id": rid})
        system = rng.choice(systems)
        user = rng.randint(10, 400) if prompt_tokens is None else prompt_tokens - len(system)
        prompt = system + [rng.randrange(32000) for _ in range(user)]
        ops.append({"op": "arrive", "request_id": f"r{n}", "prompt_token_ids": prompt})
        live.append((f"r{n}", len(prompt)))
        rid, length = rng.choice(live)
        k = min(rng.randint(1, 64), max_model_len - 2 - length)
        if k > 0:
            ops.append({"op": "decode", "request_id": rid, "token_ids": [7] * k})
            live = [(r, ln + k if r == rid else ln) for r, ln in live]
    for rid, _ in live:
        ops.append({"op": "finish", "request_id": rid})
    vllm_config = {
        "cache_config": {
            "block_size": 16,
            "enable_prefix_caching": True,
            "prefix_match_unit": None,
            "num_gpu_blocks_override": num_blocks,
            "mamba_cache_mode": "none",
            "cache_dtype": "auto",
            "prefix_caching_hash_algo": "sha256_cbor",
        },
        "parallel_config": {
            "decode_context_parallel_size": 1,
            "prefill_context_parallel_size": 1,
            "pipeline_parallel_size": 1,
            "tensor_parallel_size": 1,
        },
        "scheduler_config": {
            "disable_hybrid_kv_cache_manager": False,
            "max_num_batched_tokens": max_model_len,
            "max_num_encoder_input_tokens": max_model_len,
            "async_scheduling": False,
        },
        "model_config": {"max_model_len": max_model_len, "original_max_model_len": None},
        "kv_transfer_config": None,
        "speculative_config": None,
    }
    layers = {
        "model.layers.0.self_attn.attn": _spec("FullAttentionSpec"),
        "model.layers.1.self_attn.attn": _spec("SlidingWindowSpec", sliding_window=1024),
    }
    return {
        "format": "kvpure-cache-replay/1",
        "vllm_version": "0.26",  # the baseline is vLLM 0.26.0's manager
        "name": "bench",
        "plan_input": {
            "vllm_config": vllm_config,
            "available_memory": [1 << 40],
            "kv_cache_specs": [layers],
        },
        "replay": {"reserve_full_isl": True},
        "ops": ops,
    }


def engine_steps(trace_json: dict[str, Any]) -> int:
    """Drive the engine through every op without snapshots; the number of steps taken."""
    trace = parse_trace(trace_json)
    engine = CacheReplay(replay_config_from_plan_input(trace.plan_input), trace.replay)
    steps = 0
    for index, op in enumerate(trace.ops):
        if isinstance(op, ArriveOp):
            outcome = engine._arrive(op, f"ops[{index}]")[0]
            steps += len(getattr(outcome, "steps", ()))
        elif isinstance(op, DecodeOp):
            request = engine.requests[op.request_id]
            if request.status is RequestStatus.RUNNING:
                decoded = engine._decode(op, f"ops[{index}]")[0]
                steps += len(getattr(decoded, "steps", ()))
        elif isinstance(op, FinishOp):
            engine.manager.free(engine.requests.pop(op.request_id))
        engine.manager.take_events()
        engine.manager.make_prefix_cache_stats()
    return steps


def _cpu_best(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        start = time.process_time()
        fn()
        elapsed = time.process_time() - start
        gc.enable()
        best = min(best, elapsed)
    return best


def _vllm_baseline() -> Callable[[dict[str, Any], bool], object] | None:
    """vLLM's ``run_one(trace, records_wanted)`` (tools/vllm_oracle), or None."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools" / "vllm_oracle"))
    try:
        import cache_replay_vllm  # type: ignore[import-not-found]  # optional, outside the package
        import vllm.v1.core.kv_cache_manager  # type: ignore[import-not-found]  # optional baseline  # noqa: F401
    except Exception:
        return None
    run: Callable[[dict[str, Any], bool], object] = cache_replay_vllm.run_one
    return run


def _option(name: str, default: int) -> int:
    """``--name N`` from the command line."""
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


def serving(baseline: Callable[[dict[str, Any], bool], object] | None) -> None:
    """Issue 16's workload: requests of 4,000-token prompts, engine calls only, kvpure and
    (where it imports) vLLM's KVCacheManager on the same call sequence; one round each,
    interleaved twice (the best kept), as the workload is long."""
    num_requests = _option("--requests", 100 if "--quick" in sys.argv else 1000)
    trace = workload(16_384, num_requests, seed=2, prompt_tokens=4000)
    kvpure_s = vllm_s = float("inf")
    for _ in range(2):
        kvpure_s = min(kvpure_s, _cpu_best(lambda: engine_steps(trace), 1))
        if baseline is not None:
            vllm_s = min(vllm_s, _cpu_best(lambda: baseline(trace, False), 1))
    print(
        f"serving: {num_requests} requests x 4,000 prompt tokens, {len(trace['ops'])} ops, "
        f"16,384 blocks: kvpure {kvpure_s:.2f} s CPU"
    )
    if baseline is not None:
        print(f"  vLLM's KVCacheManager {vllm_s:.2f} s CPU; kvpure/vLLM = {kvpure_s / vllm_s:.2f}")


def main() -> None:
    quick = "--quick" in sys.argv
    num_blocks = 2048 if quick else 8192
    engine_trace = workload(num_blocks, 300 if quick else 2000)
    record_trace = workload(num_blocks, 60 if quick else 300, seed=1)
    rounds = 3
    steps = engine_steps(engine_trace)
    engine_s = _cpu_best(lambda: engine_steps(engine_trace), rounds)
    print(
        f"engine: {len(engine_trace['ops'])} ops, {steps} steps, {num_blocks} blocks: "
        f"{engine_s:.3f} s CPU, {steps / engine_s:,.0f} steps/s"
    )
    replay_s = _cpu_best(lambda: replay(parse_trace(record_trace)), rounds)
    print(
        f"replay() with records: {len(record_trace['ops'])} ops: {replay_s:.3f} s CPU, "
        f"{len(record_trace['ops']) / replay_s:,.0f} ops/s"
    )
    baseline = _vllm_baseline()
    if baseline is None:
        print("baseline: vLLM 0.26.0 not importable here (see tools/vllm_oracle/README.md)")
    else:
        vllm_s = _cpu_best(lambda: baseline(record_trace, True), rounds)
        print(
            f"replay with records, vLLM's KVCacheManager: {vllm_s:.3f} s CPU; "
            f"kvpure/vLLM = {replay_s / vllm_s:.2f}"
        )
    serving(baseline)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS: {peak_kib / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
