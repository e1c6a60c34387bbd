"""Planning cases for the hybrid-manager-off conversion, planned by the real vLLM 0.26.0.

``python gen_mutant_planning_cases.py OUT_DIR`` (vLLM on PYTHONPATH as in README.md)
writes one generated-golden file per case (the shape of
``tests/data/vllm-0.26.0-generated/``). With the hybrid KV cache manager disabled,
vLLM turns sliding-window and chunked-local layers into full-attention specs that
keep ``page_size_padded`` and ``head_size_v``; the cases pad every page and give
``head_size_v != head_size``, so a conversion that drops either field plans a
different number of blocks (docs/mutation.md, grouping mutants).
"""

import hashlib
import json
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from run_vllm import ku, parse_spec, render_spec, run  # noqa: E402

CONFIG = {
    "cache_config": {
        "block_size": 16,
        "enable_prefix_caching": True,
        "prefix_match_unit": None,
        "num_gpu_blocks_override": None,
        "mamba_cache_mode": "none",
        "cache_dtype": "auto",
        "prefix_caching_hash_algo": "sha256",
    },
    "parallel_config": {
        "decode_context_parallel_size": 1,
        "prefill_context_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "tensor_parallel_size": 1,
    },
    "scheduler_config": {
        "disable_hybrid_kv_cache_manager": True,
        "max_num_batched_tokens": 2048,
        "max_num_encoder_input_tokens": 2048,
        "async_scheduling": False,
    },
    "model_config": {"max_model_len": 8192, "original_max_model_len": None},
    "kv_transfer_config": None,
    "speculative_config": None,
    "max_concurrent_batches": 1,
    "max_in_flight_tokens": 2048,
}


def _attn(kind, **extra):
    spec = {
        "type": kind,
        "block_size": 16,
        "num_kv_heads": 8,
        "head_size": 128,
        "dtype": "bfloat16",
        "kv_quant_mode": "NONE",
        "page_size_padded": 53248,
        "indexes_kv_by_block_stride": False,
        "head_size_v": 64,
    }
    spec.update(extra)
    if kind == "ChunkedLocalAttentionSpec":
        del spec["head_size_v"]  # not a field of the chunked spec
    return spec


CASES = {
    "disable_hybrid_sliding_padded_head_size_v": (
        "disable_hybrid: padded sliding layers with head_size_v 64 keep both fields as full",
        {
            "layers.0.full": _attn("FullAttentionSpec"),
            "layers.1.sliding": _attn("SlidingWindowSpec", sliding_window=512),
            "layers.2.full": _attn("FullAttentionSpec"),
            "layers.3.sliding": _attn("SlidingWindowSpec", sliding_window=512),
        },
    ),
    "disable_hybrid_chunked_padded": (
        "disable_hybrid: padded chunked-local layers keep page_size_padded as full",
        {
            "layers.0.full": _attn("FullAttentionSpec", head_size_v=128, page_size_padded=69632),
            "layers.1.chunked": _attn(
                "ChunkedLocalAttentionSpec",
                attention_chunk_size=1024,
                head_size_v=128,
                page_size_padded=69632,
            ),
        },
    ),
}


def _auto_fit_config(pipeline_parallel_size):
    config = json.loads(json.dumps(CONFIG))
    config["scheduler_config"]["disable_hybrid_kv_cache_manager"] = False
    config["parallel_config"]["pipeline_parallel_size"] = pipeline_parallel_size
    config["model_config"] = {"max_model_len": 32768, "original_max_model_len": -1}
    config["max_concurrent_batches"] = pipeline_parallel_size
    config["max_in_flight_tokens"] = 2048 * pipeline_parallel_size
    return config


_FULL = {
    "type": "FullAttentionSpec",
    "block_size": 16,
    "num_kv_heads": 8,
    "head_size": 128,
    "dtype": "bfloat16",
    "kv_quant_mode": "NONE",
    "page_size_padded": None,
    "indexes_kv_by_block_stride": False,
    "head_size_v": 128,
}

# (name, description, vllm_config, per-worker specs, per-worker memory)
AUTO_FIT_CASES = [
    (
        "autofit_attention_free",
        "auto-fit on an attention-free model: the derived max_model_len is kept and logged",
        _auto_fit_config(1),
        [{}],
        [1 << 30],
    ),
    (
        "autofit_pp2_first_stage_without_layers",
        "auto-fit with PP 2 whose first stage has no KV layers: the second stage limits",
        _auto_fit_config(2),
        [{}, {f"layers.{i}.attn": _FULL for i in range(4)}],
        [1 << 30, 3 << 20],
    ),
    (
        "autofit_pp2_tie_first_worker_limits",
        "auto-fit with PP 2 where both stages fit the same length: the first one's memory "
        "is the one logged (7 MiB apart, less than one 7.5 MiB block)",
        _auto_fit_config(2),
        [
            {f"layers.{i}.attn": _FULL for i in range(120)},
            {f"layers.{i}.attn": _FULL for i in range(120, 240)},
        ],
        [200 * 7680 * 1024 + (7 << 20), 200 * 7680 * 1024],
    ),
    (
        "autofit_pp2_second_stage_limits",
        "auto-fit with PP 2 where the second stage has less memory: its memory is logged",
        _auto_fit_config(2),
        [
            {f"layers.{i}.attn": _FULL for i in range(120)},
            {f"layers.{i}.attn": _FULL for i in range(120, 240)},
        ],
        [400 * 7680 * 1024, 150 * 7680 * 1024],
    ),
    (
        "autofit_one_token_fits",
        "auto-fit where one token is all that fits (block size 1, one page of memory)",
        _auto_fit_config(1),
        [{"layers.0.attn": {**_FULL, "block_size": 1}}],
        [4096],
    ),
]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(
            {"logger": record.name, "level": record.levelname, "msg": record.getMessage()}
        )


def _sha(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _log_every_call():
    """Record every ``info_once``/``warning_once`` call, as the other generated goldens do.

    vLLM prints a repeated line once per process (an lru_cache over the message and
    its arguments); the goldens, and kvpure's ``vllm_log_lines``, list every call, so
    two workers with the same capacity each have their lines.
    """
    import vllm.logger as vllm_logger

    def info(logger, msg, *args):
        logger.info(msg, *args, stacklevel=3)

    def warning(logger, msg, *args):
        logger.warning(msg, *args, stacklevel=3)

    vllm_logger._print_info_once = info
    vllm_logger._print_warning_once = warning


def main():
    out_dir = sys.argv[1]
    from vllm.v1 import kv_cache_interface as kvi

    _log_every_call()

    runs = [
        (name, description, CONFIG, [specs], [1 << 30])
        for name, (description, specs) in CASES.items()
    ] + AUTO_FIT_CASES
    for name, description, config, workers, memory in runs:
        rendered = [{n: render_spec(parse_spec(s)) for n, s in w.items()} for w in workers]
        inp = {"vllm_config": config, "available_memory": memory, "kv_cache_specs": rendered}
        collect = _Collect()
        logger = logging.getLogger("vllm.v1.core.kv_cache_utils")
        logger.addHandler(collect)
        result = run(json.loads(json.dumps(inp)))
        logger.removeHandler(collect)
        case = {"case": name, "description": description, "input": inp, **result}
        case["logs"] = collect.records
        case["meta"] = {
            "vllm_version": "0.26.0",
            "kv_cache_utils_sha256": _sha(ku.__file__),
            "kv_cache_interface_sha256": _sha(kvi.__file__),
            "generated_by": "real vLLM 0.26.0 code (vllm.v1.core.kv_cache_utils."
            "get_kv_cache_configs, unmodified wheel) on CPU via "
            "tools/vllm_oracle/gen_mutant_planning_cases.py",
        }
        with open(os.path.join(out_dir, name + ".json"), "w") as handle:
            json.dump(case, handle)
            handle.write("\n")
        print(
            name,
            result.get("error") or [c["num_blocks"] for c in result["output"]],
            result.get("final_max_model_len"),
            [r["msg"][:60] for r in collect.records],
        )


if __name__ == "__main__":
    main()
