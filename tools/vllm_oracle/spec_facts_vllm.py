"""Per-spec numbers from the real vLLM 0.26.0 for every distinct spec in planning inputs.

``python spec_facts_vllm.py INPUTS.json OUT.json``: for each distinct spec and a few
settings: page sizes, max_memory_usage_bytes, max_num_blocks_per_req, kind, window.
"""

import json
import sys

import run_vllm as R
from vllm.v1 import kv_cache_interface as kvi

from settings_grid import SETTINGS  # noqa: E402


def cfg_for(s):
    return R.Cfg({
        "cache_config": {"block_size": 16, "enable_prefix_caching": True, "prefix_match_unit": None,
                         "num_gpu_blocks_override": None, "mamba_cache_mode": s["mode"]},
        "parallel_config": {"decode_context_parallel_size": s["dcp"], "prefill_context_parallel_size": 1,
                            "pipeline_parallel_size": s["pp"], "tensor_parallel_size": 1},
        "scheduler_config": {"disable_hybrid_kv_cache_manager": False, "max_num_batched_tokens": s["mnbt"],
                             "max_num_encoder_input_tokens": 1500, "async_scheduling": s["async"]},
        "model_config": {"max_model_len": s["mml"], "original_max_model_len": None},
    })


def facts(obj):
    try:
        spec = R.parse_spec(obj)
    except Exception as e:  # noqa: BLE001
        return {"construct_error": type(e).__name__}
    out = {"rendered": R.render_spec(spec), "kind": kvi.get_kv_cache_spec_kind(spec).value,
           "sliding_window": kvi.get_kv_cache_spec_sliding_window(spec), "per_settings": []}
    for s in SETTINGS:
        cfg = cfg_for(s)
        row = {}
        for name, fn in (("max_memory_usage_bytes", lambda: spec.max_memory_usage_bytes(cfg)),
                         ("max_num_blocks_per_req", lambda: spec.max_num_blocks_per_req(cfg, s["mml"]))):
            try:
                row[name] = fn()
            except Exception as e:  # noqa: BLE001
                row[name] = {"error": type(e).__name__}
        out["per_settings"].append(row)
    return out


if __name__ == "__main__":
    seen = {}
    for case in json.load(open(sys.argv[1])):
        for worker in case["kv_cache_specs"]:
            for spec in worker.values():
                seen.setdefault(json.dumps(spec, sort_keys=True), spec)
    json.dump([{"spec": s, **facts(s)} for s in seen.values()], open(sys.argv[2], "w"))
