"""The kvpure exception tree.

Every error kvpure raises derives from :class:`KVPureError`. Each leaf also
derives from the stdlib exception vLLM raises in the same situation, so code
written against vLLM keeps catching what it caught before. Where vLLM raises
``AssertionError`` for a user mistake, kvpure raises a ``ValueError`` subclass.

The inputs that caused an error are attributes of it (callers never parse the
message), and every error pickles with those attributes intact.

::

    KVPureError
    ├── KVPureValueError (ValueError)
    │   ├── InvalidFieldError            a field of an input value is out of range
    │   └── ... (the areas below add their leaves)
    ├── KVPureNotImplementedError (NotImplementedError)
    └── KVPureRuntimeError (RuntimeError)

Each area of the library keeps its leaves in its own section below.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type[KVPureError], args: tuple[Any, ...], state: dict[str, Any]) -> KVPureError:
    """Recreate an error without calling its keyword-only ``__init__``."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class KVPureError(Exception):
    """Root of every error raised by kvpure."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    @property
    def message(self) -> str:
        """The human-readable message (the first argument)."""
        return str(self.args[0]) if self.args else ""


class KVPureValueError(KVPureError, ValueError):
    """A value is wrong (vLLM raises ValueError or AssertionError here)."""


class KVPureNotImplementedError(KVPureError, NotImplementedError):
    """vLLM does not support this combination (vLLM raises NotImplementedError)."""


class KVPureRuntimeError(KVPureError, RuntimeError):
    """A state-dependent operation failed (vLLM raises RuntimeError)."""


class InvalidFieldError(KVPureValueError):
    """A field of an input value is missing, of the wrong kind, or out of range.

    ``field`` names it (dotted for nested values), ``value`` is what was given
    and ``reason`` says what was expected.
    """

    def __init__(self, *, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}: {reason} (got {value!r})")
        self.field = field
        self.value = value
        self.reason = reason


# ---------------------------------------------------------------------------
# Hashing errors
# ---------------------------------------------------------------------------
# (owned by the hashing area)


# ---------------------------------------------------------------------------
# Spec and planning errors
# ---------------------------------------------------------------------------
# (owned by the planning area)


# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------
# (owned by the free-queue area)


# ---------------------------------------------------------------------------
# GPU adapter errors
# ---------------------------------------------------------------------------
# (owned by kvpure_gpu; errors that need no torch live here)


class BlockTableRowOverflowError(KVPureValueError):
    """A request holds more manager blocks than a block-table row has room for."""

    def __init__(self, *, request_index: int, num_blocks: int, max_num_blocks_per_req: int) -> None:
        super().__init__(
            f"request {request_index}: {num_blocks} blocks do not fit a block-table row of "
            f"{max_num_blocks_per_req} blocks; raise max_num_blocks_per_req (max_model_len) "
            "or give the request fewer blocks"
        )
        self.request_index = request_index
        self.num_blocks = num_blocks
        self.max_num_blocks_per_req = max_num_blocks_per_req


class TokenPositionOutOfRangeError(KVPureValueError):
    """A token position lies beyond the blocks its request holds."""

    def __init__(self, *, position: int, block_table_column: int, num_kernel_blocks: int) -> None:
        super().__init__(
            f"token position {position} needs block-table column {block_table_column}, but the "
            f"request holds only {num_kernel_blocks} kernel blocks; allocate more blocks first"
        )
        self.position = position
        self.block_table_column = block_table_column
        self.num_kernel_blocks = num_kernel_blocks


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


class UnsupportedViewError(KVPureNotImplementedError):
    """kvpure_gpu has no view for this spec (a kind of spec or quantisation vLLM lays out
    with backend-specific code)."""

    def __init__(self, *, layer_name: str, reason: str) -> None:
        super().__init__(f"layer {layer_name!r}: no KV-cache view for it: {reason}")
        self.layer_name = layer_name
        self.reason = reason


# ---------------------------------------------------------------------------
# Interop and model-config errors
# ---------------------------------------------------------------------------
# (owned by interop and the model-config reader)
