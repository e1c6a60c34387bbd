"""Random cache-replay traces over every modelled group kind (for the differential oracle).

``python gen_cache_traces.py SEED COUNT OUT.json``. Models: full attention,
sliding window, chunked local, Mamba ("align" and not), hybrids of them (with
equal and different block sizes), EAGLE, prefix caching off; settings vary
the watermark, the full-sequence gate, events, int/bytes hashes, the report
mode and skipping the prefix cache. Prompts share a few prefixes so hits,
duplicates and evictions happen.
"""

import json
import random
import sys


def attn(kind, bs, head=8, **extra):
    base = {"type": kind, "block_size": bs, "num_kv_heads": 1, "head_size": head, "dtype": "float32",
            "kv_quant_mode": "NONE", "page_size_padded": None, "indexes_kv_by_block_stride": False}
    if kind == "FullAttentionSpec":
        base.update(head_size_v=head, sliding_window=None, attention_chunk_size=None, non_causal=False)
    elif kind == "SlidingWindowSpec":
        base.update(sliding_window=extra["window"], head_size_v=head)
    elif kind == "ChunkedLocalAttentionSpec":
        base.update(attention_chunk_size=extra["chunk"])
    return base


def mamba(bs, mode, spec_blocks=0, page=None):
    return {"type": "MambaSpec", "block_size": bs, "shapes": [[16]], "dtypes": ["float32"],
            "page_size_padded": page if page is not None else bs * 64, "mamba_type": "MAMBA2",
            "mamba_cache_mode": mode, "num_speculative_blocks": spec_blocks}


def model(rng):
    kind = rng.choice(["full", "sw", "chunk", "full_sw", "full_sw_bs", "full_chunk", "full_mamba",
                       "full_mamba_none", "sw_mamba", "full_sw_sw", "eagle_full", "eagle_full_sw",
                       "nocache_full_sw", "rswa", "sink", "rswa_sw"])
    bs = rng.choice([2, 4])
    w = rng.choice([3, 4, 5, 8, 9])
    c = rng.choice([bs * 2, bs * 3, bs * 4])
    layers = {}
    mode = "none"
    spec = None
    caching = True
    block_size = bs
    if kind == "full":
        layers = {"l0": attn("FullAttentionSpec", bs)}
    elif kind == "sw":
        layers = {"l0": attn("SlidingWindowSpec", bs, window=w)}
    elif kind == "chunk":
        layers = {"l0": attn("ChunkedLocalAttentionSpec", bs, chunk=c)}
    elif kind in ("full_sw", "eagle_full_sw", "nocache_full_sw"):
        layers = {"l0": attn("FullAttentionSpec", bs), "l1": attn("SlidingWindowSpec", bs, window=w)}
    elif kind == "full_sw_bs":  # equal pages, different block sizes: scheduler block 2*bs
        layers = {"l0": attn("FullAttentionSpec", bs, head=16),
                  "l1": attn("SlidingWindowSpec", 2 * bs, window=w)}
    elif kind == "full_sw_sw":
        layers = {"l0": attn("FullAttentionSpec", bs), "l1": attn("SlidingWindowSpec", bs, window=w),
                  "l2": attn("SlidingWindowSpec", bs, window=w + 5)}
    elif kind == "full_chunk":
        layers = {"l0": attn("FullAttentionSpec", bs), "l1": attn("ChunkedLocalAttentionSpec", bs, chunk=c)}
    elif kind in ("full_mamba", "full_mamba_none"):
        mode = "align" if kind == "full_mamba" else "none"
        layers = {"l0": mamba(bs, mode, rng.choice([0, 0, 1])), "l1": mamba(bs, mode),
                  "l2": attn("FullAttentionSpec", bs)}
        if mode == "align" and layers["l0"]["num_speculative_blocks"] != layers["l1"]["num_speculative_blocks"]:
            layers["l1"]["num_speculative_blocks"] = layers["l0"]["num_speculative_blocks"]
    elif kind == "sw_mamba":
        mode = "align"
        layers = {"l0": mamba(bs, mode), "l1": attn("SlidingWindowSpec", bs, window=w),
                  "l2": attn("FullAttentionSpec", bs)}
    elif kind in ("rswa", "rswa_sw"):
        layers = {"l0": {**attn("FullAttentionSpec", bs), "type": "RSWASpec", "rswa_window": w}}
        if kind == "rswa_sw":
            layers["l1"] = attn("SlidingWindowSpec", bs, window=w)
    elif kind == "sink":
        layers = {"l0": {**attn("FullAttentionSpec", bs), "type": "SinkFullAttentionSpec",
                         "sink_len": bs * rng.choice([1, 2])}}
    elif kind == "eagle_full":
        layers = {"l0": attn("FullAttentionSpec", bs)}
    if kind.startswith("eagle"):
        spec = {"method": rng.choice(["eagle", "mtp", "eagle3"]), "num_speculative_tokens": rng.choice([1, 2])}
    if kind.startswith("nocache"):
        caching = False
    mml = 24
    per_request = sum(-(-mml // spec["block_size"]) for spec in layers.values())
    num_blocks = rng.randint(per_request + 1, per_request + 14)
    cfg = {"cache_config": {"block_size": block_size, "enable_prefix_caching": caching,
                            "prefix_match_unit": None, "num_gpu_blocks_override": num_blocks,
                            "mamba_cache_mode": mode, "cache_dtype": "auto",
                            "prefix_caching_hash_algo": rng.choice(["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"])},
           "parallel_config": {"decode_context_parallel_size": 1, "prefill_context_parallel_size": 1,
                               "pipeline_parallel_size": 1, "tensor_parallel_size": 1},
           "scheduler_config": {"disable_hybrid_kv_cache_manager": False, "max_num_batched_tokens": mml,
                                "max_num_encoder_input_tokens": mml, "async_scheduling": False},
           "model_config": {"max_model_len": mml, "original_max_model_len": None},
           "kv_transfer_config": None, "speculative_config": spec}
    return kind, {"vllm_config": cfg, "available_memory": [1 << 30], "kv_cache_specs": [layers]}


def ops(rng, mml=24):
    prefixes = [[rng.randint(0, 50) for _ in range(24)] for _ in range(3)]
    live, waiting_or_running, tokens = [], set(), {}
    out = []
    n = 0
    for _ in range(rng.randint(6, 22)):
        r = rng.random()
        if r < 0.4 or not live:
            rid = f"r{n}"
            n += 1
            length = rng.randint(1, 20)
            p = rng.choice(prefixes)
            cut = length if rng.random() < 0.5 else rng.randint(0, length)
            prompt = p[:cut] + [rng.randint(0, 50) for _ in range(length - cut)]
            op = {"op": "arrive", "request_id": rid, "prompt_token_ids": prompt}
            if rng.random() < 0.15:
                op["kv_cache_report_mode"] = "full"
            if rng.random() < 0.08:
                op["skip_reading_prefix_cache"] = True
            if rng.random() < 0.1:
                op["lora_name"] = rng.choice(["a", "b"])
            if rng.random() < 0.1:
                op["cache_salt"] = "s"
            out.append(op)
            live.append(rid)
            tokens[rid] = length
        elif r < 0.7:
            rid = rng.choice(live)
            k = rng.randint(1, 6)
            k = min(k, mml - 2 - tokens[rid])
            if k <= 0:
                continue
            tokens[rid] += k
            out.append({"op": "decode", "request_id": rid, "token_ids": [rng.randint(0, 50) for _ in range(k)]})
        elif r < 0.8:
            out.append({"op": "retry", "request_id": rng.choice(live)})
        elif r < 0.97:
            rid = rng.choice(live)
            live.remove(rid)
            out.append({"op": "finish", "request_id": rid})
        else:
            out.append({"op": "reset_prefix_cache"})
    return out


def trace(rng, i):
    kind, plan = model(rng)
    return {"format": "kvpure-cache-replay/1", "name": f"{kind}_{i}", "plan_input": plan,
            "replay": {"log_stats": rng.random() < 0.8, "enable_kv_cache_events": rng.random() < 0.85,
                       "use_int_block_hashes": rng.random() < 0.7, "pythonhashseed": str(rng.randint(0, 3)),
                       "watermark": rng.choice([0.0, 0.0, 0.1, 0.25]), "reserve_full_isl": rng.random() < 0.7},
            "ops": ops(rng)}


if __name__ == "__main__":
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    json.dump([trace(rng, i) for i in range(count)], open(sys.argv[3], "w"))
