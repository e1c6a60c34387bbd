"""vLLM 0.33+/0.34 plans: one backing allocation per worker, per-layer LBNHC views.

From vLLM 0.33 on a worker's ``KVCacheConfig`` describes ONE int8 allocation:
every ``KVCacheTensor`` carries the pool's ``size`` and places a (group, spec)
set of layers in it; layer ``shared_by[l]``'s page for block ``b`` starts at
``offset + l * layer_stride + b * block_stride`` bytes. Tensors of different
groups may address the same bytes (groups overlay each other: a block id
belongs to one group at a time).

As vLLM 0.34.0's ``allocate_kv_cache`` (``vllm/v1/worker/utils.py``) and
``create_kv_cache_views`` / ``compute_layout_strides``
(``vllm/v1/kv_cache_interface.py``): the buffer is allocated once and each layer
gets a strided view of logical shape ``[B, H, N, C]`` (blocks, head slots,
stored states, content), laid out LBNHC (``vllm/v1/kv_cache_layout.py``): the
block and layer strides are the plan's, inside a page N is outer to H and C
is contiguous. An attention view takes the spec's dtype on C; a Mamba view
stays int8 ``[B, 1, 1, state bytes]`` (the Mamba backend splits the states).

A plan is read as single-backing when one of its tensors has a nonzero
``layer_stride`` (0.26 plans never set one): that is the plan's own shape,
not a release switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

import torch

from kvpure.runtime_types import typed
from kvpure.specs import (
    AttentionSpec,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
    UniformTypeKVCacheSpecs,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheTensor
from kvpure_gpu.checks import check_kernel_block_sizes, check_raw_buffer
from kvpure_gpu.dtypes import to_torch_dtype
from kvpure_gpu.errors import (
    BackingSizeMismatchError,
    KernelBlockSizeError,
    LayerOutsideBackingError,
    LayerWithoutGroupError,
    LayoutCannotExpressPageError,
    UnsupportedViewError,
)

LAYOUT_NAME = "LBNHC"
"""The one layout the planner resolves for 0.34 plans (``KVCacheLayout.LBNHC``)."""

_PLAIN_QUANT_MODES = (KVQuantMode.NONE, KVQuantMode.FP8_PER_TENSOR)


@typed
def uses_single_backing(kv_cache_config: KVCacheConfig) -> bool:
    """Whether the plan is in vLLM 0.33+'s single-backing shape (a tensor has a layer stride)."""
    return any(t.layer_stride > 0 for t in kv_cache_config.kv_cache_tensors)


@typed
def backing_size(kv_cache_config: KVCacheConfig) -> int:
    """The one allocation's size in bytes; every tensor must state the same ``size``."""
    tensors = kv_cache_config.kv_cache_tensors
    if not tensors:
        return 0
    size = tensors[0].size
    for i, tensor in enumerate(tensors):
        if tensor.size != size:
            raise BackingSizeMismatchError(tensor_index=i, size=tensor.size, expected=size)
    return size


@dataclass(frozen=True, slots=True, kw_only=True)
class PageGeometry:
    """One layer's logical page ``[H, N, C]``: head slots, stored states, content bytes.

    ``dtype`` is the view's element type (None: the view stays int8).
    """

    num_heads: int
    num_states: int
    content_bytes: int
    dtype: torch.dtype | None

    @property
    def dense_bytes(self) -> int:
        """Bytes of one dense (unpadded) page."""
        return self.num_heads * self.num_states * self.content_bytes


@typed
def page_geometry(layer_name: str, spec: KVCacheSpec, kernel_block_size: int) -> PageGeometry:
    """vLLM 0.34's ``compute_layer_kv_cache_shape_bytes`` for one kernel block of ``spec``.

    Raises :class:`UnsupportedViewError` for a spec whose page kvpure cannot
    size as ``[H, N, C]`` the way vLLM does (quantised caches with scales in
    the page, compressed MLA storage, a spec kind without generic views).
    """
    if isinstance(spec, MambaSpec):
        # num_heads 1, tokens_per_state -1 (one state per block), C = the states' bytes.
        return PageGeometry(
            num_heads=spec.num_heads, num_states=1, content_bytes=spec.state_size_bytes, dtype=None
        )
    if not isinstance(spec, AttentionSpec):
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=f"spec type {type(spec).__name__} has no single-backing ({LAYOUT_NAME}) view",
        )
    if spec.kv_quant_mode not in _PLAIN_QUANT_MODES:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=(
                f"kv_quant_mode {spec.kv_quant_mode.name} keeps scales or packed values in the "
                "page; only NONE and FP8_PER_TENSOR caches have a plain view"
            ),
        )
    if spec.storage_block_size != spec.block_size or getattr(spec, "cache_dtype_str", None):
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=(
                f"{type(spec).__name__} stores {spec.storage_block_size} entries per "
                f"{spec.block_size}-token block (compressed or packed MLA); its page is laid "
                "out by backend code"
            ),
        )
    if spec.tokens_per_state < 1:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=f"tokens_per_state {spec.tokens_per_state} (several states per token)",
        )
    heads = spec.num_head_slots if spec.num_head_slots is not None else spec.num_kv_heads
    states_per_block = spec.block_size // spec.tokens_per_state
    if spec.state_content_bytes is not None:
        content = spec.state_content_bytes
    else:
        content = spec.unpadded_page_size_bytes // (heads * states_per_block)
    if heads * states_per_block * content != spec.unpadded_page_size_bytes:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=(
                f"page of {spec.unpadded_page_size_bytes} bytes is not {heads} head slots x "
                f"{states_per_block} states x {content} bytes"
            ),
        )
    dtype = to_torch_dtype(spec.dtype)
    if content % dtype.itemsize:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=f"content of {content} bytes is not whole {dtype} elements",
        )
    return PageGeometry(
        num_heads=heads,
        num_states=kernel_block_size // spec.tokens_per_state,
        content_bytes=content,
        dtype=dtype,
    )


def tensor_layer_spec(kv_cache_config: KVCacheConfig, tensor_index: int) -> tuple[int, KVCacheSpec]:
    """The group index and per-layer spec of the layers ``kv_cache_tensors[tensor_index]`` places
    (vLLM's ``layer_spec_for_tensor``: the group of its first layer)."""
    tensor = kv_cache_config.kv_cache_tensors[tensor_index]
    first = tensor.shared_by[0]
    for g_index, group in enumerate(kv_cache_config.kv_cache_groups):
        if first in group.layer_names:
            spec = group.kv_cache_spec
            if isinstance(spec, UniformTypeKVCacheSpecs):
                spec = spec.kv_cache_specs[first]
            return g_index, spec
    raise LayerWithoutGroupError(layer_name=first, tensor_index=tensor_index)


def _tensor_views(
    raw: torch.Tensor,
    tensor: KVCacheTensor,
    spec: KVCacheSpec,
    num_blocks: int,
    kernel_block_size: int,
) -> list[torch.Tensor]:
    first = tensor.shared_by[0]
    if kernel_block_size <= 0 or spec.block_size % kernel_block_size:
        raise KernelBlockSizeError(
            layer_name=first, block_size=spec.block_size, kernel_block_size=kernel_block_size
        )
    ratio = spec.block_size // kernel_block_size
    page = page_geometry(first, spec, kernel_block_size)
    block_stride = tensor.block_stride
    if ratio > 1:
        if getattr(spec, "page_size_padded", None) is not None:
            raise LayoutCannotExpressPageError(
                layer_name=first, layout=LAYOUT_NAME, reason="padded pages cannot be split"
            )
        dense = page.dense_bytes * ratio
        if block_stride != dense:
            raise LayoutCannotExpressPageError(
                layer_name=first,
                layout=LAYOUT_NAME,
                reason=(
                    f"block stride {block_stride} != dense page {dense} bytes, so a block cannot "
                    f"be split into {ratio} kernel blocks of {kernel_block_size} tokens"
                ),
            )
        block_stride //= ratio
    num_layers = len(tensor.shared_by)
    last_byte = (
        tensor.offset
        + (num_layers - 1) * tensor.layer_stride
        + (num_blocks * ratio - 1) * block_stride
        + page.dense_bytes
    )
    if num_blocks > 0 and last_byte > raw.numel():
        raise LayerOutsideBackingError(
            layer_name=tensor.shared_by[-1], end_bytes=last_byte, size_bytes=raw.numel()
        )
    c = page.content_bytes
    # LBNHC: physical order L, B, N, H, C -> byte strides of logical [L, B, H, N, C].
    strides = (tensor.layer_stride, block_stride, c, page.num_heads * c, 1)
    shape = (num_layers, num_blocks * ratio, page.num_heads, page.num_states, c)
    view_5d = torch.as_strided(
        raw, size=shape, stride=strides, storage_offset=raw.storage_offset() + tensor.offset
    )
    views = []
    for layer_index in range(num_layers):
        view = view_5d[layer_index]
        views.append(view.view(page.dtype) if page.dtype is not None else view)
    return views


@typed
def single_backing_views(
    kv_cache_config: KVCacheConfig,
    raw: torch.Tensor,
    kernel_block_sizes: Sequence[int],
) -> MappingProxyType[str, tuple[int, int, torch.Tensor]]:
    """Every layer's view into the one backing buffer ``raw``.

    Maps layer name -> ``(group index, tensor index, view)``;
    ``kernel_block_sizes`` has one entry per KV-cache group.
    """
    check_raw_buffer("raw", raw)
    kernels = check_kernel_block_sizes(kernel_block_sizes, len(kv_cache_config.kv_cache_groups))
    out: dict[str, tuple[int, int, torch.Tensor]] = {}
    for t_index, tensor in enumerate(kv_cache_config.kv_cache_tensors):
        if not tensor.shared_by:
            continue
        if tensor.host_resident:
            raise UnsupportedViewError(
                layer_name=tensor.shared_by[0],
                reason="host-resident (HiSparse) tensors address a host pool kvpure does not plan",
            )
        g_index, spec = tensor_layer_spec(kv_cache_config, t_index)
        views = _tensor_views(raw, tensor, spec, kv_cache_config.num_blocks, kernels[g_index])
        for name, view in zip(tensor.shared_by, views, strict=True):
            out[name] = (g_index, t_index, view)
    return MappingProxyType(out)


__all__ = [
    "LAYOUT_NAME",
    "PageGeometry",
    "backing_size",
    "page_geometry",
    "single_backing_views",
    "tensor_layer_spec",
    "uses_single_backing",
]
