"""Per-layer views into raw KV-cache buffers, by layout; never copies.

A view is built from a layer's *geometry* (what its spec says about one
page) and its place in a raw int8 buffer (plain, or packed at an offset
inside a block stride). This module knows nothing of the spec classes;
:mod:`kvpure_gpu.kv_cache` reads the geometry off a plan.

The rules are vLLM 0.26.0's ``_reshape_kv_cache``:

- blocks: ``numel // block_stride`` when packed, else ``numel // page_size``;
- kernel blocks: each block splits into ``storage_block_size //
  kernel_block_size`` kernel blocks (compressed MLA stores
  ``storage_block_size`` tokens per block and is addressed in those);
- attention: the backend's logical shape, laid out in its stride order;
  padded and packed pages become an ``as_strided`` view whose block stride
  is the page (or block stride), with the block dimension outermost;
- Mamba: each state ``i`` at byte ``sum(bytes of states < i)`` of every page,
  pages ``page_size_bytes`` apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_instance, check_int, check_str
from kvpure.runtime_types import typed
from kvpure_gpu.checks import (
    MAX_KERNEL_BLOCK_SIZE,
    MAX_TENSOR_BYTES,
    check_raw_buffer,
    check_tensor,
)
from kvpure_gpu.dtypes import from_torch_dtype
from kvpure_gpu.errors import (
    KernelBlockSizeError,
    LayoutCannotExpressPageError,
    TensorSizeNotPageMultipleError,
    UnsupportedViewError,
)
from kvpure_gpu.layouts import KVCacheLayout, contiguous_strides, inverse_permutation


@dataclass(frozen=True, slots=True, kw_only=True)
class Packing:
    """Where a packed layer's page sits inside each block of its buffer."""

    offset_bytes: int
    block_stride_bytes: int

    def __post_init__(self) -> None:
        check_int("offset_bytes", self.offset_bytes, minimum=0, maximum=MAX_TENSOR_BYTES)
        check_int(
            "block_stride_bytes", self.block_stride_bytes, minimum=1, maximum=MAX_TENSOR_BYTES
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionGeometry:
    """One attention layer's page, as its view needs it.

    ``head_size`` is the last-dimension argument of the backend shape (for
    the fp8_ds_mla MLA cache it is the packed entry width). ``data_bytes``
    is the page without padding; ``page_size_bytes`` the page with it.
    """

    layer_name: str
    layout: KVCacheLayout
    dtype: torch.dtype
    block_size: int
    storage_block_size: int
    num_kv_heads: int
    head_size: int
    data_bytes: int
    page_size_bytes: int

    def __post_init__(self) -> None:
        check_str("layer_name", self.layer_name)
        check_instance("layout", self.layout, KVCacheLayout, "a KVCacheLayout")
        check_instance("dtype", self.dtype, torch.dtype, "a torch.dtype")
        from_torch_dtype(self.dtype)  # one kvpure can lay out
        for field in (
            "block_size",
            "storage_block_size",
            "num_kv_heads",
            "head_size",
            "data_bytes",
            "page_size_bytes",
        ):
            check_int(field, getattr(self, field), minimum=1, maximum=MAX_TENSOR_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaGeometry:
    """One Mamba layer's page: its state tensors' shapes and dtypes, and the page size."""

    layer_name: str
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    page_size_bytes: int

    def __post_init__(self) -> None:
        check_str("layer_name", self.layer_name)
        for field, items in (("shapes", self.shapes), ("dtypes", self.dtypes)):
            if not isinstance(items, tuple) or not items:
                raise FieldTypeError(field=field, value=items, reason="must be a non-empty tuple")
        for i, shape in enumerate(self.shapes):
            check_instance(f"shapes[{i}]", shape, tuple, "a tuple of ints")
            for j, dim in enumerate(shape):
                check_int(f"shapes[{i}][{j}]", dim, minimum=1, maximum=MAX_TENSOR_BYTES)
        for i, dtype in enumerate(self.dtypes):
            check_instance(f"dtypes[{i}]", dtype, torch.dtype, "a torch.dtype")
            from_torch_dtype(dtype)
        if len(self.dtypes) != len(self.shapes):
            raise InvalidFieldError(
                field="dtypes", value=self.dtypes, reason="must have one dtype per shape"
            )
        check_int("page_size_bytes", self.page_size_bytes, minimum=1, maximum=MAX_TENSOR_BYTES)


def _num_blocks(raw: torch.Tensor, layer_name: str, block_bytes: int) -> int:
    numel = raw.numel()
    if block_bytes <= 0 or numel % block_bytes != 0:
        raise TensorSizeNotPageMultipleError(
            layer_name=layer_name, size_bytes=numel, page_size_bytes=block_bytes
        )
    return numel // block_bytes


def _require_aligned(layer_name: str, what: str, value_bytes: int, itemsize: int) -> None:
    if value_bytes % itemsize != 0:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=f"{what} of {value_bytes} bytes is not a whole number of {itemsize}-byte items",
        )


@typed
def effective_kernel_block_size(geometry: AttentionGeometry, kernel_block_size: int) -> int:
    """The kernel block size a layer's view is shaped with.

    A compressed layer (``storage_block_size != block_size``, DeepSeek-V4
    MLA) is addressed in whole storage blocks, as vLLM does.
    """
    if geometry.storage_block_size != geometry.block_size:
        return geometry.storage_block_size
    if kernel_block_size <= 0 or geometry.storage_block_size % kernel_block_size != 0:
        raise KernelBlockSizeError(
            layer_name=geometry.layer_name,
            block_size=geometry.storage_block_size,
            kernel_block_size=kernel_block_size,
        )
    return kernel_block_size


@typed
def attention_view(
    raw: torch.Tensor,
    geometry: AttentionGeometry,
    *,
    kernel_block_size: int,
    packing: Packing | None = None,
    blocks_outermost: bool = False,
) -> torch.Tensor:
    """The layer's KV cache as the backend's logical shape, aliasing ``raw``.

    ``blocks_outermost`` (set when the plan has Mamba layers) re-strides a
    kv-first layout so each block's K and V are contiguous, as vLLM does for
    hybrid models; for block-first layouts it changes nothing.
    """
    check_raw_buffer("raw", raw)
    check_int("kernel_block_size", kernel_block_size, minimum=1, maximum=MAX_KERNEL_BLOCK_SIZE)
    g = geometry
    name = g.layer_name
    itemsize = g.dtype.itemsize
    block_bytes = packing.block_stride_bytes if packing is not None else g.page_size_bytes
    num_blocks = _num_blocks(raw, name, block_bytes)
    kernel_bs = effective_kernel_block_size(g, kernel_block_size)
    split = g.storage_block_size // kernel_bs
    kernel_num_blocks = num_blocks * split
    shape = g.layout.kv_cache_shape(kernel_num_blocks, kernel_bs, g.num_kv_heads, g.head_size)
    block_dim = g.layout.block_dim
    per_kernel_block = math.prod(s for i, s in enumerate(shape) if i != block_dim)
    if per_kernel_block * split * itemsize != g.data_bytes:
        raise UnsupportedViewError(
            layer_name=name,
            reason=(
                f"layout {g.layout.value} holds {per_kernel_block * split * itemsize} bytes per "
                f"block but the spec's page holds {g.data_bytes} bytes (K and V of different "
                "widths, or per-token quantisation scales, need a backend-specific layout)"
            ),
        )
    order = g.layout.stride_order
    inv = inverse_permutation(order)
    physical = tuple(shape[o] for o in order)
    strides = list(contiguous_strides(physical))
    storage_offset_bytes = 0
    padded = g.page_size_bytes != g.data_bytes
    if packing is not None or padded:
        what = "packed blocks" if packing is not None else "padded pages"
        if block_dim != 0:
            raise LayoutCannotExpressPageError(
                layer_name=name,
                layout=g.layout.value,
                reason=f"{what} need the block dimension first",
            )
        if split != 1:
            raise LayoutCannotExpressPageError(
                layer_name=name,
                layout=g.layout.value,
                reason=(
                    f"{what} cannot be split into {split} kernel blocks of {kernel_bs} tokens; "
                    "use the manager's block size as the kernel block size"
                ),
            )
        if packing is not None and packing.offset_bytes + g.page_size_bytes > block_bytes:
            raise LayoutCannotExpressPageError(
                layer_name=name,
                layout=g.layout.value,
                reason=(
                    f"a page of {g.page_size_bytes} bytes at offset {packing.offset_bytes} "
                    f"overruns the block stride of {block_bytes} bytes"
                ),
            )
        _require_aligned(name, "block stride", block_bytes, itemsize)
        storage_offset_bytes = packing.offset_bytes if packing is not None else 0
        _require_aligned(name, "offset", storage_offset_bytes, itemsize)
        strides[inv[block_dim]] = block_bytes // itemsize
    elif blocks_outermost and block_dim != 0:
        # (2, blocks, ...) with each block's K then V contiguous.
        hidden = math.prod(shape[2:])
        strides[inv[0]] = hidden
        strides[inv[1]] = 2 * hidden
    else:
        return raw.view(g.dtype).view(physical).permute(*inv)
    typed = raw.view(g.dtype)
    return torch.as_strided(
        typed, physical, tuple(strides), storage_offset_bytes // itemsize
    ).permute(*inv)


@typed
def mamba_state_views(
    raw: torch.Tensor, geometry: MambaGeometry, *, packing: Packing | None = None
) -> tuple[torch.Tensor, ...]:
    """The layer's state tensors, ``(num_blocks, *shape_i)`` each, aliasing ``raw``."""
    check_raw_buffer("raw", raw)
    g = geometry
    name = g.layer_name
    block_bytes = packing.block_stride_bytes if packing is not None else g.page_size_bytes
    num_blocks = _num_blocks(raw, name, block_bytes)
    state_bytes = sum(math.prod(s) * d.itemsize for s, d in zip(g.shapes, g.dtypes, strict=True))
    base = packing.offset_bytes if packing is not None else 0
    if state_bytes > g.page_size_bytes or (
        packing is not None and base + g.page_size_bytes > block_bytes
    ):
        raise LayoutCannotExpressPageError(
            layer_name=name,
            layout="mamba",
            reason=(
                f"states of {state_bytes} bytes at offset {base} do not fit a page of "
                f"{g.page_size_bytes} bytes in blocks of {block_bytes} bytes"
            ),
        )
    views = []
    offset = base
    for shape, dtype in zip(g.shapes, g.dtypes, strict=True):
        itemsize = dtype.itemsize
        _require_aligned(name, "page stride", block_bytes, itemsize)
        _require_aligned(name, "state offset", offset, itemsize)
        _require_aligned(name, "buffer", raw.numel(), itemsize)
        views.append(
            torch.as_strided(
                raw.view(dtype),
                (num_blocks, *shape),
                (block_bytes // itemsize, *contiguous_strides(shape)),
                offset // itemsize,
            )
        )
        offset += math.prod(shape) * itemsize
    return tuple(views)


def byte_offset(view: torch.Tensor) -> int:
    """Bytes from the start of the view's storage to its first element (any device)."""
    check_tensor("view", view)
    return int(view.storage_offset()) * view.element_size()


def view_geometry(view: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(shape, stride, storage_offset)`` of a view, as plain ints."""
    return tuple(view.shape), tuple(view.stride()), int(view.storage_offset())


def describe(views: Sequence[torch.Tensor]) -> list[str]:
    """One line per view: dtype, shape, stride and byte offset (for reports and benches)."""
    return [
        f"{str(v.dtype).removeprefix('torch.')} {list(v.shape)} stride={list(v.stride())} "
        f"offset={byte_offset(v)}B"
        for v in views
    ]
