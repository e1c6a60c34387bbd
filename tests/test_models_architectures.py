"""Every architecture's derived specs against what vLLM 0.26 builds for a real config.json.

The configs are in tests/data/model_configs (sources in its README). The
expected numbers are worked out from vLLM 0.26's model code, named per case
(``vllm/model_executor/models/<file>.py``, the attention / mixer class that
builds the layer), never from kvpure. Recurrent-state shapes and dtypes are
checked against ``vllm_state_shapes.json``, which vLLM's own
``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``
wrote (tools/model_configs/vllm_state_shapes.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kvpure.models.architectures import FAMILY_RULES, SUPPORTED_ARCHITECTURES, model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.specs import (
    CrossAttentionSpec,
    FullAttentionSpec,
    KVDtype,
    MLAAttentionSpec,
    SlidingWindowSpec,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "model_configs"
EXAMPLES = ROOT / "examples"
GIB = 2**30


def load(name: str) -> dict[str, Any]:
    path = CONFIGS / name if (CONFIGS / name).exists() else EXAMPLES / name
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def derive(name: str, **options: Any) -> DerivedSpecs:
    layout = model_layout(parse_model_config(load(name)))
    # vLLM 0.26's rules, async scheduling off as the goldens' inputs (pinned; issue 21).
    pinned = {"vllm_version": "0.26", "async_scheduling": False, **options}
    return derive_kv_cache_specs(layout, Deployment(kv_cache_memory_bytes=64 * GIB, **pinned))


@dataclass(frozen=True)
class Attn:
    """Expected attention layers: ``layers`` (indices) with KV heads, head size, window."""

    file: str
    arch: str
    layers: tuple[int, ...]
    kv_heads: int
    head_size: int
    name: str = "model.layers.{i}.self_attn.attn"
    sliding: frozenset[int] = field(default_factory=frozenset)
    window: int | None = None
    why: str = ""


def _r(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def _every(n: int, step: int) -> tuple[int, ...]:
    """Layers ``step - 1, 2 * step - 1, ...`` below ``n``."""
    return tuple(i for i in range(n) if (i + 1) % step == 0)


WRAPPED = "language_model.model.layers.{i}.self_attn.attn"

ATTENTION_CASES = [
    # llama.py LlamaAttention: head_dim = config.head_dim or hidden // heads; the
    # window is per-layer from layer_types, else the cache config's (the config's
    # sliding_window for a model that is not interleaved).
    Attn("llama2_7b.json", "LlamaForCausalLM", _r(32), 32, 128, why="4096 / 32"),
    Attn("llama3_1_8b.json", "LlamaForCausalLM", _r(32), 8, 128),
    Attn("llama3_2_1b.json", "LlamaForCausalLM", _r(16), 8, 64, why="head_dim 64"),
    Attn("mistral_7b_v0_3.json", "MistralForCausalLM", _r(32), 8, 128, why="window null"),
    Attn("mixtral_8x7b.json", "MixtralForCausalLM", _r(32), 8, 128),
    Attn("internlm_7b.json", "InternLMForCausalLM", _r(32), 32, 128, why="no KV heads: MHA"),
    Attn("internlm3_8b.json", "InternLM3ForCausalLM", _r(48), 2, 128),
    Attn("gemma_2b.json", "GemmaForCausalLM", _r(18), 1, 256),
    # phi3.py (Llama's attention): sliding_window 262144 reaches every layer.
    Attn(
        "phi_3_5_mini.json",
        "Phi3ForCausalLM",
        _r(32),
        32,
        96,
        sliding=frozenset(_r(32)),
        window=262144,
    ),
    Attn(
        "phi_4_mini.json",
        "Phi3ForCausalLM",
        _r(32),
        8,
        128,
        sliding=frozenset(_r(32)),
        window=262144,
    ),
    # mistral3.py: the text tower (a Mistral) under language_model.
    Attn("ministral_3_3b.json", "Mistral3ForConditionalGeneration", _r(26), 8, 128, name=WRAPPED),
    # qwen2.py / qwen3.py: no window unless use_sliding_window (transformers drops it).
    Attn("qwen2_7b.json", "Qwen2ForCausalLM", _r(28), 4, 128, why="3584 / 28"),
    Attn("qwen1_5_moe_a2_7b.json", "Qwen2MoeForCausalLM", _r(24), 16, 128),
    Attn("qwen3_0_6b.json", "Qwen3ForCausalLM", _r(28), 8, 128),
    Attn("qwen3_30b_a3b.json", "Qwen3MoeForCausalLM", _r(48), 4, 128),
    # qwen2_vl.py / qwen2_5_vl.py / qwen3_vl.py / qwen3_vl_moe.py: the Qwen text
    # model under language_model (hf_text_config: text_config, else the top level).
    Attn("qwen2_vl_7b.json", "Qwen2VLForConditionalGeneration", _r(28), 4, 128, name=WRAPPED),
    Attn("qwen2_5_vl_7b.json", "Qwen2_5_VLForConditionalGeneration", _r(28), 4, 128, name=WRAPPED),
    Attn("qwen3_vl_8b.json", "Qwen3VLForConditionalGeneration", _r(36), 8, 128, name=WRAPPED),
    Attn(
        "qwen3_vl_30b_a3b.json", "Qwen3VLMoeForConditionalGeneration", _r(48), 4, 128, name=WRAPPED
    ),
    # glm4.py / glm4_moe.py: head_dim 128 (GLM-4.5-Air: 96 query heads of 128).
    Attn("glm_4_9b_0414.json", "Glm4ForCausalLM", _r(40), 2, 128),
    Attn("glm_4_5_air.json", "Glm4MoeForCausalLM", _r(46), 8, 128),
    # granite.py: head_dim else hidden // heads; granitemoe.py: hidden // heads.
    Attn("granite_3_3_8b.json", "GraniteForCausalLM", _r(40), 8, 128),
    Attn("granite_3_1_3b_a800m.json", "GraniteMoeForCausalLM", _r(32), 8, 64, why="1536 / 24"),
    # minimax_m2.py MiniMaxM2Attention: head_dim 128; attn_window_size is not passed.
    Attn("minimax_m2.json", "MiniMaxM2ForCausalLM", _r(62), 8, 128),
    # commandr.py CohereAttention: hidden // heads; v1 has no window; v2 slides on
    # layer_types, which Cohere2Config fills from sliding_window_pattern 4.
    Attn("aya_23_8b.json", "CohereForCausalLM", _r(32), 8, 128),
    Attn(
        "command_r7b.json",
        "Cohere2ForCausalLM",
        _r(32),
        8,
        128,
        sliding=frozenset(set(_r(32)) - set(_every(32, 4))),
        window=4096,
    ),
    # olmo3.py Olmo3Attention: hidden // heads, windows from layer_types.
    Attn(
        "olmo3_7b.json",
        "Olmo3ForCausalLM",
        _r(32),
        32,
        128,
        sliding=frozenset(set(_r(32)) - set(_every(32, 4))),
        window=4096,
    ),
    # Olmo2 runs on transformers/base.py: attention instances named "{i}.attn".
    Attn("olmo2_7b.json", "Olmo2ForCausalLM", _r(32), 32, 128, name="{i}.attn"),
    # internlm2.py: model.layers.{i}.attention.attn, hidden // heads.
    Attn(
        "internlm2_5_7b.json",
        "InternLM2ForCausalLM",
        _r(32),
        8,
        128,
        name="model.layers.{i}.attention.attn",
    ),
    # gemma2.py: even layers slide (layer_types as transformers fills them).
    Attn(
        "gemma2_2b.json",
        "Gemma2ForCausalLM",
        _r(26),
        4,
        256,
        sliding=frozenset(range(0, 26, 2)),
        window=4096,
    ),
    # gemma3.py: pattern 6 -> layers 5, 11, 17, 23 global.
    Attn(
        "gemma3_1b.json",
        "Gemma3ForCausalLM",
        _r(26),
        1,
        256,
        sliding=frozenset(set(_r(26)) - set(_every(26, 6))),
        window=512,
    ),
    # gemma3_mm.py with a text_config that gives only its shape: Gemma3TextConfig
    # defaults 8 heads, 4 KV heads, head_dim 256; window 1024 given.
    Attn(
        "gemma3_4b_hf.json",
        "Gemma3ForConditionalGeneration",
        _r(34),
        4,
        256,
        name=WRAPPED,
        sliding=frozenset(set(_r(34)) - set(_every(34, 6))),
        window=1024,
    ),
    # gemma3n.py Gemma3nAttention: layers 20..34 (num_kv_shared_layers 15) share the
    # KV cache of layers 18 / 19 and get no spec (gpu_model_runner skips them).
    Attn(
        "gemma3n_e4b.json",
        "Gemma3nForConditionalGeneration",
        _r(20),
        2,
        256,
        name=WRAPPED,
        sliding=frozenset(set(_r(20)) - set(_every(20, 5))),
        window=512,
    ),
]


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=[c.file for c in ATTENTION_CASES])
def test_attention_layers_match_vllm(case: Attn) -> None:
    derived = derive(case.file, max_model_len=2048)
    assert derived.layout.architecture == case.arch
    specs = derived.kv_cache_specs[0]
    assert list(specs.keys()) == [case.name.format(i=i) for i in case.layers]
    for i, spec in zip(case.layers, specs.ordered_values(), strict=True):
        assert isinstance(spec, FullAttentionSpec | SlidingWindowSpec)
        assert (spec.num_kv_heads, spec.head_size) == (case.kv_heads, case.head_size)
        if i in case.sliding:
            assert isinstance(spec, SlidingWindowSpec)
            assert spec.sliding_window == case.window
        else:
            assert type(spec) is FullAttentionSpec


MLA_CASES = [
    # deepseek_v2.py DeepseekV2MLAAttention -> MLAAttention: one latent of
    # kv_lora_rank 512 + qk_rope_head_dim 64.
    ("deepseek_v2_lite.json", "DeepseekV2ForCausalLM", 27),
    ("kimi_k2_instruct.json", "DeepseekV3ForCausalLM", 61),
]


@pytest.mark.parametrize(("file", "arch", "layers"), MLA_CASES)
def test_mla_models_match_vllm(file: str, arch: str, layers: int) -> None:
    derived = derive(file, tensor_parallel_size=8, max_model_len=2048)
    assert derived.layout.architecture == arch
    specs = derived.kv_cache_specs[0].ordered_values()
    assert len(specs) == layers
    assert all(
        isinstance(s, MLAAttentionSpec) and (s.num_kv_heads, s.head_size) == (1, 576) for s in specs
    )


def test_deepseek_v3_2_adds_the_indexer_key_cache() -> None:
    # deepseek_v2.py Indexer: k_cache = DeepseekV32IndexerCache(head_dim=128 + 128 // 128 * 4,
    # dtype=uint8) at model.layers.{i}.self_attn.indexer.k_cache; index_topk_freq 1
    # -> every layer runs the indexer. MLA as DeepSeek-V3 (576).
    derived = derive("deepseek_v3_2_exp.json", tensor_parallel_size=8, max_model_len=2048)
    specs = derived.kv_cache_specs[0]
    names = list(specs.keys())
    assert len(names) == 122
    assert names[:2] == [
        "model.layers.0.self_attn.attn",
        "model.layers.0.self_attn.indexer.k_cache",
    ]
    mla = specs["model.layers.5.self_attn.attn"]
    indexer = specs["model.layers.5.self_attn.indexer.k_cache"]
    assert isinstance(mla, MLAAttentionSpec)
    assert mla.head_size == 576
    assert mla.dtype is KVDtype.BFLOAT16
    assert isinstance(indexer, MLAAttentionSpec)
    assert (indexer.num_kv_heads, indexer.head_size, indexer.dtype) == (1, 132, KVDtype.UINT8)
    assert indexer.block_size == mla.block_size == 64
    assert indexer.page_size_bytes == 64 * 132
    # The indexer keeps its uint8 layout under an fp8 KV cache.
    fp8 = derive("deepseek_v3_2_exp.json", kv_cache_dtype="fp8", max_model_len=2048)
    fp8_indexer = fp8.kv_cache_specs[0]["model.layers.0.self_attn.indexer.k_cache"]
    assert isinstance(fp8_indexer, MLAAttentionSpec)
    assert fp8_indexer.dtype is KVDtype.UINT8


def test_indexer_skips_follow_index_topk_freq() -> None:
    # deepseek_v2.py: skip when max(i - offset + 1, 0) % freq != 0 (offset 2 by default).
    config = load("deepseek_v3_2_exp.json")
    config["index_topk_freq"] = 4
    layout = model_layout(parse_model_config(config))
    indexed = [layer.index for layer in layout.layers if layer.name.endswith("k_cache")]
    assert indexed == [i for i in range(61) if max(i - 1, 0) % 4 == 0]
    config["index_topk_pattern"] = "FS" * 30 + "F"
    layout = model_layout(parse_model_config(config))
    indexed = [layer.index for layer in layout.layers if layer.name.endswith("k_cache")]
    assert indexed == list(range(0, 61, 2))


def _is_model_config(path: Path) -> bool:
    """A config.json among the examples (they also hold requests and workloads)."""
    data = json.loads(path.read_text())
    return isinstance(data, dict) and "architectures" in data


def _every_config() -> list[str]:
    names = sorted(p.name for p in CONFIGS.glob("*.json") if not p.name.startswith("vllm_"))
    return names + sorted(p.name for p in EXAMPLES.glob("*.json") if _is_model_config(p))


@pytest.mark.parametrize("file", _every_config())
def test_every_bundled_config_plans(file: str) -> None:
    limit = model_layout(parse_model_config(load(file))).derived_max_model_len
    derived = derive(file, max_model_len=min(2048, limit))
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, derived.available_memory)
    assert plan.num_blocks > 0


def _checked_on() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for file in _every_config():
        config = load(file)
        found.setdefault(config["architectures"][0], []).append(file)
    return found


NO_PUBLIC_CONFIG = {
    # No text-only Llama-4 checkpoint is published; the rule is the multimodal one's.
    "Llama4ForCausalLM": "Llama4ForConditionalGeneration",
}


def test_every_supported_architecture_is_checked_on_a_bundled_config() -> None:
    found = _checked_on()
    for arch in SUPPORTED_ARCHITECTURES:
        relative = NO_PUBLIC_CONFIG.get(arch)
        if relative is not None:
            assert FAMILY_RULES[arch].removesuffix("-mm") == FAMILY_RULES[relative].removesuffix(
                "-mm"
            )
            continue
        assert arch in found, arch
    assert len(SUPPORTED_ARCHITECTURES) >= 40


def test_whisper_caches_decoder_self_and_cross_attention() -> None:
    # whisper.py: WhisperDecoderLayer.self_attn (Attention, DECODER) and
    # .encoder_attn (CrossAttention -> CrossAttentionSpec); heads 20 of 1280 / 20 = 64;
    # the encoder (WhisperEncoderAttention) keeps no cache. Names: the model is
    # built with prefix "", WhisperModel adds ".decoder", make_layers ".layers.{i}"
    # and WhisperDecoder's lambda ".layers".
    derived = derive("whisper_large_v3.json")
    specs = derived.kv_cache_specs[0]
    names = list(specs.keys())
    assert len(names) == 64
    assert names[:2] == [
        ".decoder.layers.0.layers.self_attn.attn",
        ".decoder.layers.0.layers.encoder_attn.attn",
    ]
    self_attn, cross = specs[names[0]], specs[names[1]]
    assert type(self_attn) is FullAttentionSpec
    assert isinstance(cross, CrossAttentionSpec)
    assert (self_attn.num_kv_heads, self_attn.head_size, self_attn.dtype) == (
        20,
        64,
        KVDtype.FLOAT16,
    )
    assert (cross.num_kv_heads, cross.head_size) == (20, 64)
    # ModelArchConfigConvertor.derive_max_model_len_and_key reads max_target_positions.
    assert derived.settings.max_model_len == 448
    # ModelConfig.is_prefix_caching_supported: encoder-decoder models do not.
    assert derived.settings.enable_prefix_caching is False
    # SchedulerConfig.__post_init__: max_num_encoder_input_tokens = max_num_batched_tokens.
    assert derived.settings.max_num_encoder_input_tokens == derived.settings.max_num_batched_tokens
    tp4 = derive("whisper_large_v3.json", tensor_parallel_size=4)
    tp4_cross = tp4.kv_cache_specs[0][names[1]]
    assert isinstance(tp4_cross, CrossAttentionSpec)
    assert tp4_cross.num_kv_heads == 5


def test_model_max_length_wins_over_the_other_length_keys() -> None:
    # derive_max_model_len_and_key: the smallest key, except that a set
    # model_max_length (Command-R) replaces it.
    config = {**load("aya_23_8b.json"), "model_max_length": 131072}
    layout = model_layout(parse_model_config(config))
    assert layout.derived_max_model_len == 131072
    config = {**load("aya_23_8b.json"), "max_target_positions": 1024}
    assert model_layout(parse_model_config(config)).derived_max_model_len == 1024
