"""kvpure_gpu on whole plans: dtypes, allocation, aliasing, meta-sized plans, typed errors.

Plans are built by hand from kvpure's spec and plan values; expected shapes
and byte positions are worked out from the layouts' definitions.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch

from kvpure.errors import InvalidFieldError, NoCommonKernelBlockSizeError
from kvpure.specs import (
    FullAttentionSpec,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure.specs.layer_map import LayerMap
from kvpure_gpu import (
    KVCacheLayout,
    allocate_kv_cache_buffers,
    from_torch_dtype,
    materialize_kv_cache,
    select_kernel_block_sizes,
    to_torch_dtype,
)
from kvpure_gpu.errors import (
    DeviceUnavailableError,
    KVCacheLayoutError,
    LayerWithoutGroupError,
    LayerWithoutTensorError,
    LayoutCannotExpressPageError,
    PackedTensorMismatchError,
    TensorSizeNotPageMultipleError,
    UnsupportedDtypeError,
    UnsupportedViewError,
)

GiB = 1 << 30


def _full(**overrides: object) -> FullAttentionSpec:
    fields: dict[str, object] = {
        "block_size": 16,
        "num_kv_heads": 2,
        "head_size": 8,
        "dtype": KVDtype.BFLOAT16,
        "indexes_kv_by_block_stride": True,
    }
    fields.update(overrides)
    return FullAttentionSpec(**fields)  # type: ignore[arg-type]  # test helper over known fields


def _config(
    num_blocks: int,
    tensors: Sequence[tuple[int, tuple[str, ...]] | KVCacheTensor],
    groups: Sequence[tuple[tuple[str, ...], KVCacheSpec]],
) -> KVCacheConfig:
    built = [
        t if isinstance(t, KVCacheTensor) else KVCacheTensor(size=t[0], shared_by=t[1])
        for t in tensors
    ]
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=tuple(built),
        kv_cache_groups=tuple(
            KVCacheGroupSpec(layer_names=names, kv_cache_spec=spec) for names, spec in groups
        ),
    )


# --- dtypes --------------------------------------------------------------------


@pytest.mark.parametrize("member", list(KVDtype))
def test_every_kvdtype_has_a_torch_dtype(member: KVDtype) -> None:
    dtype = to_torch_dtype(member)
    assert str(dtype) == f"torch.{member.value}"
    assert dtype.itemsize == member.itemsize
    assert from_torch_dtype(dtype) is member


def test_torch_dtype_without_counterpart_is_typed() -> None:
    with pytest.raises(UnsupportedDtypeError) as info:
        from_torch_dtype(torch.qint8)
    assert info.value.dtype == "qint8"
    assert isinstance(info.value, ValueError)


# --- allocation ----------------------------------------------------------------


def test_allocation_is_one_zeroed_int8_buffer_per_tensor() -> None:
    spec = _full()
    page = spec.page_size_bytes
    config = _config(3, [(3 * page, ("a",)), (3 * page, ("b",))], [(("a", "b"), spec)])
    buffers = allocate_kv_cache_buffers(config, "cpu")
    assert len(buffers.buffers) == 2
    assert all(b.dtype == torch.int8 and b.numel() == 3 * page for b in buffers.buffers)
    assert all(not bool(b.any()) for b in buffers.buffers)
    assert buffers.tensor_buffer_index == (0, 1)
    assert buffers.total_bytes == 6 * page
    empty = allocate_kv_cache_buffers(config, "cpu", zero_fill=False)
    assert [b.numel() for b in empty.buffers] == [3 * page, 3 * page]


def test_unavailable_device_is_a_typed_error() -> None:
    spec = _full()
    config = _config(1, [(spec.page_size_bytes, ("a",))], [(("a",), spec)])
    with pytest.raises(DeviceUnavailableError) as info:
        allocate_kv_cache_buffers(config, "xpu")
    assert info.value.device == "xpu"
    assert isinstance(info.value, RuntimeError)
    if not torch.cuda.is_available():  # the default device is cuda
        with pytest.raises(DeviceUnavailableError, match="'cuda'"):
            materialize_kv_cache(config)


def test_packed_tensors_share_one_buffer() -> None:
    spec = _full()
    page = spec.page_size_bytes
    tensors = [
        KVCacheTensor(size=4 * 2 * page, shared_by=("a",), offset=0, block_stride=2 * page),
        KVCacheTensor(size=4 * 2 * page, shared_by=("b",), offset=page, block_stride=2 * page),
    ]
    config = _config(4, tensors, [(("a", "b"), spec)])
    kv = materialize_kv_cache(config, "cpu")
    assert len(kv.buffers.buffers) == 1
    assert kv.buffers.tensor_buffer_index == (0, 0)
    a, b = kv.layers["a"].tensor, kv.layers["b"].tensor
    assert a is not None
    assert b is not None
    a.fill_(2.0)
    raw = kv.buffers.buffers[0].view(torch.bfloat16).view(4, 2, page // 2)
    assert bool((raw[:, 0] == 2).all())
    assert bool((raw[:, 1] == 0).all())
    assert bool((b == 0).all())
    bad = [
        tensors[0],
        KVCacheTensor(size=8 * page, shared_by=("b",), offset=page, block_stride=page),
    ]
    with pytest.raises(PackedTensorMismatchError) as info:
        allocate_kv_cache_buffers(_config(4, bad, [(("a", "b"), spec)]), "cpu")
    assert info.value.layer_name == "b"


# --- views over whole plans ------------------------------------------------------


def _hybrid_plan() -> KVCacheConfig:
    full = _full(dtype=KVDtype.FLOAT32)
    sliding = SlidingWindowSpec(
        block_size=16,
        num_kv_heads=2,
        head_size=8,
        dtype=KVDtype.FLOAT32,
        sliding_window=32,
        indexes_kv_by_block_stride=True,
    )
    page = full.page_size_bytes
    return _config(
        5,
        [(5 * page, ("full.0", "sw.0")), (5 * page, ("full.1", "sw.1"))],
        [(("full.0", "full.1"), full), (("sw.0", "sw.1"), sliding)],
    )


def test_write_is_seen_by_aliases_and_nowhere_else() -> None:
    kv = materialize_kv_cache(_hybrid_plan(), "cpu")
    full0 = kv.layers["full.0"].tensor
    sw0 = kv.layers["sw.0"].tensor
    assert full0 is not None
    assert sw0 is not None
    full0[2].fill_(5.0)
    page = kv.layers["full.0"].spec.page_size_bytes
    raw0 = kv.buffers.buffers[0]
    touched = raw0.view(-1, page)
    assert bool((touched[2].view(torch.float32) == 5).all())
    assert not bool(touched[[0, 1, 3, 4]].any())
    assert bool((sw0[2] == 5).all())  # the layer sharing the tensor sees it
    assert not bool(kv.buffers.buffers[1].any())  # the other layers' buffer does not
    for layer in kv.layers.values():
        for view in layer.views:
            raw = kv.buffers.buffers[layer.buffer_index]
            assert view.untyped_storage().data_ptr() == raw.untyped_storage().data_ptr()
            assert raw.data_ptr() <= view.data_ptr() < raw.data_ptr() + raw.numel()


def test_vllm_shaped_dict_and_block_table_layouts() -> None:
    kv = materialize_kv_cache(_hybrid_plan(), "cpu", kernel_block_sizes=[8, 16])
    caches = kv.kv_caches()
    assert set(caches) == {"full.0", "full.1", "sw.0", "sw.1"}
    full0 = caches["full.0"]
    assert isinstance(full0, torch.Tensor)
    assert tuple(full0.shape) == (10, 2, 8, 16)  # 5 blocks of 16 -> 10 kernel blocks of 8
    layouts = kv.block_table_layouts(dcp_world_size=2, dcp_rank=1)
    assert [lay.blocks_per_kv_block for lay in layouts] == [2, 1]
    assert layouts[0].dcp_rank == 1
    assert kv.layers["full.0"].backend == "FlashAttentionBackend"


def test_hnd_override_and_mla_default() -> None:
    mla = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16)
    page = mla.page_size_bytes
    full = _full()
    config = _config(
        2,
        [(2 * page, ("mla.0",)), (2 * full.page_size_bytes, ("attn.0",))],
        [(("mla.0",), mla), (("attn.0",), full)],
    )
    kv = materialize_kv_cache(config, "cpu", attention_layout=KVCacheLayout.FLASH_ATTN_HND)
    mla_view, attn_view = kv.layers["mla.0"].tensor, kv.layers["attn.0"].tensor
    assert mla_view is not None
    assert attn_view is not None
    assert kv.layers["mla.0"].layout is KVCacheLayout.MLA
    assert tuple(mla_view.shape) == (2, 64, 576)
    assert attn_view.is_contiguous()
    assert tuple(attn_view.shape) == (2, 2, 16, 16)


def test_mamba_hybrid_with_kv_first_attention_is_block_major() -> None:
    attn = _full(dtype=KVDtype.FLOAT32, block_size=4, num_kv_heads=1, head_size=4)
    page = attn.page_size_bytes  # 2*4*1*4*4 = 128 bytes
    mamba = MambaSpec(
        block_size=64,
        shapes=((2, 4), (4, 2)),
        dtypes=(KVDtype.FLOAT32, KVDtype.FLOAT32),
        page_size_padded=page,
    )
    config = _config(3, [(3 * page, ("m.0", "attn.0"))], [(("m.0",), mamba), (("attn.0",), attn)])
    kv = materialize_kv_cache(config, "cpu", layouts={"attn.0": KVCacheLayout.KV_FIRST})
    view = kv.layers["attn.0"].tensor
    assert view is not None
    assert tuple(view.shape) == (2, 3, 4, 1, 4)
    assert view.stride() == (16, 32, 4, 4, 1)  # K then V inside every 128-byte page
    conv, ssm = kv.layers["m.0"].states
    assert ssm.stride() == (32, 2, 1)
    assert ssm.storage_offset() == 8
    view[1, 2].fill_(9.0)  # V of block 2: bytes 320..383, the Mamba page's padding
    assert not bool(conv.ne(0).any())
    assert not bool(ssm.ne(0).any())
    view[0, 2].fill_(7.0)  # K of block 2: bytes 256..319, block 2's conv then ssm state
    assert bool((conv[2] == 7).all())
    assert bool((ssm[2] == 7).all())
    assert not bool(conv[:2].ne(0).any())


def test_uniform_type_layers_are_viewed_one_by_one() -> None:
    wide, narrow = _full(head_size=16), _full(head_size=8)
    uniform = UniformTypeKVCacheSpecs(
        block_size=16, kv_cache_specs=LayerMap.from_pairs([("l0", wide), ("l1", narrow)])
    )
    config = _config(
        3,
        [(3 * wide.page_size_bytes, ("l0",)), (3 * narrow.page_size_bytes, ("l1",))],
        [(("l0", "l1"), uniform)],
    )
    kv = materialize_kv_cache(config, "cpu")
    l0, l1 = kv.layers["l0"].tensor, kv.layers["l1"].tensor
    assert l0 is not None
    assert l1 is not None
    assert tuple(l0.shape) == (3, 2, 16, 32)
    assert tuple(l1.shape) == (3, 2, 16, 16)


def test_a_300_gib_plan_materialises_on_meta() -> None:
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
    page = spec.page_size_bytes
    num_blocks = 300 * GiB // (page * 32)
    names = tuple(f"model.layers.{i}.self_attn.attn" for i in range(32))
    config = _config(num_blocks, [(page * num_blocks, (n,)) for n in names], [(names, spec)])
    kv = materialize_kv_cache(config, "meta")
    assert kv.buffers.total_bytes == 300 * GiB
    view = kv.layers[names[-1]].tensor
    assert view is not None
    assert view.device.type == "meta"
    assert tuple(view.shape) == (num_blocks, 8, 16, 256)
    assert view.stride() == (32768, 256, 2048, 1)


# --- typed errors ------------------------------------------------------------------


def test_layer_in_no_tensor() -> None:
    spec = _full()
    config = _config(2, [(2 * spec.page_size_bytes, ("a",))], [(("a", "b"), spec)])
    with pytest.raises(LayerWithoutTensorError) as info:
        materialize_kv_cache(config, "meta")
    assert info.value.layer_name == "b"
    assert "'b'" in str(info.value)
    assert isinstance(info.value, KVCacheLayoutError)


def test_tensor_layer_in_no_group() -> None:
    spec = _full()
    config = _config(2, [(2 * spec.page_size_bytes, ("a", "ghost"))], [(("a",), spec)])
    with pytest.raises(LayerWithoutGroupError) as info:
        materialize_kv_cache(config, "meta")
    assert info.value.layer_name == "ghost"


def test_tensor_size_not_a_page_multiple() -> None:
    spec = _full()
    config = _config(2, [(2 * spec.page_size_bytes + 64, ("a",))], [(("a",), spec)])
    with pytest.raises(TensorSizeNotPageMultipleError) as info:
        materialize_kv_cache(config, "meta")
    assert info.value.layer_name == "a"
    assert info.value.page_size_bytes == spec.page_size_bytes


def test_kv_first_layout_cannot_express_a_padded_page() -> None:
    spec = _full(page_size_padded=2 * _full().page_size_bytes)
    config = _config(2, [(2 * spec.page_size_bytes, ("a",))], [(("a",), spec)])
    materialize_kv_cache(config, "meta")  # the default (block-first) layout can
    with pytest.raises(LayoutCannotExpressPageError) as info:
        materialize_kv_cache(config, "meta", layouts={"a": KVCacheLayout.KV_FIRST})
    assert info.value.layer_name == "a"
    assert info.value.layout == "kv_first"


def test_bad_kernel_block_sizes_and_quant_modes() -> None:
    spec = _full()
    config = _config(2, [(2 * spec.page_size_bytes, ("a",))], [(("a",), spec)])
    with pytest.raises(InvalidFieldError):
        materialize_kv_cache(config, "meta", kernel_block_sizes=[16, 16])
    quant = _full(kv_quant_mode=KVQuantMode.INT8_PER_TOKEN_HEAD, dtype=KVDtype.INT8)
    qconfig = _config(2, [(2 * quant.page_size_bytes, ("q",))], [(("q",), quant)])
    with pytest.raises(UnsupportedViewError) as info:
        materialize_kv_cache(qconfig, "meta")
    assert info.value.layer_name == "q"


def test_compressed_and_fp8_ds_mla_views() -> None:
    # DeepSeek-V4-style compression: 64-token blocks store 64 // 4 = 16 rows.
    compressed = MLAAttentionSpec(
        block_size=64, num_kv_heads=1, head_size=512, dtype=KVDtype.BFLOAT16, compress_ratio=4
    )
    assert compressed.page_size_bytes == 16 * 512 * 2
    # DeepSeek-V3.2 fp8_ds_mla: 656 bytes per token (512 fp8 + scales + 64 bf16 RoPE).
    ds_mla = MLAAttentionSpec(
        block_size=64,
        num_kv_heads=1,
        head_size=576,
        dtype=KVDtype.UINT8,
        kv_quant_mode=KVQuantMode.FP8_PER_TENSOR,
        cache_dtype_str="fp8_ds_mla",
    )
    assert ds_mla.page_size_bytes == 64 * 656
    config = _config(
        3,
        [(3 * compressed.page_size_bytes, ("c",)), (3 * ds_mla.page_size_bytes, ("d",))],
        [(("c",), compressed), (("d",), ds_mla)],
    )
    kv = materialize_kv_cache(config, "cpu")
    c, d = kv.layers["c"].tensor, kv.layers["d"].tensor
    assert c is not None
    assert d is not None
    assert tuple(c.shape) == (3, 16, 512)
    assert kv.layers["c"].kernel_block_size == 16
    assert tuple(d.shape) == (3, 64, 656)
    assert d.dtype == torch.uint8


def test_kernel_block_selection_over_a_plan() -> None:
    mamba = MambaSpec(block_size=256, shapes=((4, 4),), dtypes=(KVDtype.FLOAT32,))
    fa = _full(block_size=32)
    config = _config(
        1,
        [(fa.page_size_bytes, ("attn",)), (mamba.page_size_bytes, ("m",))],
        [(("attn",), fa), (("m",), mamba)],
    )
    assert select_kernel_block_sizes(config) == (32, 256)
    small = _full(block_size=8)  # FlashAttention needs a multiple of 16
    bad = _config(1, [(small.page_size_bytes, ("a",))], [(("a",), small)])
    with pytest.raises(NoCommonKernelBlockSizeError):
        select_kernel_block_sizes(bad)
