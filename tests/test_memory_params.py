"""Parameter counts and weight bytes from config.json against published figures.

Sources of the expected counts:
- Llama-3-8B: 8,030,261,248 parameters (meta-llama/Meta-Llama-3-8B on Hugging Face;
  its model.safetensors.index.json total_size is 16,060,522,496 bytes = 2 x the count).
- Mistral-7B-v0.1: 7,241,732,096 (mistralai/Mistral-7B-v0.1 on Hugging Face, "7.24B params";
  index total_size 14,483,464,192 bytes).
- Gemma-2-9B: 9,241,705,984 (google/gemma-2-9b on Hugging Face, "9.24B params").
- DeepSeek-V3: 671B main-model parameters (deepseek-ai/DeepSeek-V3 model card: 671B, plus
  14B for the multi-token-prediction module that vLLM does not load by default).
- DeepSeek-V2-Lite: 15.7B (deepseek-ai/DeepSeek-V2-Lite model card).
- Logged weights: vLLM 0.19 logs "Model loading took 14.99 GiB" for Llama-3.1-8B (TP 1),
  7.51 (TP 2), 3.77 (TP 4), 4.26 for a first PP=4 stage (llm-d-planner accuracy report,
  https://github.com/llm-d-incubation/llm-d-planner/blob/fbd68515a903397a1b785a2189dc7512b0d55680/accuracy/results/v0.19.0/accuracy_report.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.checkpoint_tensors import checkpoint_tensors, parameter_count
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import checkpoint_quantization, worker_weights
from kvpure.models.config import HFConfig, parse_model_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GIB = 1 << 30


def _config(name: str, **extra: object) -> HFConfig:
    data = json.loads((EXAMPLES / f"{name}.json").read_text())
    data.update(extra)
    return parse_model_config(data)


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("llama3_8b", 8_030_261_248),
        ("mistral_7b_v0_1", 7_241_732_096),
        ("gemma2_9b", 9_241_705_984),
    ],
)
def test_dense_counts_equal_the_published_counts(name: str, count: int) -> None:
    assert parameter_count(_config(name)) == count


@pytest.mark.parametrize(
    ("name", "billions", "tolerance"),
    [("deepseek_v3", 671.0, 0.001), ("deepseek_v2_lite", 15.7, 0.005)],
)
def test_mla_moe_counts_match_the_model_cards(name: str, billions: float, tolerance: float) -> None:
    assert abs(parameter_count(_config(name)) / 1e9 - billions) / billions < tolerance


def test_hybrid_mamba_layers_are_counted() -> None:
    config = _config("granite_4_0_h_small")
    names = [t.name for t in checkpoint_tensors(config)]
    assert any(".mamba.in_proj." in n for n in names)
    assert any(".self_attn.q_proj." in n for n in names)
    assert any(".shared_experts." in n for n in names)


def _linear_bytes_per_param(quantization: str) -> float:
    config = _config("llama3_8b")
    dense = {
        t.name.rsplit(".", 1)[0]: t for t in checkpoint_tensors(config) if ".mlp.up_proj" in t.name
    }
    packed = [
        t
        for t in checkpoint_tensors(config, quantization=quantization)
        if ".mlp.up_proj." in t.name
    ]
    params = sum(t.nbytes // t.itemsize for t in dense.values())
    return sum(t.nbytes for t in packed) / params


@pytest.mark.parametrize(
    ("quantization", "expected"),
    [
        ("none", 2.0),
        ("fp8", 1.0),  # fp8 weight; one float32 scale per tensor (negligible)
        (
            "gptq",
            0.5 + 2 / 128 + 0.5 / 128,
        ),  # 4-bit weight, fp16 scale and 4-bit zero per group of 128
        ("awq", 0.5 + 2 / 128 + 0.5 / 128),
        ("nvfp4", 0.5 + 1 / 16),  # 4-bit weight, an fp8 scale per 16
        # vLLM's Mxfp4Config leaves dense linear layers unquantized (mxfp4.py:
        # get_quant_method -> UnquantizedLinearMethod); only routed experts are 4-bit
        # (tests/test_memory_weights_vllm.py).
        ("mxfp4", 2.0),
    ],
)
def test_bytes_per_parameter_of_each_quantization(quantization: str, expected: float) -> None:
    assert _linear_bytes_per_param(quantization) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("parallel", "logged_gib"),
    [
        (Parallelism(), 14.99),
        (Parallelism(tp=2), 7.51),
        (Parallelism(tp=4), 3.77),
        (Parallelism(pp=4), 4.26),
    ],
)
def test_estimated_weights_cover_the_logged_weights(
    parallel: Parallelism, logged_gib: float
) -> None:
    weights = worker_weights(_config("llama3_8b"), parallel)
    assert not weights.exact
    got = weights.bytes_per_worker[0]
    assert abs(got - logged_gib * GIB) <= weights.error_bytes(0) + 0.005 * GIB


def test_runtime_fp8_and_float32_change_the_bytes() -> None:
    config = _config("llama3_8b")
    bf16 = worker_weights(config, Parallelism()).bytes_per_worker[0]
    fp32 = worker_weights(config, Parallelism(), dtype="float32").bytes_per_worker[0]
    fp8 = worker_weights(config, Parallelism(), quantization="fp8").bytes_per_worker[0]
    # All but the attention layers' four float32 scale buffers (32 layers x 16 B) double.
    assert fp32 - 2 * bf16 == -32 * 16
    # vLLM 0.19 logs 29.98 GiB (--dtype float32) and 8.49 GiB (--quantization fp8), same report.
    assert abs(fp32 / GIB - 29.98) < 0.2
    assert abs(fp8 / GIB - 8.49) < 0.1


def test_quantization_config_picks_the_layout() -> None:
    awq = _config("llama3_8b", quantization_config={"quant_method": "awq", "bits": 4})
    assert checkpoint_quantization(awq, None) == "awq"
    nvfp4 = _config(
        "llama3_8b", quantization_config={"quant_method": "modelopt", "quant_algo": "NVFP4"}
    )
    assert checkpoint_quantization(nvfp4, None) == "nvfp4"
    with pytest.raises(InvalidFieldError, match="quant_method"):
        checkpoint_quantization(
            _config("llama3_8b", quantization_config={"quant_method": "x"}), None
        )
    with pytest.raises(InvalidFieldError, match="quantization"):
        checkpoint_quantization(_config("llama3_8b"), "bitsandbytes")


# config.json values of the public checkpoints (Hugging Face model pages), with the
# weights vLLM 0.19 logged for them on an H100 (the llm-d-planner logs in tests/data/memory_logs).
_LOGGED_MODELS = {
    "Qwen/Qwen2.5-7B-Instruct": (
        {
            "model_type": "qwen2",
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
        },
        {1: 14.25, 2: 7.12, 4: 3.55},
    ),
    "codellama/CodeLlama-7b-hf": (
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32016,
            "tie_word_embeddings": False,
        },
        {1: 12.56},
    ),
    "google/gemma-2-9b-it": (
        {
            "model_type": "gemma2",
            "hidden_size": 3584,
            "intermediate_size": 14336,
            "num_hidden_layers": 42,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "vocab_size": 256000,
        },
        {1: 17.22},
    ),
    "google/gemma-2-2b-it": (
        {
            "model_type": "gemma2",
            "hidden_size": 2304,
            "intermediate_size": 9216,
            "num_hidden_layers": 26,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "vocab_size": 256000,
        },
        {1: 4.9},
    ),
    "ibm-granite/granite-3.1-8b-instruct": (
        {
            "model_type": "granite",
            "hidden_size": 4096,
            "intermediate_size": 12800,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 49155,
            "tie_word_embeddings": True,
        },
        {1: 15.25},
    ),
}


@pytest.mark.parametrize("model", sorted(_LOGGED_MODELS))
def test_estimated_weights_cover_logged_weights_of_other_families(model: str) -> None:
    fields, logged = _LOGGED_MODELS[model]
    config = parse_model_config({"architectures": ["X"], "torch_dtype": "bfloat16", **fields})
    for tp, gib in logged.items():
        weights = worker_weights(config, Parallelism(tp=tp))
        got = weights.bytes_per_worker[0]
        assert abs(got - gib * GIB) <= weights.error_bytes(0) + 0.005 * GIB, (model, tp)


@pytest.mark.parametrize(
    ("quantization_config", "layout"),
    [
        ({"quant_method": "compressed-tensors", "format": "int-quantized"}, "fp8"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 128}}},
            },
            "gptq",
        ),
        ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4"),
        ({"quant_method": "fp8"}, "fp8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
    ],
)
def test_compressed_tensors_and_other_formats_pick_their_layout(
    quantization_config: dict[str, object], layout: str
) -> None:
    config = _config("llama3_8b", quantization_config=quantization_config)
    assert checkpoint_quantization(config, None) == layout
