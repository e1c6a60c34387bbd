"""Full-size layouts shaped like real models, for comparing kvpure with vLLM 0.26.0.

``python gen_models.py OUT.json``: every model under a few settings (PP 1/2/4,
async scheduling, DCP, auto-fit, hybrid manager off, EAGLE).
"""

import json
import sys

from gen_cases import attn_base, chunked, full, mla, swa, swa_mla


class R:  # deterministic stand-in for random.Random in attn_base (no quantisation)
    def choice(self, xs):
        return xs[0]


r = R()


def base(bs, heads, head, dtype="bfloat16", stride=True):
    b = attn_base(r, bs, heads, head, dtype, stride)
    b["kv_quant_mode"] = "NONE"
    return b


def llama70b(bs):
    f = full(r, base(bs, 8, 128))
    return [(f"model.layers.{i}.self_attn.attn", f) for i in range(80)]


def gemma3_27b(bs):
    b = base(bs, 16, 128)
    return [(f"model.layers.{i}.self_attn.attn", full(r, b) if i % 6 == 5 else swa(r, b, 1024)) for i in range(62)]


def gpt_oss_120b(bs, eagle=True):
    b = base(bs, 8, 64)
    layers = [(f"model.layers.{i}.attn", swa(r, b, 128) if i % 2 == 0 else full(r, b)) for i in range(36)]
    if eagle:
        layers.append(("drafter.layers.0.attn", full(r, b)))
    return layers


def llama4_scout(bs):
    b = base(bs, 8, 128)
    return [(f"language_model.model.layers.{i}.self_attn.attn", full(r, b) if i % 4 == 3 else chunked(r, b, 8192)) for i in range(48)]


def qwen3_next(bs, max_model_len, mode):
    heads, head = 2, 256
    one_tok = 2 * heads * head * 2
    shapes = [[8192, 3], [32, 128, 128]]
    state = (8192 * 3 + 32 * 128 * 128) * 2
    attn_bs = 16 * -(-state // (16 * one_tok))
    page = attn_bs * one_tok
    b = base(attn_bs, heads, head)
    f = full(r, b)
    m = {"type": "MambaSpec", "block_size": max_model_len if mode == "none" else attn_bs, "shapes": shapes,
         "dtypes": ["bfloat16", "bfloat16"], "page_size_padded": page, "mamba_type": "GDN_ATTN",
         "mamba_cache_mode": mode, "num_speculative_blocks": 0}
    return attn_bs, [(f"model.layers.{i}.attn", f if i % 4 == 3 else m) for i in range(48)]


def deepseek_v32(bs):
    main = mla(r, bs, head=576, dtype="uint8", cache_dtype_str="fp8_ds_mla")
    idx = mla(r, bs, head=132, dtype="uint8")
    out = []
    for i in range(61):
        out.append((f"model.layers.{i}.self_attn.attn", main))
        out.append((f"model.layers.{i}.self_attn.indexer.k_cache", idx))
    return out


def deepseek_v4(full_bs=256, mtp=True):
    out = []
    ratios = [0, 0] + [4 if i % 2 else 128 for i in range(59)]
    for i, cr in enumerate(ratios):
        out.append((f"model.layers.{i}.attn.swa_cache", swa_mla(r, 64, 128, alignment=576, dtype="uint8")))
        if cr:
            out.append((f"model.layers.{i}.attn.mla_attn", mla(r, full_bs, head=512, dtype="uint8", cache_dtype_str="fp8_ds_mla",
                                                               model_version="deepseek_v4", compress_ratio=cr, alignment=576)))
            coff = 2 if cr == 4 else 1
            out.append((f"model.layers.{i}.attn.compressor.state_cache", {
                "type": "SlidingWindowMLASpec", "block_size": 4 if cr == 4 else 8, "num_kv_heads": 1,
                "head_size": 2 * coff * 512, "dtype": "float32", "kv_quant_mode": "NONE", "page_size_padded": None,
                "indexes_kv_by_block_stride": False, "sliding_window": coff * cr, "head_size_v": None,
                "cache_dtype_str": None, "alignment": 576, "compress_ratio": 1, "model_version": None}))
            if cr == 4:
                out.append((f"model.layers.{i}.attn.indexer.k_cache", mla(r, full_bs, head=132, dtype="uint8", compress_ratio=4, alignment=576)))
    if mtp:
        out.append(("mtp.layers.0.attn.swa_cache", swa_mla(r, 64, 128, alignment=576, dtype="uint8")))
    return out


def whisper(bs):
    b = base(bs, 20, 64, dtype="float16")
    out = []
    for i in range(32):
        out.append((f"model.decoder.layers.{i}.self_attn.attn", full(r, b)))
        out.append((f"model.decoder.layers.{i}.encoder_attn.attn", {"type": "CrossAttentionSpec", **b}))
    return out


def settings(bs, mml, pp=1, async_=False, dcp=1, auto=False, disable=False, spec=None, override=None, mode="none", prefix=True):
    return {
        "cache_config": {"block_size": bs, "enable_prefix_caching": prefix, "prefix_match_unit": None,
                         "num_gpu_blocks_override": override, "mamba_cache_mode": mode, "cache_dtype": "auto",
                         "prefix_caching_hash_algo": "sha256"},
        "parallel_config": {"decode_context_parallel_size": dcp, "prefill_context_parallel_size": 1,
                            "pipeline_parallel_size": pp, "tensor_parallel_size": 1},
        "scheduler_config": {"disable_hybrid_kv_cache_manager": disable, "max_num_batched_tokens": 8192,
                             "max_num_encoder_input_tokens": 1500, "async_scheduling": async_},
        "model_config": {"max_model_len": mml, "original_max_model_len": -1 if auto else None},
        "kv_transfer_config": None,
        "speculative_config": spec,
    }


def split(layers, pp):
    per = -(-len(layers) // pp)
    return [dict(layers[i * per:(i + 1) * per]) for i in range(pp)]


def cases():
    out = []
    eagle = {"num_speculative_tokens": 3, "method": "eagle3"}
    mtp = {"num_speculative_tokens": 1, "method": "mtp"}
    for name, make, bs, mml in [("llama70b", llama70b, 16, 131072), ("gemma3_27b", gemma3_27b, 16, 131072),
                                ("gpt_oss_120b", gpt_oss_120b, 16, 131072), ("llama4_scout", llama4_scout, 16, 262144),
                                ("deepseek_v32", deepseek_v32, 64, 163840), ("whisper", whisper, 16, 448)]:
        layers = make(bs)
        for pp in (1, 2, 4):
            for variant in ("plain", "async", "auto", "disable", "spec"):
                s = settings(bs, mml, pp=pp, async_=variant == "async", auto=variant == "auto",
                             disable=variant == "disable", spec=eagle if variant == "spec" else None)
                mem = [40 * 2**30 // pp + k * 2**27 for k in range(pp)]
                out.append({"_name": f"{name}/pp{pp}/{variant}", "vllm_config": s, "available_memory": mem, "kv_cache_specs": split(layers, pp)})
    for mode in ("none", "align", "all"):
        for pp in (1, 2):
            attn_bs, layers = qwen3_next(16, 262144, mode)
            s = settings(attn_bs, 262144, pp=pp, mode=mode, prefix=mode == "align")
            out.append({"_name": f"qwen3_next/{mode}/pp{pp}", "vllm_config": s, "available_memory": [60 * 2**30] * pp, "kv_cache_specs": split(layers, pp)})
    for pp in (1, 2):
        for variant in ("plain", "mtp", "auto", "disable"):
            s = settings(256, 1048576, pp=pp, auto=variant == "auto", disable=variant == "disable", spec=mtp if variant == "mtp" else None)
            out.append({"_name": f"deepseek_v4/{variant}/pp{pp}", "vllm_config": s, "available_memory": [70 * 2**30] * pp,
                        "kv_cache_specs": split(deepseek_v4(), pp)})
    return out


if __name__ == "__main__":
    json.dump(cases(), open(sys.argv[1], "w"))
