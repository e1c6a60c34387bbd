"""Ask vLLM 0.26 itself for the recurrent-state shapes and dtypes of the bundled hybrids.

Run with vLLM's source on the path (see tools/vllm_oracle/README.md; the model
modules also need einops, compressed-tensors and loguru):

    PYTHONPATH=/tmp/vllmsrc:/tmp/oracle_deps python tools/model_configs/vllm_state_shapes.py \
        tests/data/model_configs/vllm_state_shapes.json

For each config and tensor-parallel size it calls the model class's own
``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``
(the classmethods vLLM's engine uses to size the Mamba page), after the
model's ``verify_and_update_config`` hook has set ``mamba_ssm_cache_dtype``
(``MODELS_CONFIG_MAP``). vLLM builds the conv state in its default ``SD``
layout: ``(state_len, channels)``. Qwen3.5's module needs torchvision, so its
configs go through Qwen3-Next's classmethods, which read the same fields
(``hf_text_config.linear_*``) with the same calculator.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from vllm.model_executor.models.config import MODELS_CONFIG_MAP
from vllm.model_executor.models.falcon_h1 import FalconH1ForCausalLM
from vllm.model_executor.models.granitemoehybrid import GraniteMoeHybridForCausalLM
from vllm.model_executor.models.jamba import JambaForCausalLM
from vllm.model_executor.models.kimi_linear import KimiLinearForCausalLM
from vllm.model_executor.models.nemotron_h import NemotronHForCausalLM
from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "qwen3_next_80b_a3b.json": (Qwen3NextForCausalLM, (1, 2, 4, 8)),
    "qwen3_6_35b_a3b.json": (Qwen3NextForCausalLM, (1, 2, 4, 8)),
    "qwen3_5_4b.json": (Qwen3NextForCausalLM, (1, 2, 4)),
    "kimi_linear_48b_a3b.json": (KimiLinearForCausalLM, (1, 2, 4, 8)),
    "nemotron_nano_9b_v2.json": (NemotronHForCausalLM, (1, 2, 4, 8)),
    "falcon_h1_7b.json": (FalconH1ForCausalLM, (1, 2)),
    "jamba_v0_1.json": (JambaForCausalLM, (1, 2, 4, 8)),
}
GRANITE = ROOT / "examples" / "granite_4_0_h_small.json"


def _ns(data: Any) -> Any:
    if isinstance(data, dict):
        return SimpleNamespace(
            **{k: _ns(v) for k, v in data.items() if k != "linear_attn_config"},
            **(
                {"linear_attn_config": data["linear_attn_config"]}
                if "linear_attn_config" in data
                else {}
            ),
        )
    return data


def _vllm_config(config: dict[str, Any], tp: int) -> Any:
    hf = _ns(config)
    text = _ns(config["text_config"]) if "text_config" in config else hf
    dtype = getattr(text, "dtype", None) or getattr(hf, "torch_dtype", None) or "bfloat16"
    model_config = SimpleNamespace(hf_config=hf, hf_text_config=text, dtype=getattr(torch, dtype))
    cache_config = SimpleNamespace(mamba_cache_dtype="auto", mamba_ssm_cache_dtype="auto")
    vllm_config = SimpleNamespace(
        model_config=model_config,
        cache_config=cache_config,
        parallel_config=SimpleNamespace(tensor_parallel_size=tp),
        speculative_config=None,
        num_speculative_tokens=0,
    )
    hook = MODELS_CONFIG_MAP.get(config["architectures"][0])
    if hook is not None and config["architectures"][0] != "Qwen3_5ForConditionalGeneration":
        hook.verify_and_update_config(vllm_config)
    if config["architectures"][0].startswith("Qwen3_5"):
        MODELS_CONFIG_MAP["Qwen3_5ForConditionalGeneration"].verify_and_update_config(vllm_config)
    return vllm_config


def main() -> None:
    out: dict[str, Any] = {}
    cases = {**{name: case for name, case in CASES.items()}}
    for name, (cls, tps) in cases.items():
        config = json.loads((ROOT / "tests" / "data" / "model_configs" / name).read_text())
        out[name] = _facts(cls, config, tps)
    out["examples/granite_4_0_h_small.json"] = _facts(
        GraniteMoeHybridForCausalLM, json.loads(GRANITE.read_text()), (1, 2, 4, 8)
    )
    data = {"vllm_version": "0.26.0", "conv_layout": "SD", "models": out}
    Path(sys.argv[1]).write_text(json.dumps(data, indent=1) + "\n")


def _facts(cls: Any, config: dict[str, Any], tps: tuple[int, ...]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for tp in tps:
        vllm_config = _vllm_config(config, tp)
        shapes = cls.get_mamba_state_shape_from_config(vllm_config)
        dtypes = cls.get_mamba_state_dtype_from_config(vllm_config)
        facts[str(tp)] = {
            "shapes": [list(shape) for shape in shapes],
            "dtypes": [str(d).removeprefix("torch.") for d in dtypes],
        }
    return facts


if __name__ == "__main__":
    main()
