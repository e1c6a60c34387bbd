"""Merge rules of the MLA and other specialised specs, as vLLM 0.26.0 writes them."""

from __future__ import annotations

import pytest

from kvpure.errors import SpecMergeError
from kvpure.specs import (
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVDtype,
    KVQuantMode,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowMLASpec,
    TQFullAttentionSpec,
    merge_specs,
)

U8 = KVDtype.UINT8


def v4(**kw: object) -> MLAAttentionSpec:
    args: dict[str, object] = {
        "block_size": 256,
        "num_kv_heads": 1,
        "head_size": 512,
        "dtype": U8,
        "kv_quant_mode": KVQuantMode.FP8_PER_TENSOR,
        "cache_dtype_str": "fp8_ds_mla",
        "model_version": "deepseek_v4",
        "compress_ratio": 4,
        "alignment": 576,
    }
    args.update(kw)
    return MLAAttentionSpec(**args)  # type: ignore[arg-type]  # test helper


def test_mla_merge_keeps_padding_but_not_alignment() -> None:
    spec = v4()
    assert spec.page_size_bytes == 37440  # 64 stored tokens x 584 B, rounded up to 576 B
    merged = merge_specs([spec, spec])
    assert isinstance(merged, MLAAttentionSpec)
    assert merged.alignment is None
    assert merged.page_size_padded == 37440
    assert merged.page_size_bytes == spec.page_size_bytes


def test_mla_merge_requires_one_compress_ratio_and_mla_only() -> None:
    with pytest.raises(SpecMergeError):
        merge_specs([v4(), v4(compress_ratio=128)])
    full = FullAttentionSpec(block_size=256, num_kv_heads=1, head_size=512, dtype=U8)
    with pytest.raises(SpecMergeError):
        merge_specs([v4(), full])
    with pytest.raises(SpecMergeError):
        merge_specs([full, v4()])


def test_hidden_state_merges_as_mla_of_its_own_class() -> None:
    hidden = HiddenStateCacheSpec(
        block_size=16, num_kv_heads=1, head_size=4096, dtype=KVDtype.BFLOAT16
    )
    merged = merge_specs([hidden, hidden])
    assert type(merged) is HiddenStateCacheSpec
    assert merged == hidden


def test_sliding_window_mla_merge_drops_quant_mode() -> None:
    swa = SlidingWindowMLASpec(
        block_size=64,
        num_kv_heads=1,
        head_size=512,
        dtype=U8,
        sliding_window=128,
        kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
        cache_dtype_str="fp8_ds_mla",
        model_version="deepseek_v4",
        alignment=576,
    )
    merged = merge_specs([swa, swa])
    assert isinstance(merged, SlidingWindowMLASpec)
    assert merged.kv_quant_mode is KVQuantMode.NONE
    assert merged.alignment is None
    assert merged.page_size_bytes == swa.page_size_bytes == 37440
    other = SlidingWindowMLASpec(
        block_size=64, num_kv_heads=1, head_size=512, dtype=U8, sliding_window=64,
        cache_dtype_str="fp8_ds_mla", model_version="deepseek_v4",
    )  # fmt: skip
    with pytest.raises(SpecMergeError):
        merge_specs([swa, other])


def test_tq_and_rswa_merges() -> None:
    tq = TQFullAttentionSpec(
        block_size=16, num_kv_heads=2, head_size=128, dtype=U8, tq_slot_size=72
    )
    assert tq.page_size_bytes == 16 * 2 * 72
    assert merge_specs([tq, tq]) == tq
    with pytest.raises(SpecMergeError):
        merge_specs(
            [tq, TQFullAttentionSpec(block_size=16, num_kv_heads=2, head_size=128, dtype=U8)]
        )
    rswa = RSWASpec(block_size=16, num_kv_heads=2, head_size=64, dtype=U8, rswa_window=64)
    assert merge_specs([rswa, rswa]) == rswa
    with pytest.raises(SpecMergeError):
        merge_specs(
            [rswa, RSWASpec(block_size=16, num_kv_heads=2, head_size=64, dtype=U8, rswa_window=8)]
        )
