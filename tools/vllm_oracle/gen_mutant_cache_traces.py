"""Hand-made cache-replay traces for the mutation round of the cache managers (issue 24).

``python gen_mutant_cache_traces.py OUT.json`` writes the traces; replay them through
the real vLLM 0.26.0 ``KVCacheManager`` with ``cache_replay_vllm.py OUT.json VLLM.json``
and join the two with ``join_mutant_cases.py`` into
``tests/data/vllm-0.26.0-oracle/cache_replay_mutants.json.gz``
(read by ``tests/test_cache_oracle_mutants.py``).

Each trace reaches a corner the random traces of ``gen_cache_traces.py`` do not:
block size 1, the per-request admission cap of sliding-window groups, ... (the
``why`` of each names the code it exercises). A trace's ``oracle_overrides`` replaces
fields of the replay config that a trace cannot set (the manager's direct API:
``max_in_flight_tokens`` below ``max_model_len``); both the oracle and the test
apply it.
"""

import json
import random
import sys

from gen_cache_traces import attn, mamba


def plan(layers, block_size, num_blocks, *, mml=24, spec=None, caching=True, mode="none",
         algo="sha256"):
    cfg = {"cache_config": {"block_size": block_size, "enable_prefix_caching": caching,
                            "prefix_match_unit": None, "num_gpu_blocks_override": num_blocks,
                            "mamba_cache_mode": mode, "cache_dtype": "auto",
                            "prefix_caching_hash_algo": algo},
           "parallel_config": {"decode_context_parallel_size": 1, "prefill_context_parallel_size": 1,
                               "pipeline_parallel_size": 1, "tensor_parallel_size": 1},
           "scheduler_config": {"disable_hybrid_kv_cache_manager": False, "max_num_batched_tokens": mml,
                                "max_num_encoder_input_tokens": mml, "async_scheduling": False},
           "model_config": {"max_model_len": mml, "original_max_model_len": None},
           "kv_transfer_config": None, "speculative_config": spec}
    return {"vllm_config": cfg, "available_memory": [1 << 30], "kv_cache_specs": [layers]}


REPLAY = {"log_stats": True, "enable_kv_cache_events": True, "use_int_block_hashes": True,
          "pythonhashseed": "0", "watermark": 0.0, "reserve_full_isl": True}


def trace(name, why, plan_input, ops, overrides=None, **replay):
    out = {"format": "kvpure-cache-replay/1", "name": name, "description": why,
           "plan_input": plan_input, "replay": {**REPLAY, **replay}, "ops": ops}
    if overrides:
        out["oracle_overrides"] = overrides
    return out


def arrive(rid, tokens, **extra):
    return {"op": "arrive", "request_id": rid, "prompt_token_ids": list(tokens), **extra}


def decode(rid, tokens):
    return {"op": "decode", "request_id": rid, "token_ids": list(tokens)}


def finish(rid):
    return {"op": "finish", "request_id": rid}


def preempt(rid):
    return {"op": "preempt", "request_id": rid}


def retry(rid):
    return {"op": "retry", "request_id": rid}


P = list(range(1, 23))  # a shared prompt prefix


def traces():
    out = []
    out.append(trace(
        "full_block_size_1",
        "full attention with one token a block: a full-attention group skips no token "
        "(get_num_skipped_tokens is 0), so block 0 stays in the table",
        plan({"l0": attn("FullAttentionSpec", 1)}, 1, 40),
        [arrive("a", P[:5]), decode("a", [30, 31]), arrive("b", P[:4] + [40]), finish("a"),
         arrive("c", P[:6]), decode("c", [32])],
    ))
    out.append(trace(
        "sw_block_size_1",
        "a sliding window with one token a block: one token out of the window is one "
        "block to free",
        plan({"l0": attn("SlidingWindowSpec", 1, window=3)}, 1, 40),
        [arrive("a", P[:5]), decode("a", [30, 31]), arrive("b", P[:4] + [40]), finish("a"),
         arrive("c", P[:6]), decode("c", [32]), arrive("d", [60, 61, 62]), decode("d", [63, 64]),
         arrive("e", [80]), decode("e", [81]), decode("e", [82]), decode("e", [83])],
    ))
    out.append(trace(
        "chunk_block_size_1",
        "chunked local attention with one token a block: a one-token prompt can hit "
        "nothing (its lookup length is 0), longer prompts skip the earlier chunks",
        plan({"l0": attn("ChunkedLocalAttentionSpec", 1, chunk=2)}, 1, 40),
        [arrive("a", [5]), finish("a"), arrive("b", [5]), arrive("c", [5, 6, 7, 8, 9]),
         finish("c"), arrive("d", [5, 6, 7, 8, 10])],
    ))
    out.append(trace(
        "full_block_size_1_report_full",
        "a one-token hit (block size 1) of a request reporting in 'full' mode re-announces "
        "its cached block",
        plan({"l0": attn("FullAttentionSpec", 1)}, 1, 40),
        [arrive("a", [1, 2, 3]), finish("a"), arrive("b", [1, 9, 9], kv_cache_report_mode="full"),
         arrive("c", [1, 2, 8], kv_cache_report_mode="full")],
    ))
    out.append(trace(
        "eagle_full_block_size_1",
        "EAGLE drops the last matched block even when the hit is one token (block size 1)",
        plan({"l0": attn("FullAttentionSpec", 1)}, 1, 40,
             spec={"method": "eagle", "num_speculative_tokens": 1}),
        [arrive("a", [1, 2, 3]), finish("a"), arrive("b", [1, 9, 9]), arrive("c", [1, 2, 8]),
         decode("c", [5]), arrive("d", [1, 2, 8, 5, 6])],
    ))
    for name, layers in (
        ("full", {"l0": attn("FullAttentionSpec", 4)}),
        ("full_sw", {"l0": attn("FullAttentionSpec", 4), "l1": attn("SlidingWindowSpec", 4, window=5)}),
    ):
        out.append(trace(
            f"nocache_{name}",
            "prefix caching off: vLLM's KVCacheCoordinatorNoPrefixCache, no hits, no hashes",
            plan(layers, 4, 30, caching=False),
            [arrive("a", P[:10]), decode("a", [30, 31]), finish("a"), arrive("b", P[:12]),
             decode("b", [32])],
        ))
    # a sliding window of 4-token blocks beside full attention of 16-token blocks (equal
    # pages): the scheduler block is 16, so only the last blocks before each 16-token
    # boundary can serve a hit and only those are cached (reachable_block_mask); EAGLE
    # shifts them by one block
    q = list(range(1, 60))
    for eagle in (False, True):
        for window in (3, 5, 9):
            out.append(trace(
                f"full16_sw4_w{window}{'_eagle' if eagle else ''}",
                "a sliding-window group whose blocks are a quarter of the scheduler block: "
                "only the blocks a later hit can reach are cached",
                plan({"l0": attn("FullAttentionSpec", 16, head=8),
                      "l1": attn("SlidingWindowSpec", 4, head=32, window=window)}, 4, 60, mml=48,
                     spec={"method": "eagle", "num_speculative_tokens": 1} if eagle else None),
                [arrive("a", q[:40]), decode("a", [90, 91]), finish("a"), arrive("b", q[:38]),
                 arrive("c", q[:33] + [7]), finish("b"), arrive("d", q[:47])],
            ))
    # the same mask where full attention's block is the hash block: a second sliding
    # window of 16-token blocks makes the scheduler block 16; e and g compute less than
    # one scheduler block, so nothing of theirs is cached
    for eagle in (False, True):
        for window in (3, 5, 11):  # 11: EAGLE's run of blocks is the whole segment
            out.append(trace(
                f"full4_sw4_sw16_w{window}{'_eagle' if eagle else ''}",
                "sliding-window blocks a quarter of the scheduler block, beside full "
                "attention at the hash block size; requests shorter than a scheduler block",
                plan({"f": attn("FullAttentionSpec", 4, head=32),
                      "s": attn("SlidingWindowSpec", 4, head=32, window=window),
                      "t": attn("SlidingWindowSpec", 16, head=8, window=20)}, 4, 80, mml=48,
                     spec={"method": "eagle", "num_speculative_tokens": 1} if eagle else None),
                [arrive("a", q[:40]), decode("a", [90, 91]), finish("a"), arrive("b", q[:38]),
                 arrive("c", q[:33] + [7]), finish("b"), arrive("d", q[:47]),
                 arrive("e", q[:6]), arrive("g", q[:7])],
            ))
    # b skips reading the cache, so its first block duplicates a's; c's allocation evicts
    # a's; d still hits b's copy (vLLM 0.26 caches several blocks under one hash)
    for name, layers, num_blocks in (
        ("full", {"l0": attn("FullAttentionSpec", 4)}, 7),
        ("full2_sw", {"f0": attn("FullAttentionSpec", 4), "f1": attn("FullAttentionSpec", 4),
                      "f2": attn("FullAttentionSpec", 4), "f3": attn("FullAttentionSpec", 4),
                      "s0": attn("SlidingWindowSpec", 4, window=5),
                      "s1": attn("SlidingWindowSpec", 4, window=5)}, 19),
    ):
        out.append(trace(
            f"{name}_child_cached_parent_evicted",
            "a duplicate block is cached under the same hash, so evicting the first copy "
            "leaves the hash cached",
            plan(layers, 4, num_blocks),
            [arrive("a", P[:5]), finish("a"),
             arrive("b", P[:9], skip_reading_prefix_cache=True),
             arrive("c", [70 + i for i in range(9)]), arrive("d", P[:13]), finish("c"),
             retry("d")],
            reserve_full_isl=False,
        ))
    # several KV cache groups of one spec: 4 full + 2 sliding layers make two full-attention
    # groups of 2 layers (and the reverse, two sliding groups); hits are looked up in both
    # groups of a batch at once, and a pool this tight evicts one group's block before the
    # other's (the free queue takes group 0's blocks first)
    full = attn("FullAttentionSpec", 4)
    sliding = attn("SlidingWindowSpec", 4, window=5)
    shapes = {
        "full2_sw": ({"f0": full, "f1": full, "f2": full, "f3": full, "s0": sliding,
                      "s1": sliding}, (19, 22, 28, 40)),
        "full_sw2": ({"f0": full, "f1": full, "s0": sliding, "s1": sliding, "s2": sliding,
                      "s3": sliding}, (22, 25, 30, 40)),
    }
    for name, (layers, pool_sizes) in shapes.items():
        for num_blocks in pool_sizes:
            out.append(trace(
                f"{name}_groups_{num_blocks}",
                "two KV cache groups of one spec in a hybrid: hits are common to both "
                "groups of a batch; evictions take one group's block first",
                plan(layers, 4, num_blocks),
                [arrive("a", P[:14]), decode("a", [30, 31, 32]), finish("a"),
                 arrive("b", P[:13] + [40]), decode("b", [33]), arrive("c", [7] + P[:9]),
                 finish("b"), arrive("d", P[:17]), decode("d", [34, 35]), finish("c"),
                 arrive("e", P[:18] + [36]), finish("d"), arrive("f", P[:21]),
                 finish("e"), arrive("g", P[:12] + [50, 51]), arrive("h", P[:19])],
            ))
    for num_blocks in (23, 24):
        out.append(trace(
            f"chunk_mamba_admission_cap_{num_blocks}",
            "the chunked-local group's admission cap (ChunkedLocalAttentionSpec."
            "max_admission_blocks_per_request) binds in the full-sequence gate, as below",
            plan({"l0": mamba(4, "align"), "l1": attn("ChunkedLocalAttentionSpec", 4, chunk=8),
                  "l2": attn("FullAttentionSpec", 4)}, 4, num_blocks, mode="align"),
            [arrive("a", P[:20]), arrive("b", [50] + P[:20]), finish("a"), retry("b")],
            overrides={"max_in_flight_tokens": 2},
        ))
        out.append(trace(
            f"sw_mamba_admission_cap_{num_blocks}",
            "the sliding-window group's admission cap (SlidingWindowSpec."
            "max_admission_blocks_per_request) binds in the full-sequence gate: the Mamba "
            "'align' split admits a 21-token prompt in two steps, so the gate sees the whole "
            "prompt; max_in_flight_tokens 2 (below max_model_len, which no trace can set) "
            "makes the cap smaller than the prompt's blocks",
            plan({"l0": mamba(4, "align"), "l1": attn("SlidingWindowSpec", 4, window=3),
                  "l2": attn("FullAttentionSpec", 4)}, 4, num_blocks, mode="align"),
            [arrive("a", P[:20]), arrive("b", [50] + P[:20]), finish("a"), retry("b")],
            overrides={"max_in_flight_tokens": 2},
        ))
    preemptions = [arrive("a", P[:10]), decode("a", [30, 31, 32]), arrive("b", P[:6] + [41, 42]),
                   preempt("a"), retry("a"), decode("a", [33]), preempt("b"), preempt("a"),
                   retry("b"), retry("a"), decode("b", [34, 35]), finish("a"), finish("b")]
    for name, layers in (
        ("full", {"l0": attn("FullAttentionSpec", 4)}),
        ("sw", {"l0": attn("SlidingWindowSpec", 4, window=5)}),
        ("full_sw", {"l0": attn("FullAttentionSpec", 4), "l1": attn("SlidingWindowSpec", 4, window=5)}),
        ("chunk", {"l0": attn("ChunkedLocalAttentionSpec", 4, chunk=8)}),
    ):
        for watermark in (0.0, 0.25):
            out.append(trace(
                f"preempt_{name}_wm{int(watermark * 100)}",
                "preemption (free, then re-admitted with num_preemptions > 0): the freed "
                "request is forgotten by every manager, its re-admission hits its own "
                "blocks and is counted in the preempted stats",
                plan(layers, 4, 24 if watermark else 18),
                preemptions,
                watermark=watermark,
            ))
    out.extend(random_mask_traces(random.Random(7), 24))
    return out


def random_mask_traces(rng, count):
    """Random ops on the mask shapes above (small pools: evictions inside segments)."""
    out = []
    for n in range(count):
        # two batches (full 16 + sliding 4: one pass of the hit search, no EAGLE, whose
        # lookahead caching differs) or three (full 4 + sliding 4 + sliding 16)
        two = n % 3 == 2
        eagle = n % 2 == 1 and not two
        window = rng.choice([3, 5, 9, 11])
        layers = {"f": attn("FullAttentionSpec", 4, head=32),
                  "s": attn("SlidingWindowSpec", 4, head=32, window=window),
                  "t": attn("SlidingWindowSpec", 16, head=8, window=20)}
        if two:
            layers = {"f": attn("FullAttentionSpec", 16, head=8),
                      "s": attn("SlidingWindowSpec", 4, head=32, window=window)}
        prefixes = [[rng.randint(0, 50) for _ in range(46)] for _ in range(2)]
        ops, live, lengths, rid = [], [], {}, 0
        for _ in range(rng.randint(8, 18)):
            r = rng.random()
            if r < 0.45 or not live:
                length = rng.randint(1, 44)
                cut = rng.randint(length // 2, length)
                prompt = rng.choice(prefixes)[:cut] + [rng.randint(51, 99) for _ in range(length - cut)]
                ops.append(arrive(f"r{rid}", prompt))
                live.append(f"r{rid}")
                lengths[f"r{rid}"] = length
                rid += 1
            elif r < 0.7:
                who = rng.choice(live)
                k = min(rng.randint(1, 5), 46 - lengths[who])
                if k > 0:
                    lengths[who] += k
                    ops.append(decode(who, [rng.randint(0, 99) for _ in range(k)]))
            elif r < 0.8:
                ops.append(retry(rng.choice(live)))
            else:
                who = rng.choice(live)
                live.remove(who)
                ops.append(finish(who))
        out.append(trace(
            f"random_mask_{n}{'_eagle' if eagle else ''}",
            "random ops on sliding-window blocks a quarter of the scheduler block (seed 7)",
            plan(layers, 4, rng.randint(24, 40) if two else rng.randint(40, 60), mml=48,
                 spec={"method": "eagle", "num_speculative_tokens": 1} if eagle else None),
            ops,
            reserve_full_isl=rng.random() < 0.5,
        ))
    return out


if __name__ == "__main__":
    json.dump(traces(), open(sys.argv[1], "w"), indent=1)
