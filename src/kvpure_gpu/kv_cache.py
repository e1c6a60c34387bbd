"""A frozen plan becomes tensors: buffers plus one view (or state tuple) per layer.

:func:`materialize_kv_cache` allocates the buffers and calls
:func:`bind_kv_cache_views`, which reads every layer's spec off its group
(the inner spec for a uniform-type group), checks that the plan fits the
specs, and builds the layer's view by its layout. Nothing is decided here:
the layouts and kernel block sizes are the caller's (defaults: FlashAttention
NHD for attention, the MLA layout for MLA specs, the group's block size).

A vLLM 0.33+ plan (one backing allocation, tensors with a ``layer_stride``)
is viewed as vLLM 0.34 does, in its plan's LBNHC layout
(:mod:`kvpure_gpu.single_backing`); its layers have ``layout=None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import torch

from kvpure.block_table import BlockTableLayout, select_common_block_size
from kvpure.errors import InvalidFieldError
from kvpure.runtime_types import typed
from kvpure.specs import (
    AttentionSpec,
    EncoderOnlyAttentionSpec,
    KVCacheSpec,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    UniformTypeKVCacheSpecs,
)
from kvpure.specs.kv_cache_config import KVCacheConfig
from kvpure_gpu.allocate import DeviceLike, KVCacheBuffers, allocate_kv_cache_buffers
from kvpure_gpu.checks import check_kernel_block_sizes, check_layouts
from kvpure_gpu.dtypes import to_torch_dtype
from kvpure_gpu.errors import LayerWithoutGroupError, LayerWithoutTensorError, UnsupportedViewError
from kvpure_gpu.layouts import KVCacheLayout
from kvpure_gpu.single_backing import single_backing_views, uses_single_backing
from kvpure_gpu.views import (
    AttentionGeometry,
    MambaGeometry,
    Packing,
    attention_view,
    effective_kernel_block_size,
    mamba_state_views,
)

_VIEWABLE_QUANT_MODES = (KVQuantMode.NONE, KVQuantMode.FP8_PER_TENSOR)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerKVCache:
    """One layer's cache: an attention view, or a Mamba layer's state tensors.

    ``tensor`` is set for attention layers (``layout`` says how it is
    shaped), ``states`` for Mamba layers. ``kernel_block_size`` is the block
    size the view is shaped with. In a single-backing (vLLM 0.33+) plan every
    layer has a ``tensor`` in the LBNHC layout (a Mamba layer's is int8
    ``[B, 1, 1, state bytes]``) and ``layout`` is None.
    """

    layer_name: str
    group_index: int
    buffer_index: int
    spec: KVCacheSpec
    layout: KVCacheLayout | None
    kernel_block_size: int
    tensor: torch.Tensor | None = None
    states: tuple[torch.Tensor, ...] = ()

    @property
    def views(self) -> tuple[torch.Tensor, ...]:
        """Every tensor of this layer (the view, or the states)."""
        return (self.tensor,) if self.tensor is not None else self.states

    @property
    def backend(self) -> str | None:
        """The vLLM backend whose layout the view has (None for Mamba)."""
        return None if self.layout is None else self.layout.backend_name


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCache:
    """A plan's buffers and every layer's views into them."""

    kv_cache_config: KVCacheConfig
    buffers: KVCacheBuffers
    layers: Mapping[str, LayerKVCache]
    kernel_block_sizes: tuple[int, ...]

    def kv_caches(self) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """vLLM's ``kv_caches`` dict: layer name -> view, or list of Mamba states."""
        out: dict[str, torch.Tensor | list[torch.Tensor]] = {}
        for name, layer in self.layers.items():
            out[name] = layer.tensor if layer.tensor is not None else list(layer.states)
        return out

    def block_table_layouts(
        self,
        *,
        dcp_world_size: int = 1,
        dcp_rank: int = 0,
        cp_kv_cache_interleave_size: int = 1,
    ) -> tuple[BlockTableLayout, ...]:
        """One block-table layout per KV-cache group, with this cache's kernel block sizes."""
        return tuple(
            BlockTableLayout(
                block_size=group.kv_cache_spec.block_size,
                kernel_block_size=kernel,
                dcp_world_size=dcp_world_size,
                dcp_rank=dcp_rank,
                cp_kv_cache_interleave_size=cp_kv_cache_interleave_size,
            )
            for group, kernel in zip(
                self.kv_cache_config.kv_cache_groups, self.kernel_block_sizes, strict=True
            )
        )


@typed
def default_layout(spec: AttentionSpec, attention_layout: KVCacheLayout) -> KVCacheLayout:
    """MLA specs take the MLA layout; every other attention spec ``attention_layout``."""
    if isinstance(spec, (MLAAttentionSpec, SlidingWindowMLASpec)):
        return KVCacheLayout.MLA
    return attention_layout


@typed
def attention_geometry(
    layer_name: str, spec: AttentionSpec, layout: KVCacheLayout
) -> AttentionGeometry:
    """What ``spec`` says about one page of ``layer_name``, for its view."""
    if spec.kv_quant_mode not in _VIEWABLE_QUANT_MODES:
        raise UnsupportedViewError(
            layer_name=layer_name,
            reason=(
                f"kv_quant_mode {spec.kv_quant_mode.name} keeps scales or packed values in the "
                "page; only NONE and FP8_PER_TENSOR caches have a plain view"
            ),
        )
    dtype = to_torch_dtype(spec.dtype)
    head_size = spec.head_size
    cache_dtype_str = getattr(spec, "cache_dtype_str", None)
    if cache_dtype_str == "fp8_ds_mla":
        # One packed entry per token: the backend shape's last dim is its width.
        head_size = spec.real_page_size_bytes // (spec.storage_block_size * dtype.itemsize)
    return AttentionGeometry(
        layer_name=layer_name,
        layout=layout,
        dtype=dtype,
        block_size=spec.block_size,
        storage_block_size=spec.storage_block_size,
        num_kv_heads=spec.num_kv_heads,
        head_size=head_size,
        data_bytes=spec.unpadded_page_size_bytes,
        page_size_bytes=spec.page_size_bytes,
    )


@typed
def mamba_geometry(layer_name: str, spec: MambaSpec) -> MambaGeometry:
    """What ``spec`` says about one page of a Mamba layer."""
    return MambaGeometry(
        layer_name=layer_name,
        shapes=tuple(tuple(s) for s in spec.shapes),
        dtypes=tuple(to_torch_dtype(d) for d in spec.dtypes),
        page_size_bytes=spec.page_size_bytes,
    )


def _layer_specs(config: KVCacheConfig) -> list[tuple[str, int, KVCacheSpec]]:
    out = []
    for index, group in enumerate(config.kv_cache_groups):
        spec = group.kv_cache_spec
        for name in group.layer_names:
            layer_spec = (
                spec.kv_cache_specs[name] if isinstance(spec, UniformTypeKVCacheSpecs) else spec
            )
            out.append((name, index, layer_spec))
    return out


@typed
def select_kernel_block_sizes(
    kv_cache_config: KVCacheConfig,
    *,
    attention_layout: KVCacheLayout = KVCacheLayout.FLASH_ATTN_NHD,
    layouts: Mapping[str, KVCacheLayout] | None = None,
) -> tuple[int, ...]:
    """One kernel block size per group, as vLLM's ``prepare_kernel_block_sizes``.

    Attention groups take :func:`kvpure.block_table.select_common_block_size`
    over their layers' layouts; Mamba and encoder-only groups keep their
    block size.
    """
    overrides = check_layouts(layouts)
    sizes = []
    for group in kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        supported = []
        for name in group.layer_names:
            layer_spec = (
                spec.kv_cache_specs[name] if isinstance(spec, UniformTypeKVCacheSpecs) else spec
            )
            if isinstance(layer_spec, AttentionSpec) and not isinstance(
                layer_spec, EncoderOnlyAttentionSpec
            ):
                layout = overrides.get(name, default_layout(layer_spec, attention_layout))
                supported.append(layout.supported_kernel_block_sizes)
        sizes.append(select_common_block_size(spec.block_size, supported))
    return tuple(sizes)


@typed
def bind_kv_cache_views(
    kv_cache_config: KVCacheConfig,
    buffers: KVCacheBuffers,
    *,
    attention_layout: KVCacheLayout = KVCacheLayout.FLASH_ATTN_NHD,
    layouts: Mapping[str, KVCacheLayout] | None = None,
    kernel_block_sizes: Sequence[int] | None = None,
) -> KVCache:
    """Every layer's view into ``buffers`` (made by :func:`allocate_kv_cache_buffers`).

    ``layouts`` overrides the layout of named layers; ``kernel_block_sizes``
    has one entry per KV-cache group (default: each group's block size).
    """
    groups = kv_cache_config.kv_cache_groups
    if kernel_block_sizes is None:
        kernels = tuple(g.kv_cache_spec.block_size for g in groups)
    else:
        kernels = check_kernel_block_sizes(kernel_block_sizes, len(groups))
    overrides = check_layouts(layouts)
    if uses_single_backing(kv_cache_config):
        if overrides:
            raise InvalidFieldError(
                field="layouts",
                value=sorted(overrides),
                reason="a single-backing (vLLM 0.33+) plan is laid out LBNHC; pass no layouts",
            )
        return _bind_single_backing(kv_cache_config, buffers, kernels)
    layer_specs = _layer_specs(kv_cache_config)
    grouped = {name for name, _, _ in layer_specs}
    for t_index, tensor in enumerate(kv_cache_config.kv_cache_tensors):
        for name in tensor.shared_by:
            if name not in grouped:
                raise LayerWithoutGroupError(layer_name=name, tensor_index=t_index)
    has_mamba = any(isinstance(g.kv_cache_spec, MambaSpec) for g in groups)
    layers: dict[str, LayerKVCache] = {}
    for name, g_index, spec in layer_specs:
        if name not in buffers.layer_buffer_index:
            if isinstance(spec, EncoderOnlyAttentionSpec):
                continue  # runner-only layers hold no KV cache
            raise LayerWithoutTensorError(layer_name=name)
        b_index = buffers.layer_buffer_index[name]
        raw = buffers.buffers[b_index]
        tensor = kv_cache_config.kv_cache_tensors[buffers.layer_tensor_index[name]]
        packing = (
            Packing(offset_bytes=tensor.offset, block_stride_bytes=tensor.block_stride)
            if tensor.block_stride > 0
            else None
        )
        if isinstance(spec, MambaSpec):
            states = mamba_state_views(raw, mamba_geometry(name, spec), packing=packing)
            layers[name] = LayerKVCache(
                layer_name=name,
                group_index=g_index,
                buffer_index=b_index,
                spec=spec,
                layout=None,
                kernel_block_size=spec.block_size,
                states=states,
            )
        elif isinstance(spec, AttentionSpec):
            layout = overrides.get(name, default_layout(spec, attention_layout))
            geometry = attention_geometry(name, spec, layout)
            view = attention_view(
                raw,
                geometry,
                kernel_block_size=kernels[g_index],
                packing=packing,
                blocks_outermost=has_mamba,
            )
            layers[name] = LayerKVCache(
                layer_name=name,
                group_index=g_index,
                buffer_index=b_index,
                spec=spec,
                layout=layout,
                kernel_block_size=effective_kernel_block_size(geometry, kernels[g_index]),
                tensor=view,
            )
        else:
            raise UnsupportedViewError(
                layer_name=name, reason=f"spec type {type(spec).__name__} has no view"
            )
    return KVCache(
        kv_cache_config=kv_cache_config,
        buffers=buffers,
        layers=MappingProxyType(layers),
        kernel_block_sizes=kernels,
    )


def _bind_single_backing(
    kv_cache_config: KVCacheConfig, buffers: KVCacheBuffers, kernels: tuple[int, ...]
) -> KVCache:
    views = single_backing_views(kv_cache_config, buffers.buffers[0], kernels)
    layers: dict[str, LayerKVCache] = {}
    for name, g_index, spec in _layer_specs(kv_cache_config):
        if name not in views:
            if isinstance(spec, EncoderOnlyAttentionSpec):
                continue  # runner-only layers hold no KV cache
            raise LayerWithoutTensorError(layer_name=name)
        view_group, _, view = views[name]
        if view_group != g_index:
            raise LayerWithoutGroupError(
                layer_name=name, tensor_index=buffers.layer_tensor_index[name]
            )
        layers[name] = LayerKVCache(
            layer_name=name,
            group_index=g_index,
            buffer_index=0,
            spec=spec,
            layout=None,
            kernel_block_size=kernels[g_index],
            tensor=view,
        )
    return KVCache(
        kv_cache_config=kv_cache_config,
        buffers=buffers,
        layers=MappingProxyType(layers),
        kernel_block_sizes=kernels,
    )


@typed
def materialize_kv_cache(
    kv_cache_config: KVCacheConfig,
    device: DeviceLike = "cuda",
    *,
    zero_fill: bool = True,
    attention_layout: KVCacheLayout = KVCacheLayout.FLASH_ATTN_NHD,
    layouts: Mapping[str, KVCacheLayout] | None = None,
    kernel_block_sizes: Sequence[int] | None = None,
) -> KVCache:
    """Allocate ``kv_cache_config``'s buffers on ``device`` and view every layer."""
    check_layouts(layouts)
    if kernel_block_sizes is not None:
        check_kernel_block_sizes(kernel_block_sizes, len(kv_cache_config.kv_cache_groups))
    buffers = allocate_kv_cache_buffers(kv_cache_config, device, zero_fill=zero_fill)
    return bind_kv_cache_views(
        kv_cache_config,
        buffers,
        attention_layout=attention_layout,
        layouts=layouts,
        kernel_block_sizes=kernel_block_sizes,
    )
