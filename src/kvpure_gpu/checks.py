"""Checks at kvpure_gpu's public boundary: devices, layouts, kernel block sizes, tensors, sizes.

Each refuses a bad argument with a typed kvpure error naming it (issue 24): a
device torch cannot parse, a layout that is not a :class:`KVCacheLayout`, a
kernel block size that is not a positive int, a buffer that is not a tensor,
and a plan whose buffers could never fit the device (refused before any
allocation is attempted, so 10**12 blocks never reach ``torch.zeros``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.specs.kv_cache_config import KVCacheConfig
from kvpure_gpu.errors import AllocationTooLargeError, DeviceUnavailableError
from kvpure_gpu.layouts import KVCacheLayout

MAX_KERNEL_BLOCK_SIZE = 2**32
"""The largest kernel block size accepted (block sizes are bounded alike in kvpure)."""

MAX_TENSOR_BYTES = 2**62
"""The largest buffer any device is asked for: torch sizes are signed 64-bit element counts."""


def check_device(field: str, device: object) -> torch.device:
    """``device`` as a ``torch.device``; a bool, a negative index or a name torch refuses
    raises :class:`InvalidFieldError` naming ``field``."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, bool) or not isinstance(device, str | int):
        raise FieldTypeError(
            field=field, value=device, reason="must be a torch.device, a device name or an index"
        )
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise InvalidFieldError(
            field=field,
            value=device,
            reason=f"is not a device torch knows ({str(err).splitlines()[0][:120]})",
        ) from None


def check_layouts(layouts: Mapping[str, KVCacheLayout] | None) -> Mapping[str, KVCacheLayout]:
    """``layouts`` (layer name -> :class:`KVCacheLayout`), or an empty mapping for None."""
    if layouts is None:
        return {}
    for name, layout in layouts.items():
        if not isinstance(name, str):
            raise FieldTypeError(field="layouts", value=name, reason="keys must be layer names")
        if not isinstance(layout, KVCacheLayout):
            raise FieldTypeError(
                field=f"layouts[{name!r}]", value=layout, reason="must be a KVCacheLayout"
            )
    return layouts


def check_kernel_block_sizes(sizes: object, num_groups: int) -> tuple[int, ...]:
    """One positive int per KV-cache group (``kernel_block_sizes``)."""
    if isinstance(sizes, str | bytes) or not isinstance(sizes, list | tuple):
        raise FieldTypeError(
            field="kernel_block_sizes", value=sizes, reason="must be a list or tuple of ints"
        )
    for index, size in enumerate(sizes):
        check_int(f"kernel_block_sizes[{index}]", size, minimum=1, maximum=MAX_KERNEL_BLOCK_SIZE)
    if len(sizes) != num_groups:
        raise InvalidFieldError(
            field="kernel_block_sizes",
            value=tuple(sizes),
            reason=f"must have one entry per KV-cache group ({num_groups})",
        )
    return tuple(sizes)


def check_tensor(field: str, value: object) -> torch.Tensor:
    """``value`` if it is a ``torch.Tensor``."""
    if not isinstance(value, torch.Tensor):
        raise FieldTypeError(field=field, value=value, reason="must be a torch.Tensor")
    return value


def check_raw_buffer(field: str, value: object) -> torch.Tensor:
    """``value`` if it is a 1-D int8 tensor (a raw KV-cache buffer, as allocated here)."""
    raw = check_tensor(field, value)
    if raw.dtype != torch.int8 or raw.dim() != 1:
        raise InvalidFieldError(
            field=field,
            value=f"{raw.dtype} tensor of shape {tuple(raw.shape)}",
            reason="must be a 1-D torch.int8 buffer (as allocate_kv_cache_buffers makes)",
        )
    return raw


def device_capacity(device: torch.device) -> int:
    """Bytes ``device`` could ever hold: its total memory where known, else MAX_TENSOR_BYTES."""
    if device.type == "cpu":
        try:
            return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX hosts
            return MAX_TENSOR_BYTES
    if device.type == "cuda":
        try:
            index = device.index if device.index is not None else torch.cuda.current_device()
            return int(torch.cuda.get_device_properties(index).total_memory)
        except (RuntimeError, AssertionError, ValueError):  # no such GPU here
            raise DeviceUnavailableError(device=str(device)) from None
    return MAX_TENSOR_BYTES


def check_allocation(kv_cache_config: KVCacheConfig, device: torch.device, total: int) -> None:
    """Refuse, before allocating, a plan of ``total`` bytes the device cannot hold."""
    capacity = min(device_capacity(device), MAX_TENSOR_BYTES)
    if total > capacity:
        raise AllocationTooLargeError(
            device=str(device),
            num_blocks=kv_cache_config.num_blocks,
            total_bytes=total,
            capacity_bytes=capacity,
        )


__all__ = [
    "MAX_KERNEL_BLOCK_SIZE",
    "MAX_TENSOR_BYTES",
    "check_allocation",
    "check_device",
    "check_kernel_block_sizes",
    "check_layouts",
    "check_raw_buffer",
    "check_tensor",
    "device_capacity",
]
