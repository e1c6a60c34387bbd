"""Errors of the GPU adapter: a plan that cannot be laid out as tensors, a device.

They share kvpure's root (:class:`kvpure.errors.KVPureError`) and need no torch.
"""

from __future__ import annotations

from kvpure.errors import (
    InvalidFieldError,
    KVPureNotImplementedError,
    KVPureRuntimeError,
    KVPureValueError,
)

__all__ = [
    "AllocationTooLargeError",
    "BackingSizeMismatchError",
    "DeviceUnavailableError",
    "KVCacheLayoutError",
    "KernelBlockSizeError",
    "LayerOutsideBackingError",
    "LayerWithoutGroupError",
    "LayerWithoutTensorError",
    "LayoutCannotExpressPageError",
    "PackedTensorMismatchError",
    "TensorSizeNotPageMultipleError",
    "UnsupportedDtypeError",
    "UnsupportedViewError",
]


class UnsupportedDtypeError(KVPureValueError):
    """A dtype has no counterpart on the other side (kvpure KVDtype <-> torch.dtype)."""

    def __init__(self, *, dtype: str, direction: str) -> None:
        super().__init__(
            f"dtype {dtype} has no {direction} counterpart; use one of kvpure.specs.KVDtype"
        )
        self.dtype = dtype
        self.direction = direction


class KVCacheLayoutError(KVPureValueError):
    """A plan does not fit its specs, so it cannot be laid out as tensors.

    ``layer_name`` names the layer; the leaves add the numbers.
    """

    layer_name: str


class LayerWithoutTensorError(KVCacheLayoutError):
    """A layer of a KV-cache group is in no KVCacheTensor's ``shared_by``."""

    def __init__(self, *, layer_name: str) -> None:
        super().__init__(
            f"layer {layer_name!r} is in a KV-cache group but in no KVCacheTensor's shared_by; "
            "the plan must give every layer a tensor"
        )
        self.layer_name = layer_name


class LayerWithoutGroupError(KVCacheLayoutError):
    """A KVCacheTensor names a layer that no KV-cache group holds."""

    def __init__(self, *, layer_name: str, tensor_index: int) -> None:
        super().__init__(
            f"layer {layer_name!r} of kv_cache_tensors[{tensor_index}] is in no KV-cache group; "
            "the plan's tensors and groups must name the same layers"
        )
        self.layer_name = layer_name
        self.tensor_index = tensor_index


class TensorSizeNotPageMultipleError(KVCacheLayoutError):
    """A layer's tensor is not a whole number of its pages (or packed blocks)."""

    def __init__(self, *, layer_name: str, size_bytes: int, page_size_bytes: int) -> None:
        super().__init__(
            f"layer {layer_name!r}: tensor of {size_bytes} bytes is not a multiple of its "
            f"page size {page_size_bytes} bytes; tensor sizes must be num_blocks * page size"
        )
        self.layer_name = layer_name
        self.size_bytes = size_bytes
        self.page_size_bytes = page_size_bytes


class PackedTensorMismatchError(KVCacheLayoutError):
    """Packed KVCacheTensors that must share one backing buffer disagree."""

    def __init__(self, *, layer_name: str, field: str, value: int, expected: int) -> None:
        super().__init__(
            f"layer {layer_name!r}: packed tensor has {field}={value} but the packed buffer has "
            f"{expected}; all packed tensors (block_stride > 0) alias one buffer and must agree"
        )
        self.layer_name = layer_name
        self.field = field
        self.value = value
        self.expected = expected


class BackingSizeMismatchError(KVCacheLayoutError):
    """A single-backing (vLLM 0.33+) plan's tensors state different backing sizes."""

    def __init__(self, *, tensor_index: int, size: int, expected: int) -> None:
        super().__init__(
            f"kv_cache_tensors[{tensor_index}]: size={size} but kv_cache_tensors[0] has "
            f"size={expected}; in a plan with layer_stride every tensor's size is the one "
            "backing allocation and must agree"
        )
        self.layer_name = f"kv_cache_tensors[{tensor_index}]"
        self.tensor_index = tensor_index
        self.size = size
        self.expected = expected


class LayerOutsideBackingError(KVCacheLayoutError):
    """A layer's last block ends past the single backing allocation."""

    def __init__(self, *, layer_name: str, end_bytes: int, size_bytes: int) -> None:
        super().__init__(
            f"layer {layer_name!r}: its last block ends at byte {end_bytes}, past the backing "
            f"allocation of {size_bytes} bytes; offset, layer_stride, block_stride and size "
            "must place every layer inside the allocation"
        )
        self.layer_name = layer_name
        self.end_bytes = end_bytes
        self.size_bytes = size_bytes


class LayoutCannotExpressPageError(KVCacheLayoutError):
    """A backend layout cannot lay out this layer's pages as one strided view.

    For example the kv-first ``(2, num_blocks, ...)`` layout with padded pages
    or packed blocks (both need the block dimension first), or kernel blocks
    smaller than a padded or packed page.
    """

    def __init__(self, *, layer_name: str, layout: str, reason: str) -> None:
        super().__init__(f"layer {layer_name!r}: layout {layout} cannot express it: {reason}")
        self.layer_name = layer_name
        self.layout = layout
        self.reason = reason


class KernelBlockSizeError(KVCacheLayoutError):
    """A kernel block size does not split a layer's blocks evenly."""

    def __init__(self, *, layer_name: str, block_size: int, kernel_block_size: int) -> None:
        super().__init__(
            f"layer {layer_name!r}: kernel block size {kernel_block_size} tokens does not divide "
            f"the block size {block_size} tokens; choose a kernel block size that divides it"
        )
        self.layer_name = layer_name
        self.block_size = block_size
        self.kernel_block_size = kernel_block_size


class DeviceUnavailableError(KVPureRuntimeError):
    """The device asked for (``cuda`` by default) is not available on this machine."""

    def __init__(self, *, device: str) -> None:
        super().__init__(
            f"device {device!r} is not available here; pass device='cpu' or device='meta' "
            "(no memory is touched on meta) or run on a machine with that device"
        )
        self.device = device


class UnsupportedViewError(KVPureNotImplementedError):
    """kvpure_gpu has no view for this spec (a kind of spec or quantisation vLLM lays out
    with backend-specific code)."""

    def __init__(self, *, layer_name: str, reason: str) -> None:
        super().__init__(f"layer {layer_name!r}: no KV-cache view for it: {reason}")
        self.layer_name = layer_name
        self.reason = reason


class AllocationTooLargeError(InvalidFieldError):
    """A plan's buffers exceed what the device could ever hold; refused before allocating.

    An :class:`~kvpure.errors.InvalidFieldError` naming ``kv_cache_config.kv_cache_tensors``
    (the sizes at fault); ``total_bytes`` is what the plan asks for and
    ``capacity_bytes`` the device's total memory (or torch's size limit).
    """

    def __init__(
        self, *, device: str, num_blocks: int, total_bytes: int, capacity_bytes: int
    ) -> None:
        super().__init__(
            field="kv_cache_config.kv_cache_tensors",
            value=f"{total_bytes} bytes for {num_blocks} blocks",
            reason=(
                f"the buffers need more than device {device!r} can hold ({capacity_bytes} "
                "bytes); plan for this device's memory (fewer blocks) or use device='meta'"
                if device != "meta"
                else f"the buffers exceed torch's size limit of {capacity_bytes} bytes"
            ),
        )
        self.device = device
        self.num_blocks = num_blocks
        self.total_bytes = total_bytes
        self.capacity_bytes = capacity_bytes
