"""Raw KV-cache buffers: one int8 buffer per KVCacheTensor, packed tensors share one.

As vLLM 0.26.0's ``_allocate_kv_cache``: every ``KVCacheTensor`` gets
``torch.zeros(size, dtype=torch.int8)`` on the device, except that all
packed tensors (``block_stride > 0``) alias a single backing buffer, made
when the first of them is seen. Zero-filling is the default (Mamba state
must start at zero); ``zero_fill=False`` uses ``torch.empty`` for callers
that fill the memory themselves.

A vLLM 0.33+ plan (its tensors have a ``layer_stride``) describes one backing
allocation: as 0.34's ``allocate_kv_cache``, it gets ONE buffer of the pool's
size and every tensor (and layer) maps to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch

from kvpure.errors import InvalidFieldError
from kvpure.runtime_types import typed
from kvpure.specs.kv_cache_config import KVCacheConfig
from kvpure_gpu.checks import check_allocation, check_device
from kvpure_gpu.errors import DeviceUnavailableError, PackedTensorMismatchError
from kvpure_gpu.single_backing import backing_size, uses_single_backing

DeviceLike = torch.device | str | int
"""A torch device or anything ``torch.device`` accepts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheBuffers:
    """The raw buffers of one plan.

    ``buffers`` holds each distinct buffer once, in first-use order;
    ``tensor_buffer_index[i]`` is the buffer of ``kv_cache_tensors[i]`` and
    ``layer_buffer_index`` the buffer of every layer a tensor is shared by.
    """

    buffers: tuple[torch.Tensor, ...]
    tensor_buffer_index: tuple[int, ...]
    layer_buffer_index: Mapping[str, int]
    layer_tensor_index: Mapping[str, int]

    @property
    def total_bytes(self) -> int:
        """Bytes held by all buffers together."""
        return sum(b.numel() for b in self.buffers)

    def buffer_of(self, layer_name: str) -> torch.Tensor:
        """The raw buffer holding ``layer_name``'s cache."""
        index = self.layer_buffer_index.get(layer_name) if isinstance(layer_name, str) else None
        if index is None:
            raise InvalidFieldError(
                field="layer_name",
                value=layer_name,
                reason=f"names no layer of these buffers ({len(self.layer_buffer_index)} layers)",
            )
        return self.buffers[index]


@typed
def require_device(device: torch.device) -> None:
    """Raise :class:`DeviceUnavailableError` unless ``device``'s backend is available."""
    if device.type in ("cpu", "meta"):
        return
    backend = getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if callable(is_available) and not is_available():
        raise DeviceUnavailableError(device=str(device))


@typed
def allocate_kv_cache_buffers(
    kv_cache_config: KVCacheConfig,
    device: DeviceLike = "cuda",
    *,
    zero_fill: bool = True,
) -> KVCacheBuffers:
    """Allocate the raw int8 buffers ``kv_cache_config`` describes on ``device``."""
    dev = check_device("device", device)
    require_device(dev)
    check_allocation(kv_cache_config, dev, planned_bytes(kv_cache_config))
    make = torch.zeros if zero_fill else torch.empty
    if uses_single_backing(kv_cache_config):
        return _single_backing_buffers(
            kv_cache_config, make(backing_size(kv_cache_config), dtype=torch.int8, device=dev)
        )
    buffers: list[torch.Tensor] = []
    tensor_index: list[int] = []
    layer_buffer: dict[str, int] = {}
    layer_tensor: dict[str, int] = {}
    packed: tuple[int, int, int] | None = None  # (buffer index, size, block stride)
    for i, tensor in enumerate(kv_cache_config.kv_cache_tensors):
        if tensor.block_stride > 0:
            if packed is None:
                buffers.append(make(tensor.size, dtype=torch.int8, device=dev))
                packed = (len(buffers) - 1, tensor.size, tensor.block_stride)
            else:
                first = tensor.shared_by[0] if tensor.shared_by else f"kv_cache_tensors[{i}]"
                if tensor.size != packed[1]:
                    raise PackedTensorMismatchError(
                        layer_name=first, field="size", value=tensor.size, expected=packed[1]
                    )
                if tensor.block_stride != packed[2]:
                    raise PackedTensorMismatchError(
                        layer_name=first,
                        field="block_stride",
                        value=tensor.block_stride,
                        expected=packed[2],
                    )
            index = packed[0]
        else:
            buffers.append(make(tensor.size, dtype=torch.int8, device=dev))
            index = len(buffers) - 1
        tensor_index.append(index)
        for layer in tensor.shared_by:
            layer_buffer[layer] = index
            layer_tensor[layer] = i
    return KVCacheBuffers(
        buffers=tuple(buffers),
        tensor_buffer_index=tuple(tensor_index),
        layer_buffer_index=MappingProxyType(layer_buffer),
        layer_tensor_index=MappingProxyType(layer_tensor),
    )


def planned_bytes(kv_cache_config: KVCacheConfig) -> int:
    """Bytes :func:`allocate_kv_cache_buffers` would allocate for ``kv_cache_config``
    (packed tensors share one buffer; a single-backing plan is one buffer)."""
    tensors = kv_cache_config.kv_cache_tensors
    if uses_single_backing(kv_cache_config):
        return backing_size(kv_cache_config)
    packed = max((t.size for t in tensors if t.block_stride > 0), default=0)
    return packed + sum(t.size for t in tensors if t.block_stride == 0)


def _single_backing_buffers(kv_cache_config: KVCacheConfig, raw: torch.Tensor) -> KVCacheBuffers:
    layer_tensor: dict[str, int] = {}
    for i, tensor in enumerate(kv_cache_config.kv_cache_tensors):
        for layer in tensor.shared_by:
            layer_tensor.setdefault(layer, i)
    return KVCacheBuffers(
        buffers=(raw,),
        tensor_buffer_index=(0,) * len(kv_cache_config.kv_cache_tensors),
        layer_buffer_index=MappingProxyType(dict.fromkeys(layer_tensor, 0)),
        layer_tensor_index=MappingProxyType(layer_tensor),
    )
