"""kvpure_gpu.views: per-layer views from a geometry, checked by reasoning about bytes.

Expected strides are worked out by hand from the layouts' definitions; the
write tests check where a write lands in the raw buffer byte by byte.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvpure.errors import KVPureNotImplementedError, KVPureValueError
from kvpure_gpu.errors import (
    KernelBlockSizeError,
    LayoutCannotExpressPageError,
    TensorSizeNotPageMultipleError,
    UnsupportedViewError,
)
from kvpure_gpu.layouts import KVCacheLayout, contiguous_strides, inverse_permutation
from kvpure_gpu.views import (
    AttentionGeometry,
    MambaGeometry,
    Packing,
    attention_view,
    byte_offset,
    describe,
    mamba_state_views,
)


def _attn(
    layout: KVCacheLayout = KVCacheLayout.FLASH_ATTN_NHD,
    *,
    dtype: torch.dtype = torch.bfloat16,
    block_size: int = 16,
    heads: int = 2,
    head_size: int = 8,
    pad_to: int | None = None,
    storage_block_size: int | None = None,
) -> AttentionGeometry:
    storage = block_size if storage_block_size is None else storage_block_size
    factor = 1 if layout is KVCacheLayout.MLA else 2
    data = factor * storage * heads * head_size * dtype.itemsize
    return AttentionGeometry(
        layer_name="layer.0",
        layout=layout,
        dtype=dtype,
        block_size=block_size,
        storage_block_size=storage,
        num_kv_heads=heads,
        head_size=head_size,
        data_bytes=data,
        page_size_bytes=data if pad_to is None else pad_to,
    )


def _same_storage(view: torch.Tensor, raw: torch.Tensor) -> bool:
    return bool(view.untyped_storage().data_ptr() == raw.untyped_storage().data_ptr())


def test_helpers() -> None:
    assert contiguous_strides((4, 16, 2, 128)) == (4096, 256, 128, 1)
    assert contiguous_strides(()) == ()
    assert inverse_permutation((0, 2, 1, 3)) == (0, 2, 1, 3)
    assert inverse_permutation((1, 2, 0)) == (2, 0, 1)


def test_nhd_matches_reference_example() -> None:
    # Reference 5.3: FA bf16, 4 blocks, H=2, D=64, bs=16 -> [4,2,16,128], [4096,128,256,1].
    g = _attn(head_size=64)
    raw = torch.zeros(4 * g.page_size_bytes, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=16)
    assert tuple(view.shape) == (4, 2, 16, 128)
    assert view.stride() == (4096, 128, 256, 1)
    assert _same_storage(view, raw)


def test_hnd_is_contiguous_in_logical_order() -> None:
    g = _attn(KVCacheLayout.FLASH_ATTN_HND, head_size=64)
    raw = torch.zeros(3 * g.page_size_bytes, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=16)
    assert tuple(view.shape) == (3, 2, 16, 128)
    assert view.stride() == (4096, 2048, 128, 1)
    assert view.is_contiguous()


def test_kv_first_layout_and_its_hybrid_restride() -> None:
    g = _attn(KVCacheLayout.KV_FIRST, dtype=torch.float16, block_size=4, heads=2, head_size=8)
    raw = torch.zeros(5 * g.page_size_bytes, dtype=torch.int8)
    plain = attention_view(raw, g, kernel_block_size=4)
    assert tuple(plain.shape) == (2, 5, 4, 2, 8)
    assert plain.stride() == (5 * 64, 64, 16, 8, 1)
    hybrid = attention_view(raw, g, kernel_block_size=4, blocks_outermost=True)
    # hidden = 4*2*8 = 64 elements: K of block b at 128*b, V right after it.
    assert hybrid.stride() == (64, 128, 16, 8, 1)
    hybrid[1, 2].fill_(1.0)  # V of block 2
    ones = (raw.view(torch.float16) == 1).nonzero().flatten()
    assert ones.min().item() == 2 * 128 + 64
    assert ones.max().item() == 2 * 128 + 127


def test_mla_layout() -> None:
    g = _attn(KVCacheLayout.MLA, block_size=64, heads=1, head_size=576)
    assert g.page_size_bytes == 73728
    raw = torch.zeros(2 * g.page_size_bytes, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=64)
    assert tuple(view.shape) == (2, 64, 576)
    assert view.stride() == (36864, 576, 1)


def test_kernel_blocks_split_each_block() -> None:
    # Block size 32 split into kernel blocks of 16: 3 blocks -> 6 kernel blocks,
    # kernel block 2b+j is the j-th half of block b.
    g = _attn(block_size=32, heads=1, head_size=4, dtype=torch.float32)
    page = g.page_size_bytes
    assert page == 2 * 32 * 4 * 4
    raw = torch.zeros(3 * page, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=16)
    assert tuple(view.shape) == (6, 1, 16, 8)
    view[3].fill_(7.0)  # second half of block 1
    hit = (raw.view(torch.float32) == 7).nonzero().flatten()
    assert hit.min().item() * 4 == page + page // 2
    assert (hit.max().item() + 1) * 4 == 2 * page


def test_compressed_block_uses_storage_block_size() -> None:
    # DeepSeek-V4-style compression: block_size 64, 16 stored rows per block.
    g = _attn(KVCacheLayout.MLA, block_size=64, storage_block_size=16, heads=1, head_size=8)
    raw = torch.zeros(4 * g.page_size_bytes, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=64)
    assert tuple(view.shape) == (4, 16, 8)


def test_padded_page_strides_and_writes() -> None:
    g = _attn(dtype=torch.float32, head_size=64, pad_to=24576)
    raw = torch.zeros(4 * 24576, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=16)
    assert tuple(view.shape) == (4, 2, 16, 128)
    assert view.stride() == (6144, 128, 256, 1)
    view.fill_(1.0)
    per_page = raw.view(torch.float32).view(-1, 6144)
    assert bool((per_page[:, :4096] == 1).all())
    assert bool((per_page[:, 4096:] == 0).all())  # the padding is never touched


def test_packed_view_at_offset() -> None:
    g = _attn(head_size=64)
    raw = torch.zeros(4 * 16384, dtype=torch.int8)
    first = attention_view(
        raw, g, kernel_block_size=16, packing=Packing(offset_bytes=0, block_stride_bytes=16384)
    )
    second = attention_view(
        raw, g, kernel_block_size=16, packing=Packing(offset_bytes=8192, block_stride_bytes=16384)
    )
    assert second.stride() == (8192, 128, 256, 1)
    assert second.storage_offset() == 4096
    assert byte_offset(second) == 8192
    assert second.data_ptr() - raw.data_ptr() == 8192
    second.fill_(3.0)
    blocks = raw.view(-1, 16384)
    assert bool((blocks[:, 8192:] != 0).all())
    assert bool((blocks[:, :8192] == 0).all())
    assert bool((first == 0).all())
    assert _same_storage(first, raw)
    assert _same_storage(second, raw)


def test_mamba_states_with_padding() -> None:
    g = MambaGeometry(
        layer_name="mamba.0",
        shapes=((2, 4), (3, 2, 2)),
        dtypes=(torch.float32, torch.bfloat16),
        page_size_bytes=64,  # 32 + 24 bytes of state, padded to 64
    )
    raw = torch.zeros(5 * 64, dtype=torch.int8)
    conv, ssm = mamba_state_views(raw, g)
    assert tuple(conv.shape) == (5, 2, 4)
    assert conv.stride() == (16, 4, 1)
    assert tuple(ssm.shape) == (5, 3, 2, 2)
    assert ssm.stride() == (32, 4, 2, 1)
    assert byte_offset(ssm) == 32
    ssm[4].fill_(1.0)
    nonzero = raw.nonzero().flatten()
    assert nonzero.min().item() >= 4 * 64 + 32
    assert nonzero.max().item() < 4 * 64 + 56
    assert describe([conv])[0].startswith("float32 [5, 2, 4]")


def test_errors_are_typed_and_name_the_layer() -> None:
    g = _attn()
    with pytest.raises(TensorSizeNotPageMultipleError) as size_err:
        attention_view(
            torch.zeros(g.page_size_bytes + 2, dtype=torch.int8), g, kernel_block_size=16
        )
    assert size_err.value.layer_name == "layer.0"
    assert "layer.0" in str(size_err.value)
    raw = torch.zeros(2 * g.page_size_bytes, dtype=torch.int8)
    with pytest.raises(KernelBlockSizeError):
        attention_view(raw, g, kernel_block_size=6)
    kv_first_padded = _attn(KVCacheLayout.KV_FIRST, pad_to=2048)
    with pytest.raises(LayoutCannotExpressPageError) as pad_err:
        attention_view(torch.zeros(4096, dtype=torch.int8), kv_first_padded, kernel_block_size=16)
    assert pad_err.value.layer_name == "layer.0"
    assert isinstance(pad_err.value, KVPureValueError)
    with pytest.raises(LayoutCannotExpressPageError):
        attention_view(
            torch.zeros(4096, dtype=torch.int8),
            _attn(KVCacheLayout.KV_FIRST),
            kernel_block_size=16,
            packing=Packing(offset_bytes=0, block_stride_bytes=2048),
        )
    padded = _attn(block_size=32, pad_to=4096 + 512)
    with pytest.raises(LayoutCannotExpressPageError):
        attention_view(torch.zeros(2 * 4608, dtype=torch.int8), padded, kernel_block_size=16)
    with pytest.raises(LayoutCannotExpressPageError):
        attention_view(
            raw,
            g,
            kernel_block_size=16,
            packing=Packing(offset_bytes=1024, block_stride_bytes=1024),
        )
    wrong = AttentionGeometry(
        layer_name="odd",
        layout=KVCacheLayout.FLASH_ATTN_NHD,
        dtype=torch.bfloat16,
        block_size=16,
        storage_block_size=16,
        num_kv_heads=2,
        head_size=8,
        data_bytes=1000,
        page_size_bytes=1024,
    )
    with pytest.raises(UnsupportedViewError) as unsupported:
        attention_view(torch.zeros(2048, dtype=torch.int8), wrong, kernel_block_size=16)
    assert isinstance(unsupported.value, KVPureNotImplementedError)
    mamba = MambaGeometry(
        layer_name="m", shapes=((4, 4),), dtypes=(torch.float32,), page_size_bytes=32
    )
    with pytest.raises(LayoutCannotExpressPageError):
        mamba_state_views(torch.zeros(64, dtype=torch.int8), mamba)


def test_views_on_meta_have_the_same_geometry() -> None:
    g = _attn(head_size=64, pad_to=12288)
    cpu = attention_view(torch.zeros(4 * 12288, dtype=torch.int8), g, kernel_block_size=16)
    meta = attention_view(
        torch.empty(4 * 12288, dtype=torch.int8, device="meta"), g, kernel_block_size=16
    )
    assert meta.device.type == "meta"
    assert (tuple(meta.shape), meta.stride(), meta.storage_offset()) == (
        tuple(cpu.shape),
        cpu.stride(),
        cpu.storage_offset(),
    )


# --- property: memory follows the stride order, pages sit where the plan says ----

_LAYOUTS_BLOCK_FIRST = [
    KVCacheLayout.FLASH_ATTN_NHD,
    KVCacheLayout.FLASH_ATTN_HND,
    KVCacheLayout.MLA,
]


@st.composite
def placed_geometries(
    draw: st.DrawFn,
) -> tuple[AttentionGeometry, int, Packing | None, int]:
    layout = draw(st.sampled_from(_LAYOUTS_BLOCK_FIRST))
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16, torch.int8]))
    block_size = draw(st.sampled_from([1, 2, 4, 8]))
    heads = 1 if layout is KVCacheLayout.MLA else draw(st.integers(1, 3))
    head_size = draw(st.integers(1, 6))
    g = _attn(layout, dtype=dtype, block_size=block_size, heads=heads, head_size=head_size)
    padding = draw(st.integers(0, 3)) * dtype.itemsize
    g = AttentionGeometry(
        layer_name=g.layer_name,
        layout=g.layout,
        dtype=g.dtype,
        block_size=g.block_size,
        storage_block_size=g.storage_block_size,
        num_kv_heads=g.num_kv_heads,
        head_size=g.head_size,
        data_bytes=g.data_bytes,
        page_size_bytes=g.data_bytes + padding,
    )
    num_blocks = draw(st.integers(1, 4))
    packing = None
    if draw(st.booleans()):
        before = draw(st.integers(0, 2)) * 4 * dtype.itemsize
        after = draw(st.integers(0, 2)) * dtype.itemsize
        packing = Packing(
            offset_bytes=before, block_stride_bytes=before + g.page_size_bytes + after
        )
    kernel = block_size
    if padding == 0 and packing is None:
        kernel = draw(st.sampled_from([d for d in (1, 2, 4, 8) if block_size % d == 0]))
    return g, num_blocks, packing, kernel


@given(placed_geometries())
def test_views_put_each_block_where_the_plan_says(
    case: tuple[AttentionGeometry, int, Packing | None, int],
) -> None:
    g, num_blocks, packing, kernel = case
    stride = packing.block_stride_bytes if packing is not None else g.page_size_bytes
    base = packing.offset_bytes if packing is not None else 0
    raw = torch.zeros(num_blocks * stride, dtype=torch.int8)
    view = attention_view(raw, g, kernel_block_size=kernel, packing=packing)
    split = g.block_size // kernel
    assert view.shape[0] == num_blocks * split
    assert _same_storage(view, raw)
    values = torch.arange(1, view.numel() + 1).remainder(100).add(1).to(g.dtype)
    view.copy_(values.view(view.shape))
    block_order = [o - 1 for o in g.layout.stride_order[1:]]
    for b in range(num_blocks):
        page = raw[b * stride + base : b * stride + base + g.data_bytes].view(g.dtype)
        expected = torch.cat(
            [view[b * split + j].permute(*block_order).contiguous().flatten() for j in range(split)]
        )
        assert torch.equal(page, expected)
        # Bytes outside the block's data (padding, other packed layers) stay zero.
        row = raw[b * stride : (b + 1) * stride]
        assert not bool(row[:base].any())
        assert not bool(row[base + g.data_bytes :].any())
