"""Write small variants of the bundled configs for the weight-layout oracle (round 5).

Each variant is a bundled config.json (``tests/data/model_configs``) with fewer layers
or experts, and some with one family option flipped or a key left to its default, so that
every branch of the weight layout (``checkpoint_layers``, ``hybrid_layers``,
``model_traits``, ``whisper_tensors``) decides a count vLLM 0.26 computed. Then:

    python tools/model_configs/small_variants.py
    PYTHONPATH=/work/vllm/0.26.0:DEPS python tools/model_configs/vllm_weight_counts.py \\
        tests/data/model_configs/vllm_weight_counts_small.json \\
        tests/data/model_configs/small/*.json

(DEPS: the folders named in vllm_weight_counts.py's docstring.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "tests/data/model_configs"
DROP = object()
"""A value that removes the key (the model class then takes its config class's default)."""

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # the five slow bundled MoE configs, with a few experts a layer
    "kimi_k2_small.json": (
        "kimi_k2_instruct.json",
        {"num_hidden_layers": 3, "n_routed_experts": 8},
    ),
    "minimax_m2_small.json": (
        "minimax_m2.json",
        {"num_hidden_layers": 2, "num_local_experts": 4},
    ),
    "minimax_m2_plain.json": (
        "minimax_m2.json",
        {
            "num_hidden_layers": 2,
            "num_local_experts": 4,
            "use_qk_norm": False,
            "use_routing_bias": False,
        },
    ),
    "qwen3_moe_small.json": (
        "qwen3_30b_a3b.json",
        {"num_hidden_layers": 4, "num_experts": 8},
    ),
    "qwen3_moe_sparse_step.json": (
        "qwen3_30b_a3b.json",
        {
            "num_hidden_layers": 7,
            "num_experts": 4,
            "mlp_only_layers": [5],
            "decoder_sparse_step": 3,
        },
    ),
    "glm4_moe_small.json": (
        "glm_4_5_air.json",
        {"num_hidden_layers": 3, "n_routed_experts": 8},
    ),
    # one option flipped, or left to its default
    "deepseek_v2_q_proj.json": (
        "deepseek_v2_lite.json",
        {"num_hidden_layers": 3, "n_routed_experts": 8, "q_lora_rank": None},
    ),
    "deepseek_v2_q_lora.json": (
        "deepseek_v2_lite.json",
        {"num_hidden_layers": 3, "n_routed_experts": 8, "q_lora_rank": 512},
    ),
    "cohere_qk_norm.json": (
        "aya_23_8b.json",
        {"num_hidden_layers": 2, "use_qk_norm": True},
    ),
    "falcon_h1_options.json": (
        "falcon_h1_7b.json",
        {
            "num_hidden_layers": 2,
            "mamba_d_ssm": None,  # null: mamba_expand x hidden_size
            "mamba_expand": 1,
            "mamba_rms_norm": True,
            "mamba_proj_bias": True,
            "mamba_conv_bias": False,
            "mamba_n_groups": 2,
        },
    ),
    "falcon_h1_default_d_ssm.json": (
        "falcon_h1_7b.json",
        # absent: FalconH1Config's default of 1024 (8 heads of 128)
        {"num_hidden_layers": 2, "mamba_d_ssm": DROP, "mamba_n_heads": 8},
    ),
    "olmo_1.json": (
        "olmo2_7b.json",
        {"num_hidden_layers": 2, "model_type": "olmo", "architectures": ["OlmoForCausalLM"]},
    ),
    "llama_no_experts.json": (
        "llama3_2_1b.json",
        {"num_hidden_layers": 2, "num_local_experts": 0},
    ),
    "cohere2_qk_norm.json": (
        "command_r7b.json",
        {"num_hidden_layers": 4, "use_qk_norm": True},
    ),
    "whisper_defaults.json": (
        "whisper_large_v3.json",
        # WhisperConfig's defaults: 80 mel bins, 1500 source and 448 target positions
        {
            "encoder_layers": 1,
            "decoder_layers": 1,
            "num_hidden_layers": 1,
            "num_mel_bins": DROP,
            "max_source_positions": DROP,
            "max_target_positions": DROP,
        },
    ),
    "jamba_options.json": (
        "jamba_v0_1.json",
        {
            "num_hidden_layers": 8,
            "num_experts": 4,
            "expert_layer_period": 3,
            "expert_layer_offset": 2,
            "attn_layer_period": 4,
            "attn_layer_offset": 1,
            "mamba_proj_bias": True,
            "mamba_conv_bias": False,
            "mamba_dt_rank": DROP,
        },
    ),
    "jamba_dense.json": (
        "jamba_v0_1.json",
        {"num_hidden_layers": 8, "num_experts": 1},
    ),
    "nemotron_h_options.json": (
        "nemotron_nano_9b_v2.json",
        {"num_hidden_layers": 4, "hybrid_override_pattern": "M-*M", "use_conv_bias": False},
    ),
    # n_groups left to transformers' NemotronHConfig default (8), and its older name
    "nemotron_h_default_groups.json": (
        "nemotron_nano_9b_v2.json",
        {"num_hidden_layers": 3, "hybrid_override_pattern": "M-M", "n_groups": DROP},
    ),
    "nemotron_h_mamba_n_groups.json": (
        "nemotron_nano_9b_v2.json",
        {
            "num_hidden_layers": 3,
            "hybrid_override_pattern": "M*M",
            "n_groups": DROP,
            "mamba_n_groups": 2,
        },
    ),
    "whisper_small_layers.json": (
        "whisper_large_v3.json",
        {"encoder_layers": 2, "decoder_layers": 3, "num_hidden_layers": 2},
    ),
}


def _apply(data: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key, value in changes.items():
        if value is DROP:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _apply(out[key], value)
        else:
            out[key] = value
    return out


def main() -> None:
    folder = DATA / "small"
    folder.mkdir(exist_ok=True)
    for name, (base, changes) in VARIANTS.items():
        data = json.loads((DATA / base).read_text())
        data.pop("quantization_config", None)
        (folder / name).write_text(json.dumps(_apply(data, changes), indent=1) + "\n")


if __name__ == "__main__":
    main()
