"""Spec formulas checked against hand-computed values and the reference's examples."""

from __future__ import annotations

import dataclasses

import pytest

from kvpure.errors import InvalidFieldError, SpecMergeError, WindowSizeMismatchError
from kvpure.settings import PlannerSettings
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpecKind,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
    get_kv_quant_mode,
    merge_specs,
)
from kvpure.specs.layer_map import LayerMap

BF16 = KVDtype.BFLOAT16


def full(**kw: object) -> FullAttentionSpec:
    args: dict[str, object] = {"block_size": 16, "num_kv_heads": 8, "head_size": 128, "dtype": BF16}
    args.update(kw)
    return FullAttentionSpec(**args)  # type: ignore[arg-type]  # test helper


def test_dtype_itemsizes_match_torch() -> None:
    assert KVDtype("bfloat16").itemsize == 2
    assert KVDtype("float32").itemsize == 4
    assert KVDtype("float8_e4m3fn").itemsize == 1
    assert KVDtype("int64").itemsize == 8
    assert KVDtype.from_name("torch.float16") is KVDtype.FLOAT16
    assert KVDtype.from_name("half") is KVDtype.FLOAT16
    with pytest.raises(InvalidFieldError) as info:
        KVDtype.from_name("float12")
    assert info.value.field == "dtype"


def test_kv_quant_mode_mapping() -> None:
    assert get_kv_quant_mode("int4_per_token_head") is KVQuantMode.INT4_PER_TOKEN_HEAD
    assert get_kv_quant_mode("int8_per_token_head") is KVQuantMode.INT8_PER_TOKEN_HEAD
    assert get_kv_quant_mode("fp8_per_token_head") is KVQuantMode.FP8_PER_TOKEN_HEAD
    assert get_kv_quant_mode("nvfp4") is KVQuantMode.NVFP4
    assert get_kv_quant_mode("fp8_ds_mla") is KVQuantMode.FP8_PER_TENSOR
    assert get_kv_quant_mode("fp8_e5m2") is KVQuantMode.FP8_PER_TENSOR
    assert get_kv_quant_mode("auto") is KVQuantMode.NONE
    assert KVQuantMode.INT4_PER_TOKEN_HEAD.is_per_token_head
    assert not KVQuantMode.NVFP4.is_per_token_head
    assert KVQuantMode.NVFP4.is_nvfp4


def test_full_attention_page_sizes() -> None:
    # Llama-3-8B: 8 KV heads x 128, bf16, 16 tokens: 16*8*(128+128)*2 bytes.
    assert full().page_size_bytes == 65536
    assert full(head_size_v=64).page_size_bytes == 16 * 8 * (128 + 64) * 2
    # INT4: half the head per byte; per-token-head fp32 scales for K and V.
    int4 = full(dtype=KVDtype.UINT8, kv_quant_mode=KVQuantMode.INT4_PER_TOKEN_HEAD)
    assert int4.real_page_size_bytes == 16 * 8 * (64 + 64) * 1
    assert int4.unpadded_page_size_bytes == 16 * 8 * 128 + 2 * 16 * 8 * 4
    # NVFP4: head//2 data + head//16 scales per side.
    nv = full(dtype=KVDtype.UINT8, kv_quant_mode=KVQuantMode.NVFP4)
    assert nv.page_size_bytes == 16 * 8 * 2 * (64 + 8)
    assert full(page_size_padded=70000).page_size_bytes == 70000


def test_mla_page_sizes_and_alignment() -> None:
    mla = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=BF16)
    assert mla.page_size_bytes == 73728
    assert mla.head_size_v == 576
    v32 = MLAAttentionSpec(
        block_size=64,
        num_kv_heads=1,
        head_size=576,
        dtype=KVDtype.UINT8,
        cache_dtype_str="fp8_ds_mla",
    )
    assert v32.page_size_bytes == 64 * 656
    v4 = MLAAttentionSpec(
        block_size=256,
        num_kv_heads=1,
        head_size=512,
        dtype=KVDtype.UINT8,
        cache_dtype_str="fp8_ds_mla",
        model_version="deepseek_v4",
        compress_ratio=4,
        alignment=576,
    )
    assert v4.storage_block_size == 64
    assert v4.real_page_size_bytes == 64 * 584
    assert v4.page_size_bytes == -(-64 * 584 // 576) * 576
    assert v4.page_size_padded == v4.page_size_bytes


def test_sliding_window_mla_keeps_head_size_v_none() -> None:
    swa = SlidingWindowMLASpec(
        block_size=64, num_kv_heads=1, head_size=512, dtype=BF16, sliding_window=128
    )
    assert swa.head_size_v is None
    assert swa.page_size_bytes == 64 * 512 * 2
    with pytest.raises(InvalidFieldError) as info:
        SlidingWindowMLASpec(
            block_size=64,
            num_kv_heads=1,
            head_size=512,
            dtype=BF16,
            sliding_window=1,
            model_version="x",
        )
    assert info.value.field == "model_version"


def test_max_memory_usage() -> None:
    s = PlannerSettings(max_model_len=16384, max_num_batched_tokens=1024, vllm_version="0.26")
    # Reference example: window 1024, T = 1024, L = 16384, bs 16 -> 129 blocks.
    sw = SlidingWindowSpec(
        block_size=16, num_kv_heads=8, head_size=128, dtype=BF16, sliding_window=1024
    )
    assert sw.max_memory_usage_bytes(s) == 129 * sw.page_size_bytes
    # Window 128, T = 8192, L = 131072 -> 521 blocks.
    s2 = PlannerSettings(max_model_len=131072, max_num_batched_tokens=8192, vllm_version="0.26")
    sw2 = dataclasses.replace(sw, sliding_window=128)
    assert sw2.max_memory_usage_bytes(s2) == 521 * sw.page_size_bytes
    assert full().max_memory_usage_bytes(s) == 1024 * 65536
    dcp = PlannerSettings(max_model_len=16384, decode_context_parallel_size=4, vllm_version="0.26")
    assert full().max_memory_usage_bytes(dcp) == 256 * 65536
    chunk = ChunkedLocalAttentionSpec(
        block_size=16, num_kv_heads=8, head_size=128, dtype=BF16, attention_chunk_size=8192
    )
    assert chunk.max_memory_usage_bytes(s) == (8192 + 1024) // 16 * 65536
    # Whisper: 1500 encoder tokens -> 94 blocks.
    cross = CrossAttentionSpec(block_size=16, num_kv_heads=8, head_size=64, dtype=BF16)
    whisper = PlannerSettings(max_num_encoder_input_tokens=1500, vllm_version="0.26")
    assert cross.max_memory_usage_bytes(whisper) == 94 * cross.page_size_bytes
    enc = EncoderOnlyAttentionSpec(block_size=16, num_kv_heads=8, head_size=64, dtype=BF16)
    assert enc.max_memory_usage_bytes(s) == 0


def test_mamba_memory_modes() -> None:
    m = MambaSpec(
        block_size=65536,
        shapes=((10240, 3), (128, 64, 128)),
        dtypes=(BF16, BF16),
        num_speculative_blocks=2,
    )
    assert m.page_size_bytes == 2158592
    none = PlannerSettings(max_model_len=65536, vllm_version="0.26")
    align = PlannerSettings(max_model_len=65536, mamba_cache_mode="align", vllm_version="0.26")
    every = PlannerSettings(max_model_len=131072, mamba_cache_mode="all", vllm_version="0.26")
    assert m.max_memory_usage_bytes(none) == 3 * 2158592
    assert m.max_memory_usage_bytes(align) == 4 * 2158592
    assert m.max_memory_usage_bytes(every) == (2 + 2) * 2158592
    assert m.max_num_blocks_per_req(align, 131072) == 2 + 2
    assert m.max_num_blocks_per_req(none, 131072) == 3


def test_full_merge_rules() -> None:
    merged = merge_specs([full(), full(sliding_window=1)])
    assert isinstance(merged, FullAttentionSpec)
    assert merged.sliding_window == 1
    with pytest.raises(WindowSizeMismatchError):
        merge_specs([full(sliding_window=1), full(sliding_window=2)])
    with pytest.raises(SpecMergeError):
        merge_specs([full(), full(num_kv_heads=4)])
    with pytest.raises(SpecMergeError):
        merge_specs([full(sliding_window=1), full(attention_chunk_size=2)])
    assert merge_specs([full(), full(non_causal=True)]) == full(non_causal=True)
    sink = SinkFullAttentionSpec(
        block_size=16, num_kv_heads=8, head_size=128, dtype=BF16, sink_len=4
    )
    merged_sink = merge_specs([sink, sink])
    assert isinstance(merged_sink, SinkFullAttentionSpec)
    assert merged_sink.sink_len == 4


def test_validation_names_field() -> None:
    with pytest.raises(InvalidFieldError) as info:
        full(head_size=0)
    assert info.value.field == "head_size"
    with pytest.raises(InvalidFieldError) as info:
        full(block_size=-16)
    assert info.value.field == "block_size"
    with pytest.raises(InvalidFieldError) as info:
        full(page_size_padded=100)
    assert info.value.field == "page_size_padded"


def test_specs_hash_and_compare_by_value() -> None:
    assert full() == full()
    assert hash(full()) == hash(full())
    assert full() != full(indexes_kv_by_block_stride=True)
    assert len({full(), full(), full(head_size=64)}) == 2


def test_kinds_and_windows() -> None:
    sw = SlidingWindowSpec(
        block_size=16, num_kv_heads=8, head_size=128, dtype=BF16, sliding_window=7
    )
    hidden = HiddenStateCacheSpec(block_size=16, num_kv_heads=1, head_size=64, dtype=BF16)
    assert get_kv_cache_spec_kind(full()) is KVCacheSpecKind.FULL_ATTENTION
    assert get_kv_cache_spec_kind(hidden) is KVCacheSpecKind.MLA_ATTENTION
    assert get_kv_cache_spec_kind(sw) is KVCacheSpecKind.SLIDING_WINDOW
    assert get_kv_cache_spec_sliding_window(sw) == 7
    assert get_kv_cache_spec_sliding_window(full()) is None
    uni = UniformTypeKVCacheSpecs(
        block_size=16,
        kv_cache_specs=LayerMap.from_pairs([("a", full()), ("b", full(head_size=64))]),
    )
    assert uni.page_size_bytes == 65536 + 32768
    assert get_kv_cache_spec_kind(uni) is KVCacheSpecKind.FULL_ATTENTION
    assert uni.get_num_layer_tuples() == 1
