"""Random planning-case inputs (golden ``input`` shape) over every spec kind.

Used to compare kvpure with the real vLLM 0.26.0 planner (``run_vllm.py``).
Plain script: ``python gen_cases.py SEED COUNT OUT.json``.
"""

import json
import random
import sys

DTYPES = ["bfloat16", "float16", "float32", "float8_e4m3fn", "uint8"]


def attn_base(r, bs, heads, head, dtype, stride):
    return {
        "block_size": bs,
        "num_kv_heads": heads,
        "head_size": head,
        "dtype": dtype,
        "kv_quant_mode": r.choice(["NONE"] * 6 + ["FP8_PER_TENSOR", "INT8_PER_TOKEN_HEAD", "INT4_PER_TOKEN_HEAD", "NVFP4", "FP8_PER_TOKEN_HEAD"]),
        "page_size_padded": None,
        "indexes_kv_by_block_stride": stride,
    }


def full(r, base, **kw):
    d = {"type": "FullAttentionSpec", **base, "head_size_v": kw.get("head_size_v", base["head_size"]),
         "sliding_window": kw.get("sliding_window"), "attention_chunk_size": kw.get("attention_chunk_size"),
         "non_causal": kw.get("non_causal", False)}
    return d


def swa(r, base, window):
    return {"type": "SlidingWindowSpec", **base, "sliding_window": window, "head_size_v": base["head_size"]}


def chunked(r, base, chunk):
    return {"type": "ChunkedLocalAttentionSpec", **base, "attention_chunk_size": chunk}


def mla(r, bs, **kw):
    d = {"type": kw.get("type", "MLAAttentionSpec"), "block_size": bs, "num_kv_heads": 1,
         "head_size": kw.get("head", 576), "dtype": kw.get("dtype", "bfloat16"), "kv_quant_mode": "NONE",
         "page_size_padded": None, "indexes_kv_by_block_stride": kw.get("stride", False),
         "head_size_v": kw.get("head", 576), "sliding_window": None, "attention_chunk_size": None,
         "non_causal": False, "cache_dtype_str": kw.get("cache_dtype_str"), "alignment": kw.get("alignment"),
         "compress_ratio": kw.get("compress_ratio", 1), "model_version": kw.get("model_version")}
    return d


def swa_mla(r, bs, window, **kw):
    return {"type": "SlidingWindowMLASpec", "block_size": bs, "num_kv_heads": 1, "head_size": kw.get("head", 512),
            "dtype": kw.get("dtype", "uint8"), "kv_quant_mode": "NONE", "page_size_padded": None,
            "indexes_kv_by_block_stride": kw.get("stride", False), "sliding_window": window, "head_size_v": None,
            "cache_dtype_str": kw.get("cache_dtype_str", "fp8_ds_mla"), "alignment": kw.get("alignment"),
            "compress_ratio": kw.get("compress_ratio", 1), "model_version": kw.get("model_version", "deepseek_v4")}


def mamba(r, bs, padded, spec_blocks, mode):
    return {"type": "MambaSpec", "block_size": bs, "shapes": [[r.choice([1024, 2048, 4096]), 3], [r.choice([8, 16, 32]), 64, 128]],
            "dtypes": [r.choice(["bfloat16", "float32"]), r.choice(["bfloat16", "float32"])], "page_size_padded": padded,
            "mamba_type": "MAMBA2", "mamba_cache_mode": mode, "num_speculative_blocks": spec_blocks}


def layers_for(r, kind, settings):
    bs = settings["cache_config"]["block_size"]
    heads = r.choice([1, 2, 4, 8])
    head = r.choice([64, 128, 256])
    dtype = r.choice(DTYPES)
    stride = r.random() < 0.7
    n = r.randint(2, 40)
    out = []
    if kind == "uniform":
        spec = full(r, attn_base(r, bs, heads, head, dtype, stride))
        out = [("model.layers.%d.attn" % i, spec) for i in range(n)]
    elif kind == "uniform_type":
        a = full(r, attn_base(r, bs, heads, head, dtype, stride))
        b = full(r, {**attn_base(r, bs, heads, head, dtype, stride), "num_kv_heads": r.choice([1, 2, 16])})
        if r.random() < 0.3:
            b = mla(r, bs, head=r.choice([576, 512]))
        out = [("layers.%d" % i, r.choice([a, b])) for i in range(n)]
    elif kind in ("hybrid_sw", "hybrid_chunk", "hybrid_three"):
        base = attn_base(r, bs, heads, head, dtype, stride)
        f = full(r, base)
        other = swa(r, base, r.choice([1, 128, 512, 1024, 4096])) if kind != "hybrid_chunk" else chunked(r, base, r.choice([1024, 8192]))
        third = swa(r, base, r.choice([64, 256])) if kind == "hybrid_three" else other
        ratio = r.randint(1, 6)
        for i in range(n):
            if i % (ratio + 1) == ratio:
                spec = f
            else:
                spec = third if (kind == "hybrid_three" and i % 2) else other
            out.append(("model.layers.%d.self_attn.attn" % i, spec))
        if r.random() < 0.3:
            draft_base = {**base, "head_size": r.choice([64, 96, 128]), "indexes_kv_by_block_stride": r.random() < 0.5}
            out.append(("draft.layers.0.attn", full(r, draft_base)))
    elif kind == "mamba":
        mode = settings["cache_config"]["mamba_cache_mode"]
        base = attn_base(r, bs, heads, head, "bfloat16", stride)
        base["kv_quant_mode"] = "NONE"
        f = full(r, base)
        fpage = 2 * bs * heads * head * 2
        m = mamba(r, settings["model_config"]["max_model_len"] if mode == "none" else bs, None, r.choice([0, 0, 1, 2]), mode)
        msize = sum(a * b * (c if len(s) > 2 else 1) for s in m["shapes"] for a, b, c in [tuple(s) + (1,) * (3 - len(s))]) if False else None
        if r.random() < 0.7:
            m["page_size_padded"] = None
        out = []
        ratio = r.randint(2, 8)
        for i in range(n):
            out.append(("model.layers.%d.mixer" % i, f if i % ratio == ratio - 1 else m))
    elif kind == "mla":
        cds = r.choice([None, "fp8_ds_mla"])
        spec = mla(r, bs, cache_dtype_str=cds, dtype="uint8" if cds else "bfloat16", alignment=r.choice([None, 576]))
        out = [("model.layers.%d.attn" % i, spec) for i in range(n)]
        if r.random() < 0.5:
            out.append(("mtp.attn", mla(r, bs, cache_dtype_str=cds, dtype="uint8" if cds else "bfloat16", head=r.choice([576, 512]))))
    elif kind == "dsv4":
        full_bs = r.choice([64, 128, 256])
        nf = r.randint(2, 12)
        out = []
        for i in range(nf):
            cr = r.choice([4, min(128, full_bs)]) if r.random() < 0.8 else 1
            out.append(("layers.%d.attn" % i, mla(r, full_bs, head=512, dtype="uint8", cache_dtype_str="fp8_ds_mla",
                                                 model_version="deepseek_v4", compress_ratio=cr, alignment=r.choice([None, 576]))))
        for i in range(r.randint(1, 12)):
            out.append(("layers.%d.swa" % i, swa_mla(r, r.choice([64, full_bs]), r.choice([128, 128, 64]), alignment=r.choice([None, 576]),
                                                   compress_ratio=r.choice([1, 1, 4]))))
        r.shuffle(out)
        if r.random() < 0.5:
            out.append(("mtp.layers.0.attn", mla(r, full_bs, head=512, dtype="uint8", cache_dtype_str="fp8_ds_mla", model_version="deepseek_v4", compress_ratio=1)))
    elif kind == "dsv4_real":
        # DeepSeek-V4 as its model code declares it: per layer an SWA cache; C4 layers add
        # attention, indexer and compressor-state caches, C128 layers attention and state.
        full_bs = settings["cache_config"]["block_size"] = r.choice([256, 256, 128])
        swa_bs = 64
        align = r.choice([576, 576, 512])
        fp8 = align == 576
        out = []
        for i in range(r.randint(3, 20)):
            cr = r.choice([1, 4, 128, 4, 128])
            out.append((f"layers.{i}.attn.swa_cache", swa_mla(r, swa_bs, 128, alignment=align,
                                                               dtype="uint8" if fp8 else "bfloat16",
                                                               cache_dtype_str="fp8_ds_mla" if fp8 else "auto")))
            if cr > 1 and cr <= full_bs:
                out.append((f"layers.{i}.attn.mla_attn", mla(r, full_bs, head=512, dtype="uint8" if fp8 else "bfloat16",
                                                             cache_dtype_str="fp8_ds_mla" if fp8 else "auto",
                                                             model_version="deepseek_v4", compress_ratio=cr, alignment=align)))
                coff = 2 if cr == 4 else 1
                state = {"type": "SlidingWindowMLASpec", "block_size": 4 if cr == 4 else 8, "num_kv_heads": 1,
                         "head_size": 2 * coff * 512, "dtype": "float32", "kv_quant_mode": "NONE", "page_size_padded": None,
                         "indexes_kv_by_block_stride": False, "sliding_window": coff * cr, "head_size_v": None,
                         "cache_dtype_str": None, "alignment": align, "compress_ratio": 1, "model_version": None}
                out.append((f"layers.{i}.attn.compressor.state_cache", state))
                if cr == 4:
                    out.append((f"layers.{i}.attn.indexer.k_cache", mla(r, full_bs, head=132, dtype="uint8", compress_ratio=4, alignment=align)))
        if r.random() < 0.5:
            out.append(("mtp.layers.0.attn.swa_cache", swa_mla(r, swa_bs, 128, alignment=align,
                                                               dtype="uint8" if fp8 else "bfloat16",
                                                               cache_dtype_str="fp8_ds_mla" if fp8 else "auto")))
    elif kind == "mamba_aligned":
        # Platform-aligned hybrid: attention block size raised so its page covers the state.
        heads, head = r.choice([(8, 128), (4, 128), (2, 64)])
        shapes = [[r.choice([4096, 10240]), 3], [r.choice([32, 64, 128]), 64, 128]]
        state = (shapes[0][0] * 3 + shapes[1][0] * 64 * 128) * 2
        one_tok = 2 * heads * head * 2
        mode = settings["cache_config"]["mamba_cache_mode"]
        attn_bs = 16 * -(-state // (16 * one_tok))
        settings["cache_config"]["block_size"] = attn_bs
        page = attn_bs * one_tok
        base = {"block_size": attn_bs, "num_kv_heads": heads, "head_size": head, "dtype": "bfloat16",
                "kv_quant_mode": "NONE", "page_size_padded": None, "indexes_kv_by_block_stride": True}
        f = full(r, base)
        m = {"type": "MambaSpec", "block_size": settings["model_config"]["max_model_len"] if mode == "none" else attn_bs,
             "shapes": shapes, "dtypes": ["bfloat16", "bfloat16"], "page_size_padded": page if page != state else None,
             "mamba_type": "MAMBA2", "mamba_cache_mode": mode,
             "num_speculative_blocks": r.choice([0, 0, 1])}
        ratio = r.randint(3, 9)
        out = [(f"model.layers.{i}.mixer", f if i % ratio == ratio - 1 else m) for i in range(n)]
    elif kind == "tq_rswa":
        base = attn_base(r, bs, heads, head, dtype, stride)
        tq = {**full(r, base), "type": "TQFullAttentionSpec", "tq_slot_size": r.choice([0, 0, 72, 136])}
        rs = {**full(r, base), "type": "RSWASpec", "rswa_window": r.choice([64, 256])}
        picks = r.choice([[tq], [rs], [tq, full(r, base)], [rs, full(r, base)], [tq, swa(r, base, 256)]])
        out = [(f"l{i}", r.choice(picks)) for i in range(n)]
    elif kind == "encoder_only":
        base = attn_base(r, bs, heads, head, dtype, stride)
        out = [(f"enc.{i}", {"type": "EncoderOnlyAttentionSpec", **base}) for i in range(n)]
    elif kind == "mismatch":
        base = attn_base(r, bs, heads, head, dtype, stride)
        out = [(f"l{i}", full(r, base)) for i in range(n)]
        settings["_mismatch"] = True
    elif kind == "hidden":
        base = attn_base(r, bs, heads, head, dtype, stride)
        f = full(r, base)
        out = [("model.layers.%d.attn" % i, f) for i in range(n)]
        out.append(("hidden_states_cache.attn", mla(r, bs, type="HiddenStateCacheSpec", head=r.choice([2048, 4096]), dtype="bfloat16")))
    elif kind == "cross":
        base = attn_base(r, bs, heads, head, dtype, stride)
        out = []
        for i in range(n):
            out.append(("decoder.layers.%d.self_attn" % i, full(r, base)))
            out.append(("decoder.layers.%d.cross_attn" % i, {"type": "CrossAttentionSpec", **base}))
    elif kind == "sink":
        base = attn_base(r, bs, heads, head, dtype, stride)
        sink = {**full(r, base), "type": "SinkFullAttentionSpec", "sink_len": r.choice([None, 4])}
        out = [("l%d" % i, sink if i % 2 else full(r, base)) for i in range(n)]
    elif kind == "random_mix":
        base = attn_base(r, bs, heads, head, dtype, stride)
        templates = [full(r, base), swa(r, base, r.choice([16, 1024])), chunked(r, base, 2048),
                     full(r, {**base, "head_size": r.choice([32, 64, 128, 256])}),
                     swa(r, {**base, "num_kv_heads": r.choice([1, 2, 4])}, 512)]
        picks = r.sample(templates, r.randint(2, 3))
        out = [("l%d" % i, r.choice(picks)) for i in range(n)]
    else:
        raise ValueError(kind)
    return out


KINDS = ["tq_rswa", "encoder_only", "mismatch", "dsv4_real", "dsv4_real", "mamba_aligned", "mamba_aligned", "uniform", "uniform_type", "hybrid_sw", "hybrid_chunk", "hybrid_three", "mamba", "mla", "dsv4", "hidden", "cross", "sink", "random_mix"]


def settings_for(r):
    bs = r.choice([16, 16, 32, 64, 128])
    pp = r.choice([1, 1, 2])
    auto = r.random() < 0.2
    mml = r.choice([512, 2048, 8192, 32768, 131072])
    return {
        "cache_config": {"block_size": bs, "enable_prefix_caching": r.random() < 0.8,
                         "prefix_match_unit": r.choice([None, None, None, 16, 8]),
                         "num_gpu_blocks_override": r.choice([None] * 8 + [32, 1000]),
                         "mamba_cache_mode": r.choice(["none", "none", "align", "all"]), "cache_dtype": "auto",
                         "prefix_caching_hash_algo": "sha256"},
        "parallel_config": {"decode_context_parallel_size": r.choice([1] * 8 + [2, 4]),
                            "prefill_context_parallel_size": r.choice([1, 1, 1, 2]), "pipeline_parallel_size": pp,
                            "tensor_parallel_size": 1},
        "scheduler_config": {"disable_hybrid_kv_cache_manager": r.random() < 0.2,
                             "max_num_batched_tokens": r.choice([512, 2048, 8192]),
                             "max_num_encoder_input_tokens": r.choice([1500, 8192]),
                             "async_scheduling": r.random() < 0.3},
        "model_config": {"max_model_len": mml, "original_max_model_len": -1 if auto else None},
        "kv_transfer_config": r.choice([None, None, None, {"kv_connector_extra_config": {}},
                                        {"kv_connector_extra_config": {"enable_cross_layers_blocks": r.choice(["true", "True", True, "false"])}}]),
        "use_v2_model_runner": r.random() < 0.3,
        "speculative_config": r.choice([None, None, {"num_speculative_tokens": 1, "method": "mtp"},
                                        {"num_speculative_tokens": 3, "method": "ngram"}]),
    }


def split_workers(r, layers):
    mode = r.choice(["one", "one", "pp2", "tp2", "pp2tp2"])
    if mode == "one" or len(layers) < 2:
        return [layers]
    cut = r.randint(1, len(layers) - 1)
    stages = [layers[:cut], layers[cut:]] if mode.startswith("pp") else [layers]
    if mode.endswith("tp2"):
        return [s for s in stages for _ in range(2)]
    return stages


def case(r):
    s = settings_for(r)
    kind = r.choice(KINDS)
    layers = layers_for(r, kind, s)
    workers = split_workers(r, layers)
    if s.pop("_mismatch", False):
        other = dict(layers[0][1])
        other["num_kv_heads"] = other["num_kv_heads"] * 2
        workers = [list(layers), [(layers[0][0], other), *layers[1:]]]
    mem = []
    for w in workers:
        scale = r.choice([2**20, 2**26, 2**30, 2**32, 2**34, 2**34, 2**36])
        mem.append(r.randint(1, 64) * scale // 4)
    if r.random() < 0.05:
        mem[0] = 0
    return {"vllm_config": s, "available_memory": mem, "kv_cache_specs": [dict(w) for w in workers], "_kind": kind}


if __name__ == "__main__":
    seed, count, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    r = random.Random(seed)
    json.dump([case(r) for _ in range(count)], open(out, "w"))
