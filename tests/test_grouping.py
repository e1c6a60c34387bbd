"""Grouping rules checked on small layouts whose answers follow from vLLM's rules by hand."""

from __future__ import annotations

import pytest
from pyrsistent import PMap, pmap

from kvpure.errors import (
    HybridUnificationError,
    PageSizeUnificationError,
    PrefixMatchUnitError,
    UnregisteredSpecError,
    WindowSizeMismatchError,
    WorkerSpecMismatchError,
)
from kvpure.planning.grouping import (
    get_kv_cache_groups,
    unify_hybrid_kv_cache_specs,
    unify_kv_cache_spec_page_size,
)
from kvpure.planning.grouping_dsv4 import approximate_gcd
from kvpure.planning.memory import resolve_kv_cache_block_sizes
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.settings import PlannerSettings
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    KVDtype,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec
from kvpure.specs.layer_map import LayerMap

F32 = KVDtype.FLOAT32
BF16 = KVDtype.BFLOAT16


def full(head: int = 64, stride: bool = False, **kw: object) -> FullAttentionSpec:
    return FullAttentionSpec(
        block_size=16,
        num_kv_heads=2,
        head_size=head,
        dtype=F32,
        indexes_kv_by_block_stride=stride,
        **kw,  # type: ignore[arg-type]  # test helper
    )


def sw(head: int = 64, window: int = 128, stride: bool = False) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=16,
        num_kv_heads=2,
        head_size=head,
        dtype=F32,
        sliding_window=window,
        indexes_kv_by_block_stride=stride,
    )


def layers(*specs: KVCacheSpec, prefix: str = "l") -> LayerMap[KVCacheSpec]:
    return LayerMap.from_pairs((f"{prefix}{i}", s) for i, s in enumerate(specs))


def names(groups: tuple[KVCacheGroupSpec, ...]) -> list[list[str]]:
    return [list(g.layer_names) for g in groups]


S = PlannerSettings(max_model_len=16, max_num_batched_tokens=2048, vllm_version="0.26")


def test_hybrid_groups_use_strided_split() -> None:
    # 2 full + 4 sliding: group size 2; sliding splits into l2/l4 and l3/l5 (layers[i::2]).
    specs = layers(full(), full(), sw(), sw(), sw(), sw())
    grouping = get_kv_cache_groups(S, specs)
    assert names(grouping.groups) == [["l0", "l1"], ["l2", "l4"], ["l3", "l5"]]
    assert grouping.padding == ()


def test_one_point_five_rule_pads_to_the_larger_bucket() -> None:
    # gpt-oss + EAGLE style: 12 sliding + 13 full; 13 < 1.5 * 12, so groups of 13.
    specs = layers(*([sw()] * 12 + [full()] * 13))
    grouping = get_kv_cache_groups(S, specs)
    assert [len(g.layer_names) for g in grouping.groups] == [12, 13]
    (fact,) = grouping.padding
    assert fact.num_padding_layers == 1
    assert fact.message == "Add 1 padding layers, may waste at most 8.33% KV cache memory"


def test_small_bucket_sets_group_size_and_pads() -> None:
    # 3 full + 7 sliding: group size 3; sliding split into 3 groups (3, 2, 2): 2 padding.
    specs = layers(*([full()] * 3 + [sw()] * 7))
    grouping = get_kv_cache_groups(S, specs)
    assert names(grouping.groups) == [
        ["l0", "l1", "l2"],
        ["l3", "l6", "l9"],
        ["l4", "l7"],
        ["l5", "l8"],
    ]
    assert [(p.num_padding_layers, p.num_layers) for p in grouping.padding] == [(2, 7)]


def test_block_size_scaling_unifies_pages() -> None:
    # head 64 page 16384 B, head 128 page 32768 B (fp32): the smaller doubles its block size.
    specs = layers(full(128), sw(64))
    unified = unify_kv_cache_spec_page_size(specs)
    assert unified["l1"].block_size == 32
    assert unified["l1"].page_size_bytes == unified["l0"].page_size_bytes == 32768
    assert specs["l1"].block_size == 16  # the input is not changed


def test_padding_needs_block_stride_indexing() -> None:
    # 96-wide head: page 24576 B does not divide 32768 B.
    padded = unify_kv_cache_spec_page_size(layers(full(128), sw(96, stride=True)))
    assert padded["l1"].page_size_bytes == 32768
    assert padded["l1"].block_size == 16
    with pytest.raises(PageSizeUnificationError) as info:
        unify_kv_cache_spec_page_size(layers(full(128), sw(96)))
    assert info.value.layer_name == "l1"
    assert isinstance(info.value, NotImplementedError)


def test_mamba_pages_are_padded() -> None:
    mamba = MambaSpec(block_size=16, shapes=((10, 10),), dtypes=(F32,))
    unified = unify_kv_cache_spec_page_size(layers(full(128), mamba))
    assert unified["l1"].page_size_bytes == 32768
    assert isinstance(unified["l1"], MambaSpec)
    assert unified["l1"].page_size_padded == 32768


def test_hybrid_disabled_conversion_drops_block_stride_flag() -> None:
    specs = layers(full(stride=True), sw(stride=True))
    unified = unify_hybrid_kv_cache_specs(specs)
    converted = unified["l1"]
    assert isinstance(converted, FullAttentionSpec)
    assert converted.sliding_window == 128
    assert converted.indexes_kv_by_block_stride is False
    assert specs["l1"] == sw(stride=True)


def test_hybrid_disabled_conversion_of_chunked_and_failure() -> None:
    chunk = ChunkedLocalAttentionSpec(
        block_size=16, num_kv_heads=2, head_size=64, dtype=F32, attention_chunk_size=32
    )
    unified = unify_hybrid_kv_cache_specs(layers(full(), chunk))
    assert unified["l1"] == full(attention_chunk_size=32)
    with pytest.raises(HybridUnificationError):
        unify_hybrid_kv_cache_specs(layers(sw(window=8), chunk))
    disabled = PlannerSettings(
        max_model_len=16, disable_hybrid_kv_cache_manager=True, vllm_version="0.26"
    )
    with pytest.raises(WindowSizeMismatchError):
        get_kv_cache_groups(disabled, layers(full(), sw(window=8), sw(window=9)))


def test_hidden_state_layer_gets_its_own_aligned_group() -> None:
    hidden = HiddenStateCacheSpec(block_size=16, num_kv_heads=1, head_size=1024, dtype=F32)
    specs = layers(full(128), sw(128), hidden)
    grouping = get_kv_cache_groups(S, specs)
    assert names(grouping.groups) == [["l0"], ["l1"], ["l2"]]
    aligned = grouping.groups[2].kv_cache_spec
    # common page 32768 B; 1024 floats (4096 B) per token -> 8 tokens per block, padded.
    assert aligned.block_size == 8
    assert aligned.page_size_bytes == 32768


def test_approximate_gcd() -> None:
    assert approximate_gcd([4, 8, 12]) == 4  # zero padding at 1, 2 and 4; ties go larger
    assert approximate_gcd([11, 21], lower_bound=11) == 11  # 11 -> pad 1 (21 -> 22)
    assert approximate_gcd([11, 10], lower_bound=11) == 11
    assert approximate_gcd([3, 5], lower_bound=9) == 9


def _dsv4_specs() -> LayerMap[KVCacheSpec]:
    # Two full-MLA pages (C4 and C128 style) and one SWA page that pads up to the C4 page.
    c4 = MLAAttentionSpec(
        block_size=64,
        num_kv_heads=1,
        head_size=256,
        dtype=BF16,
        compress_ratio=4,
        model_version="deepseek_v4",
    )  # 16 tokens * 256 * 2 = 8192 B
    c128 = MLAAttentionSpec(
        block_size=64,
        num_kv_heads=1,
        head_size=256,
        dtype=BF16,
        compress_ratio=64,
        model_version="deepseek_v4",
    )  # 1 token * 512 = 512 B
    swa = SlidingWindowMLASpec(
        block_size=64,
        num_kv_heads=1,
        head_size=32,
        dtype=BF16,
        sliding_window=128,
        model_version="deepseek_v4",
    )  # 64 * 32 * 2 = 4096 B -> padded to 8192 B
    pairs: list[tuple[str, KVCacheSpec]] = []
    for i in range(2):
        pairs += [(f"c4.{i}", c4), (f"c128.{i}", c128)]
    pairs += [(f"swa.{i}", swa) for i in range(4)]
    return LayerMap.from_pairs(pairs)


def test_deepseek_v4_grouping_and_packed_layout() -> None:
    specs = _dsv4_specs()
    eagle = PlannerSettings(
        max_model_len=256, speculative_method="mtp", num_speculative_tokens=1, vllm_version="0.26"
    )
    grouping = get_kv_cache_groups(eagle, specs)
    # Tuples per group: full 2, swa 4 -> divisor 2 (no padding); swa splits into 2 groups.
    assert names(grouping.groups) == [
        ["c4.0", "c128.0", "c4.1", "c128.1"],
        ["swa.0", "swa.2"],
        ["swa.1", "swa.3"],
    ]
    assert [g.is_eagle_group for g in grouping.groups] == [False, False, True]
    swa_group = grouping.groups[1].kv_cache_spec
    assert isinstance(swa_group, UniformTypeKVCacheSpecs)
    assert {s.page_size_bytes for s in swa_group.kv_cache_specs.ordered_values()} == {8192}
    plan = get_kv_cache_configs(eagle, [specs], [10 * (8192 * 4 + 512 * 2)])
    config = plan.kv_cache_configs[0]
    # Buckets: 8192 B page has 2 slots (c4.i, swa), 512 B page 2 slots: 2*8192 + 2*512 per block.
    per_block = 2 * 8192 + 2 * 512
    assert config.num_blocks == 10 * (8192 * 4 + 512 * 2) // per_block
    assert [(t.shared_by, t.offset) for t in config.kv_cache_tensors] == [
        (("c4.0", "swa.0", "swa.1"), 0),
        (("c4.1", "swa.2", "swa.3"), 8192),
        (("c128.0",), 16384),
        (("c128.1",), 16896),
    ]
    assert all(t.block_stride == per_block for t in config.kv_cache_tensors)


def test_cross_layer_connector_flag_packs_hybrid_layout() -> None:
    settings = PlannerSettings(
        max_model_len=16,
        kv_connector_extra_config=_pmap({"enable_cross_layers_blocks": "True"}),
        vllm_version="0.26",
    )
    # Two groups of one 16384 B layer each: both sit in slot 0, one page per block.
    plan = get_kv_cache_configs(settings, [layers(full(), sw())], [16384 * 10])
    config = plan.kv_cache_configs[0]
    assert config.num_blocks == 10
    assert [(t.shared_by, t.offset, t.block_stride) for t in config.kv_cache_tensors] == [
        (("l0", "l1"), 0, 16384)
    ]


def _pmap(d: dict[str, object]) -> PMap[str, object]:
    return pmap(d)


def test_workers_must_agree_on_shared_layers() -> None:
    with pytest.raises(WorkerSpecMismatchError) as info:
        get_kv_cache_configs(S, [layers(full()), layers(full(128))], [10**6, 10**6])
    assert info.value.layer_name == "l0"
    assert (info.value.first_worker, info.value.other_worker) == (0, 1)


def test_encoder_only_layers_are_not_plannable() -> None:
    enc = EncoderOnlyAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=F32)
    with pytest.raises(UnregisteredSpecError) as info:
        get_kv_cache_configs(S, [layers(enc)], [10**6])
    assert info.value.layer_name == "l0"


def _config(*specs: KVCacheSpec) -> KVCacheConfig:
    groups = tuple(
        KVCacheGroupSpec(layer_names=(f"g{i}",), kv_cache_spec=s) for i, s in enumerate(specs)
    )
    return KVCacheConfig(num_blocks=1, kv_cache_tensors=(), kv_cache_groups=groups)


def test_resolve_block_sizes() -> None:
    dcp = PlannerSettings(
        block_size=16,
        decode_context_parallel_size=2,
        prefill_context_parallel_size=2,
        vllm_version="0.26",
    )
    # 0.26.0 scales by dcp only, not dcp * pcp.
    assert resolve_kv_cache_block_sizes(_config(full()), dcp) == (32, 32)
    mamba = MambaSpec(block_size=48, shapes=((4,),), dtypes=(F32,))
    two = _config(full(), mamba)
    # lcm(16, 48) = 48; the Mamba block size differs from the cache block size: no finer hash.
    assert resolve_kv_cache_block_sizes(
        two, PlannerSettings(block_size=16, vllm_version="0.26")
    ) == (48, 48)
    big = FullAttentionSpec(block_size=32, num_kv_heads=2, head_size=64, dtype=F32)
    assert resolve_kv_cache_block_sizes(
        _config(full(), big), PlannerSettings(vllm_version="0.26")
    ) == (32, 16)
    no_cache = PlannerSettings(enable_prefix_caching=False, vllm_version="0.26")
    assert resolve_kv_cache_block_sizes(_config(full(), big), no_cache) == (32, 32)
    with pytest.raises(PrefixMatchUnitError):
        resolve_kv_cache_block_sizes(
            _config(full(), big), PlannerSettings(prefix_match_unit=12, vllm_version="0.26")
        )


def test_max_concurrent_batches() -> None:
    assert (
        PlannerSettings(pipeline_parallel_size=2, vllm_version="0.26").max_concurrent_batches == 2
    )
    assert PlannerSettings(async_scheduling=True, vllm_version="0.26").max_concurrent_batches == 2
    assert (
        PlannerSettings(
            async_scheduling=True, pipeline_parallel_size=3, vllm_version="0.26"
        ).max_concurrent_batches
        == 3
    )
    v2 = PlannerSettings(
        async_scheduling=True,
        pipeline_parallel_size=3,
        use_v2_model_runner=True,
        vllm_version="0.26",
    )
    assert v2.max_concurrent_batches == 4
    assert v2.max_in_flight_tokens == 4 * 8192
