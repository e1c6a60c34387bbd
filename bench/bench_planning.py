"""Planning speed: kvpure's get_kv_cache_configs on large models, beside a baseline.

Baseline: vLLM 0.26.0's own ``get_kv_cache_configs`` on the same input when
vLLM can be imported (set ``KVPURE_VLLM_PATH`` to an unpacked vLLM wheel, as
tools/vllm_oracle does); otherwise kvpure on a model one tenth the size, so the
ratio shows how planning time grows with the layer count (10x layers should
cost about 10x, not 100x).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvpure.interop.planning import PlanningInput, parse_planning_input, plan_input

ROOT = Path(__file__).resolve().parent.parent


def _spec(kind: str, bs: int = 16) -> dict[str, Any]:
    base: dict[str, Any] = {
        "block_size": bs,
        "num_kv_heads": 8,
        "head_size": 128,
        "dtype": "bfloat16",
        "kv_quant_mode": "NONE",
        "page_size_padded": None,
        "indexes_kv_by_block_stride": True,
    }
    if kind == "full":
        return {"type": "FullAttentionSpec", **base}
    return {"type": "SlidingWindowSpec", **base, "sliding_window": 1024}


#: The release both sides plan as: the baseline is vLLM 0.26.0's own planner (the input's
#: settings are 0.26's; 0.33+ inputs also name mamba_cache_mode and the layout).
BASELINE_RELEASE = "0.26"


def _settings(max_model_len: int, auto_fit: bool) -> dict[str, Any]:
    return {
        "cache_config": {"block_size": 16, "enable_prefix_caching": True},
        "parallel_config": {"pipeline_parallel_size": 1},
        "scheduler_config": {"max_num_batched_tokens": 8192},
        "model_config": {
            "max_model_len": max_model_len,
            "original_max_model_len": -1 if auto_fit else None,
        },
    }


def uniform_case(num_layers: int) -> dict[str, Any]:
    specs = {f"model.layers.{i}.self_attn.attn": _spec("full") for i in range(num_layers)}
    return {
        "vllm_version": BASELINE_RELEASE,
        "vllm_config": _settings(131072, auto_fit=True),
        "available_memory": [num_layers * 2**28],
        "kv_cache_specs": [specs],
    }


def hybrid_case(num_layers: int, num_workers: int = 2) -> dict[str, Any]:
    names = [f"model.layers.{i}.self_attn.attn" for i in range(num_layers)]
    kinds = ["full" if i % 6 == 5 else "sliding" for i in range(num_layers)]
    per = -(-num_layers // num_workers)
    workers = [
        {
            n: _spec(k)
            for n, k in zip(names[w * per : (w + 1) * per], kinds[w * per :], strict=False)
        }
        for w in range(num_workers)
    ]
    return {
        "vllm_version": BASELINE_RELEASE,
        "vllm_config": _settings(32768, auto_fit=False),
        "available_memory": [num_layers * 2**28] * num_workers,
        "kv_cache_specs": workers,
    }


def _time(fn: Callable[[], object], repeat: int = 20) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _vllm_runner() -> Callable[[dict[str, Any]], Callable[[], object]] | None:
    path = os.environ.get("KVPURE_VLLM_PATH")
    if not path:
        return None
    sys.path[:0] = [*path.split(os.pathsep), str(ROOT / "tools" / "vllm_oracle")]
    import run_vllm  # type: ignore[import-not-found]  # optional, outside the project

    def prepare(case: dict[str, Any]) -> Callable[[], object]:
        # Specs are built once; only vLLM's planner call is timed (on a fresh config).
        config = _complete_vllm_config(json.loads(json.dumps(case["vllm_config"])))
        specs = [
            {name: run_vllm.parse_spec(spec) for name, spec in worker.items()}
            for worker in case["kv_cache_specs"]
        ]
        memory = list(case["available_memory"])
        return lambda: run_vllm.ku.get_kv_cache_configs(run_vllm.Cfg(config), specs, memory)

    return prepare


_DEFAULTS: dict[str, dict[str, Any]] = {
    "cache_config": {
        "prefix_match_unit": None,
        "num_gpu_blocks_override": None,
        "mamba_cache_mode": "none",
    },
    "parallel_config": {"decode_context_parallel_size": 1, "prefill_context_parallel_size": 1},
    "scheduler_config": {
        "disable_hybrid_kv_cache_manager": False,
        "max_num_encoder_input_tokens": 8192,
        "async_scheduling": False,
    },
    "model_config": {},
}


def _complete_vllm_config(cfg: dict[str, Any]) -> dict[str, Any]:
    out = dict(cfg)
    for section, values in _DEFAULTS.items():
        out[section] = {**values, **cfg[section]}
    out.setdefault("kv_transfer_config", None)
    out.setdefault("speculative_config", None)
    return out


def _planner(parsed: PlanningInput) -> Callable[[], object]:
    return lambda: plan_input(parsed)


def main() -> None:
    vllm = _vllm_runner()
    baseline_label = "vLLM 0.26.0" if vllm else "kvpure, 1/10 layers"
    print(f"{'case':<32}{'kvpure ms':>12}{baseline_label + ' ms':>26}{'ratio':>10}")
    for name, make, layers in (
        ("uniform, auto-fit", uniform_case, 122),
        ("hybrid 5:1, 2 workers", hybrid_case, 122),
        ("uniform, auto-fit", uniform_case, 1220),
    ):
        case = make(layers)
        parsed = parse_planning_input(case)
        ours = _time(_planner(parsed))
        if vllm is not None:
            base = _time(vllm(case))
        else:
            base = _time(_planner(parse_planning_input(make(max(layers // 10, 1)))))
        label = f"{name} ({layers} layers)"
        print(f"{label:<32}{ours * 1e3:>12.2f}{base * 1e3:>26.2f}{ours / base:>10.2f}")


if __name__ == "__main__":
    main()
