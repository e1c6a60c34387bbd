"""The quantized layouts of one linear layer, against the parameters vLLM 0.26 creates.

Expected values, by hand from each method's ``create_weights`` in vLLM 0.26
(``vllm/model_executor/layers/quantization/``), for one logical layer
(``output_partition_sizes`` of one entry) at TP 1:

- ``fp8.py`` ``Fp8LinearMethod`` (per-tensor, dynamic activations): ``weight``
  ``(out, in)`` float8_e4m3fn and one float32 ``weight_scale`` per partition
  (``create_fp8_scale_parameter``); no ``input_scale`` without static activations;
- ``auto_awq.py`` ``BaseAWQLinearMethod``: int32 ``qweight`` ``(in, out / 8)``, int32
  ``qzeros`` ``(in / 128, out / 8)`` and ``scales`` ``(in / 128, out)`` (float16, AWQ's
  dtype);
- ``auto_gptq.py`` ``AutoGPTQLinearMethod``: int32 ``qweight`` ``(in / 8, out)``, and
  ``qzeros`` and ``scales`` as AWQ's (its ``g_idx`` aside: not listed by kvpure);
- ``modelopt.py`` ``ModelOptNvFp4LinearMethod``: uint8 ``weight`` ``(out, in / 2)``,
  float8_e4m3fn ``weight_scale`` ``(out, in / 16)``, float32 ``input_scale`` and
  ``weight_scale_2``, one each per partition;
- ``mxfp4.py``: ``Mxfp4Config.get_quant_method`` gives every linear layer
  ``UnquantizedLinearMethod``; only the routed experts (``Mxfp4MoEMethod``) hold uint8
  values (two a byte) and a uint8 scale per 32.

The checkpoint's names and shapes differ from vLLM's in places (AWQ packs the output,
kvpure's listing the input); the element counts and dtypes, which are the bytes, do not.
"""

from __future__ import annotations

import json
from math import prod
from pathlib import Path

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.checkpoint_tensors import (
    MAX_EXPERT_LAYERS,
    QUANTIZATIONS,
    checkpoint_tensors,
)
from kvpure.models.config import HFConfig, parse_model_config

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples/llama3_8b.json"
SMALL = ROOT / "tests/data/model_configs/small"


def _config(path: Path, **extra: object) -> HFConfig:
    data = json.loads(path.read_text())
    data.pop("quantization_config", None)
    data.update(extra)
    return parse_model_config(data)


def _layer(prefix: str, quantization: str) -> dict[str, tuple[str, int]]:
    """``suffix -> (dtype, elements)`` of one linear layer of Llama-3-8B's layer 0."""
    out: dict[str, tuple[str, int]] = {}
    for t in checkpoint_tensors(_config(LLAMA), quantization=quantization):
        if t.name.startswith(prefix + "."):
            out[t.name.removeprefix(prefix + ".")] = (t.dtype, prod(t.shape))
    return out


def _vllm(quantization: str, out: int, inp: int) -> dict[str, tuple[str, int]]:
    if quantization == "fp8":
        return {"weight": ("F8_E4M3", out * inp), "weight_scale": ("F32", 1)}
    if quantization in ("awq", "gptq"):
        groups = inp // 128
        return {
            "qweight": ("I32", inp * out // 8),
            "qzeros": ("I32", groups * out // 8),
            "scales": ("F16", groups * out),
        }
    if quantization == "nvfp4":
        return {
            "weight": ("U8", out * inp // 2),
            "weight_scale": ("F8_E4M3", out * inp // 16),
            "weight_scale_2": ("F32", 1),
            "input_scale": ("F32", 1),
        }
    return {"weight": ("BF16", out * inp)}  # none, and mxfp4's unquantized linear layers


LINEARS = [
    ("self_attn.q_proj", 4096, 4096),
    ("self_attn.k_proj", 1024, 4096),
    ("self_attn.o_proj", 4096, 4096),
    ("mlp.gate_proj", 14336, 4096),
    ("mlp.down_proj", 4096, 14336),
]


@pytest.mark.parametrize("quantization", ["none", "fp8", "awq", "gptq", "nvfp4", "mxfp4"])
@pytest.mark.parametrize(("name", "out", "inp"), LINEARS)
def test_a_linear_layer_holds_what_vllm_creates(
    quantization: str, name: str, out: int, inp: int
) -> None:
    got = _layer(f"model.layers.0.{name}", quantization)
    assert got == _vllm(quantization, out, inp)


@pytest.mark.parametrize("quantization", ["fp8", "awq", "gptq", "nvfp4", "mxfp4"])
def test_embeddings_norms_and_head_stay_unquantized(quantization: str) -> None:
    tensors = checkpoint_tensors(_config(LLAMA), quantization=quantization)
    kept = {t.name: t.dtype for t in tensors if "_proj" not in t.name}
    assert kept["model.embed_tokens.weight"] == kept["lm_head.weight"] == "BF16"
    assert set(kept.values()) == {"BF16"}
    assert len(kept) == 3 + 2 * 32  # embeddings, final norm, head; two norms a layer


def test_mxfp4_leaves_shared_experts_and_dense_layers_unquantized() -> None:
    """Kimi-K2 (small): the first layer dense, then 8 routed experts and a shared one."""
    tensors = checkpoint_tensors(_config(SMALL / "kimi_k2_small.json"), quantization="mxfp4")
    routed = [t for t in tensors if ".mlp.experts." in t.name]
    assert len(routed) == 2 * 8 * 3 * 2  # 2 MoE layers, 8 experts, 3 projections, 2 each
    assert {t.dtype for t in routed} == {"U8"}
    rest = [t for t in tensors if ".mlp.experts." not in t.name]
    assert {t.dtype for t in rest} == {"BF16", "F32"}
    assert any(".mlp.shared_experts.down_proj.weight" in t.name for t in rest)
    assert {t.dtype for t in rest if t.dtype == "F32"} <= {"F32"}
    assert all(t.name.endswith("e_score_correction_bias") for t in rest if t.dtype == "F32")


@pytest.mark.parametrize("quantization", ["fp8", "awq", "gptq", "nvfp4"])
def test_the_other_formats_quantize_the_routed_and_shared_experts(quantization: str) -> None:
    tensors = checkpoint_tensors(_config(SMALL / "kimi_k2_small.json"), quantization=quantization)
    for part in (".mlp.experts.3.up_proj.", ".mlp.shared_experts.up_proj."):
        layer = {
            t.name.rsplit(".", 1)[1]: (t.dtype, prod(t.shape))
            for t in tensors
            if t.name.startswith("model.layers.1" + part)
        }
        inter = 2048  # moe_intermediate_size; one shared expert of the same width
        assert layer == _vllm(quantization, inter, 7168)


def test_a_float32_checkpoint_lists_float32_tensors() -> None:
    tensors = checkpoint_tensors(_config(LLAMA, torch_dtype="float32"))
    assert {t.dtype for t in tensors} == {"F32"}
    # transformers 4.56+ writes "dtype" in place of "torch_dtype"
    newer = json.loads(LLAMA.read_text())
    del newer["torch_dtype"]
    newer["dtype"] = "float32"
    assert {t.dtype for t in checkpoint_tensors(parse_model_config(newer))} == {"F32"}
    del newer["dtype"]  # neither: bfloat16
    assert {t.dtype for t in checkpoint_tensors(parse_model_config(newer))} == {"BF16"}
    assert {t.dtype for t in checkpoint_tensors(_config(LLAMA))} == {"BF16"}


def test_the_expert_bound_is_checked_before_listing() -> None:
    """2**16 routed-expert MLPs over all layers (``MAX_EXPERT_LAYERS``'s documented bound):
    one more is refused before anything is listed; at the bound, with the routed experts
    left out, the rest is listed (one router of 2**16 rows)."""
    assert MAX_EXPERT_LAYERS == 65536
    data = json.loads(LLAMA.read_text())
    data.update(num_hidden_layers=1, num_local_experts=65536)
    tensors = checkpoint_tensors(parse_model_config(data), routed_experts=False)
    assert any(t.shape == (65536, 4096) for t in tensors)
    data.update(num_hidden_layers=2, num_local_experts=32769)
    with pytest.raises(InvalidFieldError, match="num_experts"):
        checkpoint_tensors(parse_model_config(data), routed_experts=False)


def test_nemotron_h_moe_layers_are_refused_by_name() -> None:
    data = json.loads((SMALL / "nemotron_h_options.json").read_text())
    data["hybrid_override_pattern"] = "M-*E"
    with pytest.raises(InvalidFieldError, match="MoE layers have no weight layout"):
        checkpoint_tensors(parse_model_config(data))


def test_an_unknown_quantization_is_refused_by_name() -> None:
    with pytest.raises(InvalidFieldError, match="quantization"):
        checkpoint_tensors(_config(LLAMA), quantization="int3")
    for name in QUANTIZATIONS:
        assert checkpoint_tensors(_config(LLAMA), quantization=name)


def test_gemma3s_text_config_takes_transformers_defaults() -> None:
    """google/gemma-3-4b-it's text_config gives only its shape; vLLM reads the rest from
    transformers' ``Gemma3TextConfig`` defaults (the expected values here, read from the
    installed transformers), and kvpure lays the tensors out from those."""
    transformers = pytest.importorskip("transformers")
    data = json.loads((ROOT / "tests/data/model_configs/gemma3_4b_hf.json").read_text())
    del data["text_config"]["intermediate_size"], data["text_config"]["model_type"]
    reference = transformers.Gemma3Config(**data).text_config
    tensors = {t.name: t.shape for t in checkpoint_tensors(parse_model_config(data))}
    h = reference.hidden_size
    assert tensors["model.layers.0.mlp.up_proj.weight"] == (reference.intermediate_size, h)
    assert tensors["model.embed_tokens.weight"] == (reference.vocab_size, h)
    assert reference.model_type == "gemma3_text"  # per-head q/k norms, four norms a layer
    assert tensors["model.layers.0.self_attn.q_norm.weight"] == (reference.head_dim,)
    assert "model.layers.0.pre_feedforward_layernorm.weight" in tensors


def test_whisper_under_mxfp4_stays_unquantized() -> None:
    """Whisper has no routed experts, and Mxfp4Config leaves every linear layer
    unquantized: the same tensors as the bfloat16 checkpoint."""
    whisper = _config(SMALL / "whisper_defaults.json")
    assert checkpoint_tensors(whisper, quantization="mxfp4") == checkpoint_tensors(whisper)
    fp8 = {t.dtype for t in checkpoint_tensors(whisper, quantization="fp8")}
    assert fp8 == {"BF16", "F8_E4M3", "F32"}


@pytest.mark.parametrize(
    "key",
    [
        "hidden_size",
        "num_hidden_layers",
        "vocab_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
    ],
)
def test_a_shape_of_zero_is_refused_by_name_and_one_is_laid_out(key: str) -> None:
    one = {"num_attention_heads": 1, "num_key_value_heads": 1, "num_hidden_layers": 1}
    tensors = checkpoint_tensors(_config(LLAMA, **{**one, key: 1}))
    assert tensors[0].name == "model.embed_tokens.weight"
    with pytest.raises(InvalidFieldError, match=key):
        checkpoint_tensors(_config(LLAMA, **{**one, key: 0}))


@pytest.mark.parametrize("key", ["n_routed_experts", "num_local_experts", "num_experts"])
def test_a_negative_expert_count_is_refused_by_name(key: str) -> None:
    with pytest.raises(InvalidFieldError, match=key):
        checkpoint_tensors(_config(LLAMA, **{key: -1}))


def test_a_zero_sparse_step_is_refused_by_name() -> None:
    data = json.loads((SMALL / "qwen3_moe_sparse_step.json").read_text())
    data["decoder_sparse_step"] = 0
    with pytest.raises(InvalidFieldError, match="decoder_sparse_step"):
        checkpoint_tensors(parse_model_config(data))


@pytest.mark.parametrize("pattern", ["M-*X", "M-*", "M-*MM", None])
def test_a_bad_nemotron_h_pattern_is_refused_with_what_it_gave(pattern: str | None) -> None:
    """Of the right length with a letter outside M, *, -, E; too short; too long; absent."""
    data = json.loads((SMALL / "nemotron_h_options.json").read_text())
    data["hybrid_override_pattern"] = pattern
    with pytest.raises(InvalidFieldError, match="M, \\*, -, E") as error:
        checkpoint_tensors(parse_model_config(data))
    assert error.value.value == (pattern or "")


def test_jamba_leaves_its_routed_experts_out_when_asked() -> None:
    jamba = _config(SMALL / "jamba_options.json")
    assert any(".experts." in t.name for t in checkpoint_tensors(jamba))
    rest = checkpoint_tensors(jamba, routed_experts=False)
    assert not any(".experts." in t.name for t in rest)
    assert any(t.name.endswith(".feed_forward.gate.weight") for t in rest)  # the router


def test_jambas_layer_placement_defaults_are_transformers() -> None:
    """Without ``attn_layer_period``/``offset`` and ``expert_layer_period``/``offset``,
    vLLM's Jamba takes transformers' ``JambaConfig`` defaults: its ``layers_block_type``
    and ``layers_num_experts`` (read from the installed transformers) are the expected
    layers."""
    transformers = pytest.importorskip("transformers")
    data = json.loads((ROOT / "tests/data/model_configs/jamba_v0_1.json").read_text())
    for key in ("attn_layer_period", "attn_layer_offset"):
        del data[key]
    for key in ("expert_layer_period", "expert_layer_offset"):
        data.pop(key, None)
    data.update(num_hidden_layers=16, num_experts=4)
    reference = transformers.JambaConfig(**data)
    names = [t.name for t in checkpoint_tensors(parse_model_config(data))]
    for i, (kind, experts) in enumerate(
        zip(reference.layers_block_type, reference.layers_num_experts, strict=True)
    ):
        mixer = "self_attn" if kind == "attention" else "mamba"
        assert any(n.startswith(f"model.layers.{i}.{mixer}.") for n in names)
        routed = any(n.startswith(f"model.layers.{i}.feed_forward.experts.") for n in names)
        assert routed == (experts > 1)


def test_a_llama_checkpoint_has_hugging_faces_names() -> None:
    """The names of meta-llama/Meta-Llama-3-8B's model.safetensors.index.json."""
    names = [t.name for t in checkpoint_tensors(_config(LLAMA))]
    assert [n for n in names if ".layers." not in n] == [
        "model.embed_tokens.weight",
        "model.norm.weight",
        "lm_head.weight",
    ]
    assert sorted(n.removeprefix("model.layers.0.") for n in names if ".layers.0." in n) == [
        "input_layernorm.weight",
        "mlp.down_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "post_attention_layernorm.weight",
        "self_attn.k_proj.weight",
        "self_attn.o_proj.weight",
        "self_attn.q_proj.weight",
        "self_attn.v_proj.weight",
    ]


def test_a_qwen2_checkpoint_names_its_qkv_biases() -> None:
    """Qwen/Qwen2-7B's layer names: q/k/v carry biases. vLLM 0.26's qwen2.py builds
    ``qkv_proj`` with ``bias=True`` and its ``hf_to_vllm_mapper`` loads the checkpoint's
    ``.q_proj`` / ``.k_proj`` / ``.v_proj`` (weights and biases) into it as shards q, k, v."""
    config = _config(ROOT / "tests/data/model_configs/qwen2_7b.json")
    names = [t.name for t in checkpoint_tensors(config)]
    assert sorted(n.removeprefix("model.layers.0.") for n in names if ".layers.0." in n) == [
        "input_layernorm.weight",
        "mlp.down_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "post_attention_layernorm.weight",
        "self_attn.k_proj.bias",
        "self_attn.k_proj.weight",
        "self_attn.o_proj.weight",
        "self_attn.q_proj.bias",
        "self_attn.q_proj.weight",
        "self_attn.v_proj.bias",
        "self_attn.v_proj.weight",
    ]


_BOTH = ("input_layernorm", "post_attention_layernorm")
_FF = ("pre_feedforward_layernorm", "post_feedforward_layernorm")
NORMS = {
    "gemma2_2b.json": (*_BOTH, *_FF),
    "gemma3_1b.json": (*_BOTH, *_FF),
    "glm_4_9b_0414.json": (*_BOTH, "post_self_attn_layernorm", "post_mlp_layernorm"),
    "olmo2_7b.json": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "olmo3_7b.json": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "aya_23_8b.json": ("input_layernorm",),
    "command_r7b.json": ("input_layernorm",),
}
"""Each family's decoder-layer norms, as its Hugging Face checkpoints name them
(google/gemma-2-2b-it, gemma-3-1b-it; THUDM/GLM-4-9B-0414; allenai/OLMo-2-1124-7B,
Olmo-3-7B: norms after each block; CohereForAI/aya-23-8B, c4ai-command-r7b: one norm,
attention and MLP in parallel), which vLLM's model files load by name."""


@pytest.mark.parametrize("name", sorted(NORMS))
def test_the_norms_have_hugging_faces_names(name: str) -> None:
    config = _config(ROOT / "tests/data/model_configs" / name)
    norms = {
        t.name.removeprefix("model.layers.0.").removesuffix(".weight")
        for t in checkpoint_tensors(config)
        if t.name.startswith("model.layers.0.") and "layernorm" in t.name
    }
    assert norms == set(NORMS[name])


def test_a_bare_gemma3_config_has_gemma3s_four_norms() -> None:
    """model_type ``gemma3`` with no text_config (the text model at top level)."""
    data = json.loads((ROOT / "tests/data/model_configs/gemma3_1b.json").read_text())
    data["model_type"] = "gemma3"
    names = {t.name for t in checkpoint_tensors(parse_model_config(data))}
    assert {f"model.layers.0.{n}.weight" for n in (*_BOTH, *_FF)} <= names
    assert "model.layers.0.self_attn.q_norm.weight" in names  # per head (gemma3.py)


def test_deepseek_v3s_query_compression_default_is_transformers() -> None:
    """Without ``q_lora_rank`` vLLM reads transformers' ``DeepseekV3Config`` default
    (read from the installed transformers): the query goes through ``q_a_proj``."""
    transformers = pytest.importorskip("transformers")
    data = json.loads((ROOT / "examples/deepseek_v3.json").read_text())
    data.pop("quantization_config", None)
    del data["q_lora_rank"]
    data.update(num_hidden_layers=1, n_routed_experts=2)
    rank = transformers.DeepseekV3Config(**data).q_lora_rank
    shapes = {t.name: t.shape for t in checkpoint_tensors(parse_model_config(data))}
    assert shapes["model.layers.0.self_attn.q_a_proj.weight"] == (rank, data["hidden_size"])


def test_the_first_zero_shape_is_the_one_named() -> None:
    """Fields are read in config.json's order of meaning: the width before the depth and
    the vocabulary, so a config with several zeros names the width."""
    zeros = {"hidden_size": 0, "num_hidden_layers": 0, "vocab_size": 0}
    with pytest.raises(InvalidFieldError, match="hidden_size"):
        checkpoint_tensors(_config(LLAMA, **zeros))
    with pytest.raises(InvalidFieldError, match="num_hidden_layers"):
        checkpoint_tensors(_config(LLAMA, **{**zeros, "hidden_size": 4096}))


def test_a_one_expert_router_keeps_its_float32_bias() -> None:
    """deepseek_v2.py: with ``topk_method: noaux_tc`` the router's
    ``e_score_correction_bias`` is ``torch.empty(n_routed_experts, dtype=torch.float32)``,
    one routed expert included."""
    data = json.loads((SMALL / "kimi_k2_small.json").read_text())
    data["n_routed_experts"] = 1
    biases = [
        t for t in checkpoint_tensors(parse_model_config(data)) if "e_score_correction" in t.name
    ]
    assert [(t.dtype, t.shape) for t in biases] == [("F32", (1,))] * 2


@pytest.mark.parametrize(
    "key",
    [
        "d_model",
        "num_mel_bins",
        "encoder_ffn_dim",
        "decoder_ffn_dim",
        "encoder_layers",
        "decoder_layers",
        "max_source_positions",
        "max_target_positions",
        "vocab_size",
    ],
)
def test_a_whisper_shape_of_zero_is_refused_by_name_and_one_is_laid_out(key: str) -> None:
    whisper = SMALL / "whisper_defaults.json"
    assert checkpoint_tensors(_config(whisper, **{key: 1}))
    with pytest.raises(InvalidFieldError, match=key):
        checkpoint_tensors(_config(whisper, **{key: 0}))


def test_whispers_tensors_have_hugging_faces_names_and_vllms_shapes() -> None:
    """openai/whisper-large-v3's checkpoint names outside the layers; the position tables
    ``max_source_positions`` / ``max_target_positions`` rows (whisper.py), here 750 and
    224 so that neither default stands in."""
    whisper = _config(
        SMALL / "whisper_defaults.json", max_source_positions=750, max_target_positions=224
    )
    shapes = {t.name: t.shape for t in checkpoint_tensors(whisper) if ".layers." not in t.name}
    d = 1280
    assert shapes == {
        "model.encoder.conv1.weight": (d, 80, 3),
        "model.encoder.conv1.bias": (d,),
        "model.encoder.conv2.weight": (d, d, 3),
        "model.encoder.conv2.bias": (d,),
        "model.encoder.embed_positions.weight": (750, d),
        "model.encoder.layer_norm.weight": (d,),
        "model.encoder.layer_norm.bias": (d,),
        "model.decoder.embed_tokens.weight": (51866, d),
        "model.decoder.embed_positions.weight": (224, d),
        "model.decoder.layer_norm.weight": (d,),
        "model.decoder.layer_norm.bias": (d,),
    }


@pytest.mark.parametrize(
    ("key", "least"),
    [
        ("kv_lora_rank", 1),
        ("qk_rope_head_dim", 0),
        ("qk_nope_head_dim", 0),
        ("v_head_dim", 1),
        ("q_lora_rank", 1),
    ],
)
def test_an_mla_width_under_its_least_is_refused_by_name(key: str, least: int) -> None:
    """DeepSeek-V2's latent widths: the rope and nope parts of a head may be 0, the rest
    at least 1; one under is refused naming the key, the least is laid out."""
    deepseek = SMALL / "deepseek_v2_q_lora.json"
    assert checkpoint_tensors(_config(deepseek, **{key: least}))
    with pytest.raises(InvalidFieldError, match=key):
        checkpoint_tensors(_config(deepseek, **{key: least - 1}))


def test_a_zero_head_dim_is_refused_by_name() -> None:
    assert checkpoint_tensors(_config(LLAMA, head_dim=1))
    with pytest.raises(InvalidFieldError, match="head_dim"):
        checkpoint_tensors(_config(LLAMA, head_dim=0))
