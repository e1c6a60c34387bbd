"""Deployment rules applied to a layout: TP heads, dtypes, backends, PP splits, hybrid alignment.

Expected numbers are worked out by hand from vLLM's rules (quoted in each
test), or taken from the golden mamba_hybrid_4attn_28mamba case.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import AttentionBackend, Deployment
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs, pipeline_layer_ranges
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
)
from tests.conftest import GOLDEN_026

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GIB = 2**30


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def derive(config: dict[str, Any], **options: Any) -> DerivedSpecs:
    layout = model_layout(parse_model_config(config))
    # vLLM 0.26's rules, async scheduling off as the goldens' inputs (pinned; issue 21).
    pinned = {"vllm_version": "0.26", "async_scheduling": False, **options}
    return derive_kv_cache_specs(layout, Deployment(kv_cache_memory_bytes=GIB, **pinned))


def first_spec(derived: DerivedSpecs, worker: int = 0) -> Any:
    return derived.kv_cache_specs[worker].ordered_values()[0]


def mamba_spec(derived: DerivedSpecs, name: str = "model.layers.0.mixer") -> MambaSpec:
    spec = derived.kv_cache_specs[0][name]
    assert isinstance(spec, MambaSpec)
    return spec


@pytest.mark.parametrize(("tp", "heads"), [(1, 8), (2, 4), (4, 2), (8, 1), (16, 1), (32, 1)])
def test_tensor_parallel_divides_kv_heads_and_replicates_past_them(tp: int, heads: int) -> None:
    derived = derive(example("llama3_8b.json"), tensor_parallel_size=tp)
    specs = derived.kv_cache_specs[0].ordered_values()
    assert all(isinstance(s, FullAttentionSpec) and s.num_kv_heads == heads for s in specs)
    assert derived.num_workers == tp
    assert derived.settings.tensor_parallel_size == tp


def test_tensor_parallel_must_divide_the_heads() -> None:
    with pytest.raises(InvalidFieldError, match="attention heads") as info:
        derive(example("llama3_8b.json"), tensor_parallel_size=3)
    assert info.value.field == "tensor_parallel_size"
    # Qwen2-7B: 28 query heads, 4 KV heads; TP 7 divides 28 but not 4 (and 7 % 4 != 0).
    with pytest.raises(InvalidFieldError, match="KV heads"):
        derive(example("qwen2_7b.json"), tensor_parallel_size=7)


def test_mla_keeps_one_latent_head_under_tensor_parallelism() -> None:
    derived = derive(example("deepseek_v3.json"), tensor_parallel_size=8)
    spec = first_spec(derived)
    assert isinstance(spec, MLAAttentionSpec)
    assert (spec.num_kv_heads, spec.head_size, spec.block_size) == (1, 576, 64)
    assert spec.indexes_kv_by_block_stride is False
    # 64 tokens x 576 x 2 bytes.
    assert spec.page_size_bytes == 73728


@pytest.mark.parametrize("name", ["fp8", "fp8_e4m3"])
def test_fp8_is_e4m3_with_per_tensor_scales(name: str) -> None:
    spec = first_spec(derive(example("llama3_8b.json"), kv_cache_dtype=name))
    assert spec.dtype is KVDtype.FLOAT8_E4M3FN
    assert spec.kv_quant_mode is KVQuantMode.FP8_PER_TENSOR
    # 16 tokens x 8 heads x (128 + 128) x 1 byte.
    assert spec.page_size_bytes == 32768


def test_fp8_e5m2_and_mla_cache_dtype_string() -> None:
    spec = first_spec(derive(example("llama3_8b.json"), kv_cache_dtype="fp8_e5m2"))
    assert spec.dtype is KVDtype.FLOAT8_E5M2
    mla = first_spec(derive(example("deepseek_v3.json"), kv_cache_dtype="fp8"))
    assert mla.cache_dtype_str == "fp8"
    assert mla.dtype is KVDtype.FLOAT8_E4M3FN
    auto = first_spec(derive(example("deepseek_v3.json")))
    assert auto.cache_dtype_str is None


def test_float32_checkpoints_are_served_in_bfloat16_unless_asked() -> None:
    assert first_spec(derive(example("gemma2_9b.json"))).dtype is KVDtype.BFLOAT16
    assert first_spec(derive(example("gemma2_9b.json"), dtype="float32")).dtype is KVDtype.FLOAT32
    assert first_spec(derive(example("llama3_8b.json"), dtype="float16")).dtype is KVDtype.FLOAT16


def test_backends_set_indexes_kv_by_block_stride() -> None:
    for backend in (
        AttentionBackend.FLASH_ATTN,
        AttentionBackend.FLASHINFER,
        AttentionBackend.TRITON_ATTN,
    ):
        spec = first_spec(derive(example("llama3_8b.json"), attention_backend=backend))
        assert spec.indexes_kv_by_block_stride is True
    triton_mla = derive(example("deepseek_v3.json"), attention_backend=AttentionBackend.TRITON_MLA)
    assert first_spec(triton_mla).block_size == 16
    cutlass = derive(example("deepseek_v3.json"), attention_backend=AttentionBackend.CUTLASS_MLA)
    assert first_spec(cutlass).block_size == 128


def test_block_sizes_the_kernels_cannot_run_are_refused() -> None:
    with pytest.raises(InvalidFieldError, match="multiple of 16") as info:
        derive(example("llama3_8b.json"), block_size=8)
    assert info.value.field == "--block-size"
    with pytest.raises(InvalidFieldError, match="multiple of 64"):
        derive(example("deepseek_v3.json"), block_size=32)
    assert first_spec(derive(example("deepseek_v3.json"), block_size=128)).block_size == 128
    triton = derive(
        example("deepseek_v3.json"), block_size=8, attention_backend=AttentionBackend.TRITON_MLA
    )
    assert first_spec(triton).block_size == 8


def test_a_backend_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(InvalidFieldError, match="MLA backend"):
        derive(example("deepseek_v3.json"), attention_backend=AttentionBackend.FLASH_ATTN)
    with pytest.raises(InvalidFieldError, match="non-MLA backend"):
        derive(example("llama3_8b.json"), attention_backend=AttentionBackend.FLASHMLA)


def test_spec_classes_per_kind() -> None:
    mistral = derive(example("mistral_7b_v0_1.json"), max_model_len=8192)
    assert isinstance(first_spec(mistral), SlidingWindowSpec)
    assert first_spec(mistral).sliding_window == 4096
    scout = derive(example("llama4_scout.json"), max_model_len=65536)
    specs = scout.kv_cache_specs[0].ordered_values()
    assert isinstance(specs[0], ChunkedLocalAttentionSpec)
    assert specs[0].attention_chunk_size == 8192
    assert type(specs[3]) is FullAttentionSpec


def test_max_model_len_defaults_to_the_config_and_cannot_exceed_it() -> None:
    assert derive(example("llama3_8b.json")).settings.max_model_len == 8192
    with pytest.raises(InvalidFieldError, match="8192") as info:
        derive(example("llama3_8b.json"), max_model_len=8193)
    assert info.value.field == "--max-model-len"


def test_auto_fit_asks_the_planner_to_fit_from_the_config_length() -> None:
    settings = derive(example("qwen3_8b.json"), auto_fit_max_model_len=True).settings
    assert settings.auto_fit_max_model_len
    assert settings.original_max_model_len == -1
    assert settings.max_model_len == 40960


@pytest.mark.parametrize(
    ("num_layers", "pp", "expected"),
    [
        (32, 2, ((0, 16), (16, 32))),
        (61, 2, ((0, 31), (31, 61))),
        (61, 4, ((0, 15), (15, 30), (30, 46), (46, 61))),
        (10, 4, ((0, 2), (2, 5), (5, 8), (8, 10))),
        (5, 5, ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5))),
    ],
)
def test_pipeline_split_is_vllms(
    num_layers: int, pp: int, expected: tuple[tuple[int, int], ...]
) -> None:
    # vLLM: num_layers // pp each, the remainder one each to the stages from the
    # second-to-last backwards (61 on 4: 15, 15, 16, 15).
    assert pipeline_layer_ranges(num_layers, pp) == expected


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=1, max_value=16))
def test_pipeline_split_covers_every_layer_once(num_layers: int, pp: int) -> None:
    if pp > num_layers:
        with pytest.raises(InvalidFieldError):
            pipeline_layer_ranges(num_layers, pp)
        return
    ranges = pipeline_layer_ranges(num_layers, pp)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == num_layers
    assert all(a[1] == b[0] for a, b in pairwise(ranges))
    sizes = [end - start for start, end in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert sizes[-1] == num_layers // pp


def test_pipeline_workers_are_stage_major_with_tp_ranks_repeating() -> None:
    derived = derive(example("llama3_8b.json"), tensor_parallel_size=2, pipeline_parallel_size=2)
    assert derived.num_workers == 4
    assert derived.kv_cache_specs[0] == derived.kv_cache_specs[1]
    assert derived.kv_cache_specs[2] == derived.kv_cache_specs[3]
    assert derived.kv_cache_specs[0].names[-1] == "model.layers.15.self_attn.attn"
    assert derived.kv_cache_specs[2].names[0] == "model.layers.16.self_attn.attn"
    assert derived.available_memory == (GIB,) * 4


def hybrid_config() -> dict[str, Any]:
    return example("granite_4_0_h_small.json") | {
        "num_hidden_layers": 32,
        "mamba_n_groups": 8,
        "layer_types": ["attention" if i % 8 == 7 else "mamba" for i in range(32)],
    }


def test_hybrid_alignment_reproduces_the_goldens_numbers() -> None:
    case = json.loads((GOLDEN_026 / "mamba_hybrid_4attn_28mamba.json").read_text())
    mamba = case["input"]["kv_cache_specs"][0]["model.layers.0.mixer"]
    attention = case["input"]["kv_cache_specs"][0]["model.layers.7.self_attn.attn"]
    derived = derive(hybrid_config(), max_model_len=65536)
    # Mamba state (10240, 3) + (128, 64, 128) in bf16 = 2158592 B; one attention token
    # is 8 x 256 x 2 = 4096 B; 16 * cdiv(2158592, 16 * 4096) = 528 tokens per block.
    assert derived.mamba_state_bytes == 2158592
    assert derived.settings.block_size == 528 == attention["block_size"]
    assert derived.mamba_page_size_padded == 528 * 4096 == mamba["page_size_padded"]
    spec = mamba_spec(derived)
    assert spec.block_size == 65536 == mamba["block_size"]
    assert [list(s) for s in spec.shapes] == mamba["shapes"]
    assert derived.requested_block_size == 16
    assert derived.settings.enable_prefix_caching is False


def test_hybrid_alignment_with_a_larger_requested_block() -> None:
    # k = max(16, 64) = 64: 64 * cdiv(2158592, 64 * 4096) = 576.
    derived = derive(hybrid_config(), max_model_len=65536, block_size=64)
    assert derived.settings.block_size == 576
    assert derived.mamba_page_size_padded == 576 * 4096


def test_hybrid_alignment_in_mode_all_uses_the_mamba_chunk() -> None:
    # lcm(256, 16) = 256; cdiv(2158592, 4096) = 527 tokens -> 256 * cdiv(527, 256) = 768.
    derived = derive(hybrid_config(), max_model_len=65536, mamba_cache_mode="all")
    assert derived.settings.block_size == 768
    spec = mamba_spec(derived)
    assert spec.block_size == 768
    assert spec.mamba_cache_mode == "all"
    assert derived.settings.enable_prefix_caching is True


def test_mamba_state_shards_over_tensor_parallel() -> None:
    # Granite-4.0-H-Small: 1 group, replicated to 2 under TP 2:
    # conv (8192 + 2 * 2 * 128) / 2 = 4352 channels, SSM heads 128 / 2 = 64.
    derived = derive(example("granite_4_0_h_small.json"), tensor_parallel_size=2)
    spec = mamba_spec(derived)
    assert spec.shapes == ((4352, 3), (64, 64, 128))
    # TP 1: conv 8192 + 2 * 1 * 128 = 8448.
    single = derive(example("granite_4_0_h_small.json"))
    assert mamba_spec(single).shapes == ((8448, 3), (128, 64, 128))


def test_mamba_ssm_cache_dtype() -> None:
    derived = derive(example("granite_4_0_h_small.json"), mamba_ssm_cache_dtype="float32")
    spec = mamba_spec(derived)
    assert spec.dtypes == (KVDtype.BFLOAT16, KVDtype.FLOAT32)


@given(
    num_layers=st.integers(min_value=1, max_value=48),
    kv_heads=st.sampled_from([1, 2, 4, 8, 16]),
    group=st.sampled_from([1, 2, 4, 8]),
    head_dim=st.sampled_from([64, 80, 128, 256]),
    tp=st.sampled_from([1, 2, 4, 8]),
    block_size=st.sampled_from([16, 32, 64]),
)
def test_llama_like_pages_follow_vllms_formula(
    num_layers: int, kv_heads: int, group: int, head_dim: int, tp: int, block_size: int
) -> None:
    heads = kv_heads * group
    if heads % tp or (kv_heads >= tp and kv_heads % tp) or (kv_heads < tp and tp % kv_heads):
        return
    config = {
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": num_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": heads * head_dim,
        "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    }
    derived = derive(config, tensor_parallel_size=tp, block_size=block_size)
    specs = derived.kv_cache_specs[0].ordered_values()
    assert len(specs) == num_layers
    per_gpu = max(1, kv_heads // tp)
    for spec in specs:
        assert isinstance(spec, FullAttentionSpec)
        # K and V: block_size x heads x (head_dim + head_dim) x 2 bytes.
        assert spec.page_size_bytes == block_size * per_gpu * 2 * head_dim * 2
    assert derived.kv_cache_specs[0].names == tuple(
        f"model.layers.{i}.self_attn.attn" for i in range(num_layers)
    )


def test_longrope_default_length_and_the_longer_limit() -> None:
    data = example("llama3_8b.json") | {
        "architectures": ["Phi3ForCausalLM"],
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
    }
    assert derive(data).settings.max_model_len == 4096
    assert derive(data, max_model_len=131072).settings.max_model_len == 131072
