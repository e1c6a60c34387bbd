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


class UnknownHashAlgorithmError(KVPureValueError):
    """A hash function name vLLM does not know (vLLM raises ValueError).

    ``name`` is what was given, ``valid_names`` the names vLLM accepts for
    ``--prefix-caching-hash-algo``.
    """

    def __init__(self, *, name: str, valid_names: tuple[str, ...]) -> None:
        super().__init__(
            f"Unsupported hash function: {name!r}; prefix_caching_hash_algo must be one of "
            f"{', '.join(valid_names)}"
        )
        self.name = name
        self.valid_names = valid_names


class UnknownHashProfileError(KVPureValueError):
    """A vLLM hashing profile name kvpure does not have."""

    def __init__(self, *, name: str, valid_names: tuple[str, ...]) -> None:
        super().__init__(
            f"unknown hashing profile {name!r}; choose one of {', '.join(valid_names)}"
        )
        self.name = name
        self.valid_names = valid_names


class RandomNoneHashNotRequestedError(KVPureValueError):
    """No seed was given and the profile's rule for that case is a random NONE_HASH.

    vLLM draws such a NONE_HASH from ``os.urandom`` in each process, so no
    other process can reproduce its hashes. kvpure does that only when asked.
    """

    def __init__(self, *, profile: str, algorithm: str) -> None:
        super().__init__(
            f"profile {profile} with algorithm {algorithm} and no seed gives a random "
            "NONE_HASH (vLLM uses os.urandom when PYTHONHASHSEED is unset); pass the "
            "server's PYTHONHASHSEED as seed (--seed), or ask for a random NONE_HASH "
            "explicitly (random_none_hash=True, --random-none-hash)"
        )
        self.profile = profile
        self.algorithm = algorithm


class BlockSizeMismatchError(KVPureValueError):
    """Block hashes cannot be viewed at the requested block size (vLLM asserts)."""

    def __init__(self, *, hash_block_size: int, block_size: int, reason: str) -> None:
        super().__init__(
            f"cannot view block hashes computed at hash_block_size={hash_block_size} "
            f"tokens as block_size={block_size} tokens: {reason}"
        )
        self.hash_block_size = hash_block_size
        self.block_size = block_size
        self.reason = reason


class GroupIdOutOfRangeError(KVPureValueError, OverflowError):
    """A KV-cache group id does not fit in 4 unsigned bytes (vLLM: OverflowError)."""

    def __init__(self, *, group_id: int) -> None:
        super().__init__(
            f"group_id={group_id} does not fit the 4-byte big-endian group id; "
            f"it must be in 0..{2**32 - 1}"
        )
        self.group_id = group_id


class CborEncodeError(KVPureValueError):
    """A payload holds a value the canonical CBOR encoder does not encode."""

    def __init__(self, *, type_name: str, reason: str) -> None:
        super().__init__(f"cannot CBOR-encode a value of type {type_name}: {reason}")
        self.type_name = type_name
        self.reason = reason


# ---------------------------------------------------------------------------
# Spec and planning errors
# ---------------------------------------------------------------------------
# (owned by the planning area)


class SpecMergeError(KVPureValueError):
    """Layer specs cannot share one KV cache group (vLLM: AssertionError in merge).

    ``spec_types`` names the spec classes involved and ``reason`` says which
    fields disagree.
    """

    def __init__(self, *, reason: str, spec_types: tuple[str, ...]) -> None:
        super().__init__(f"{reason} (spec types: {', '.join(spec_types)})")
        self.reason = reason
        self.spec_types = spec_types


class WindowSizeMismatchError(KVPureValueError):
    """Layers of one group declare different windows or chunk sizes (vLLM: ValueError)."""

    def __init__(self, *, field: str, sizes: tuple[int, ...]) -> None:
        # vLLM's exact text; the differing sizes are in ``field`` and ``sizes``.
        super().__init__(
            "All attention layers in the same KV cache group must have the same window size."
        )
        self.field = field
        self.sizes = sizes


class UnregisteredSpecError(KVPureValueError):
    """A layer's spec type has no KV cache manager (vLLM: ValueError from the registry).

    Encoder-only layers land here: vLLM's runner adds them after planning.
    """

    def __init__(self, *, layer_name: str, spec_type: str) -> None:
        # vLLM's text, which prints the class as vLLM's module holds it.
        super().__init__(
            f"Unsupported KV cache spec type for layer {layer_name}: "
            f"<class 'vllm.v1.kv_cache_interface.{spec_type}'>. Please register it using "
            "@register_kv_cache_spec decorator."
        )
        self.layer_name = layer_name
        self.spec_type = spec_type


class WorkerSpecMismatchError(KVPureValueError):
    """The same layer has different specs on two workers (vLLM: AssertionError)."""

    def __init__(self, *, layer_name: str, first_worker: int, other_worker: int) -> None:
        super().__init__(
            f"The KV cache specs for layer {layer_name} differ between worker "
            f"{first_worker} and worker {other_worker}. This is not supported: every "
            "worker must declare the same spec for a layer it shares."
        )
        self.layer_name = layer_name
        self.first_worker = first_worker
        self.other_worker = other_worker


class PageSizeUnificationError(KVPureNotImplementedError):
    """A layer's page cannot be scaled or padded to the largest page (vLLM: NotImplementedError)."""

    def __init__(self, *, layer_name: str, page_size_bytes: int, max_page_size_bytes: int) -> None:
        super().__init__(
            f"Layer {layer_name}: page size is not divisible by the maximum page size "
            "and cannot be padded. Padding is only supported for attention layers whose "
            "backend indexes KV pages by the block stride (indexes_kv_by_block_stride "
            "is True)."
        )
        self.layer_name = layer_name
        self.page_size_bytes = page_size_bytes
        self.max_page_size_bytes = max_page_size_bytes


class HybridUnificationError(KVPureValueError):
    """With the hybrid manager disabled, the specs could not be made one type (vLLM: ValueError)."""

    def __init__(self, *, spec_types: tuple[str, ...]) -> None:
        # vLLM's exact text; the spec types involved are in ``spec_types``.
        super().__init__(
            "Hybrid KV cache manager is disabled but failed to convert the KV cache "
            "specs to one unified type."
        )
        self.spec_types = spec_types


class NoKVCacheMemoryError(KVPureValueError):
    """A worker has no memory at all for KV cache blocks (vLLM: ValueError)."""

    def __init__(self, *, available_bytes: int) -> None:
        super().__init__(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine (this flag also "
            "controls CPU memory reservation on the CPU backend, despite its name). See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
            "details."
        )
        self.available_bytes = available_bytes


class InsufficientKVCacheMemoryError(KVPureValueError):
    """One request of max_model_len tokens does not fit (vLLM: ValueError).

    ``needed_bytes`` and ``available_bytes`` are the worker's numbers and
    ``estimated_max_model_len`` the longest length that would fit (0 if none).
    """

    def __init__(
        self,
        *,
        max_model_len: int,
        needed_bytes: int,
        available_bytes: int,
        estimated_max_model_len: int,
    ) -> None:
        estimated = ""
        if estimated_max_model_len > 0:
            estimated = (
                "Based on the available memory, the estimated maximum model length is "
                f"{estimated_max_model_len}. "
            )
        super().__init__(
            "To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({format_gib(needed_bytes)} GiB KV cache is needed, "
            "which is larger than the available KV cache memory "
            f"({format_gib(available_bytes)} GiB). {estimated}Try increasing "
            "`gpu_memory_utilization` (which also controls CPU memory on the CPU "
            "backend) or decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
            "details."
        )
        self.max_model_len = max_model_len
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.estimated_max_model_len = estimated_max_model_len


class AutoFitError(KVPureValueError):
    """Auto-fitting max_model_len found no length that fits (vLLM: ValueError)."""

    def __init__(self, *, available_bytes: tuple[int, ...]) -> None:
        super().__init__(
            "Cannot auto-fit max_model_len: not enough GPU memory available to serve "
            "even a single token. Try increasing `gpu_memory_utilization`."
        )
        self.available_bytes = available_bytes


class PrefixMatchUnitError(KVPureValueError):
    """Some group block size is not a multiple of the hash block size (vLLM: ValueError)."""

    def __init__(self, *, prefix_match_unit: int, group_block_sizes: tuple[int, ...]) -> None:
        super().__init__(
            f"Invalid prefix_match_unit={prefix_match_unit}; all KV cache group block "
            "sizes must be divisible by prefix_match_unit. Got group block "
            f"sizes={list(group_block_sizes)}."
        )
        self.prefix_match_unit = prefix_match_unit
        self.group_block_sizes = group_block_sizes


class ContextParallelUnsupportedError(KVPureValueError):
    """A spec cannot be budgeted under decode context parallelism (vLLM: AssertionError)."""

    def __init__(self, *, spec_type: str, decode_context_parallel_size: int) -> None:
        super().__init__(
            f"DCP not support sliding window: {spec_type} needs "
            f"decode_context_parallel_size == 1, got {decode_context_parallel_size}."
        )
        self.spec_type = spec_type
        self.decode_context_parallel_size = decode_context_parallel_size


class PlanningAssertionError(KVPureValueError):
    """An invariant vLLM only asserts does not hold for this input (vLLM: AssertionError).

    ``check`` names the invariant (e.g. ``"uniform_page_size"``).
    """

    def __init__(self, *, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check
        self.detail = detail


def format_gib(num_bytes: int) -> str:
    """Bytes as GiB the way vLLM prints them: ``str(round(b / 2**30, 2))``."""
    return f"{round(num_bytes / 2**30, 2)}"


# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------
# (owned by the free-queue area)


class BlockHashAlreadySetError(KVPureValueError):
    """``set_block_hash`` was called on a block that already carries a hash.

    vLLM asserts here. ``block_id`` names the block; call ``reset_hash()``
    first (the pool does so when it evicts the block).
    """

    def __init__(self, *, block_id: int, reason: str) -> None:
        super().__init__(f"block {block_id}: {reason}")
        self.block_id = block_id
        self.reason = reason


class NotEnoughFreeBlocksError(KVPureValueError):
    """More blocks were popped than the free block queue holds.

    ``num_requested`` blocks were asked for, ``num_free_blocks`` were free.
    """

    def __init__(self, *, num_requested: int, num_free_blocks: int) -> None:
        super().__init__(
            f"popleft_n({num_requested}) asks for {num_requested} blocks but only "
            f"{num_free_blocks} free blocks are in the queue; pop at most "
            f"{num_free_blocks} blocks or free some first"
        )
        self.num_requested = num_requested
        self.num_free_blocks = num_free_blocks


class NoFreeBlocksError(NotEnoughFreeBlocksError):
    """``popleft()`` on an empty free block queue (vLLM's ValueError message)."""

    def __init__(self) -> None:
        KVPureValueError.__init__(self, "No free blocks available")
        self.num_requested = 1
        self.num_free_blocks = 0


class FreeBlockQueueMisuseError(KVPureRuntimeError):
    """A block was given to a free block queue operation it does not fit.

    ``operation`` names the queue method, ``block_id`` the block, and
    ``reason`` says what is wrong with it. The queue is left unchanged.
    """

    def __init__(self, *, operation: str, block_id: int, reason: str) -> None:
        super().__init__(f"{operation}() called on block {block_id}: {reason}")
        self.operation = operation
        self.block_id = block_id
        self.reason = reason


class BlockNotQueuedError(FreeBlockQueueMisuseError):
    """``remove()`` of a block that is in no free block queue (vLLM: RuntimeError)."""


class BlockAlreadyQueuedError(FreeBlockQueueMisuseError):
    """A block that already is in this queue (or twice in one batch) was added again."""


class BlockInOtherQueueError(FreeBlockQueueMisuseError):
    """A block that is linked into a different free block queue was passed."""


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


class NoCommonKernelBlockSizeError(KVPureValueError):
    """No kernel block size divides the manager's block size and suits every backend."""

    def __init__(self, *, block_size: int) -> None:
        super().__init__(
            f"no kernel block size that divides the block size {block_size} tokens is "
            "supported by every attention backend of the group; choose a block size the "
            "backends support (FlashAttention: a multiple of 16)"
        )
        self.block_size = block_size


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


# ---------------------------------------------------------------------------
# Interop and model-config errors
# ---------------------------------------------------------------------------
# (owned by interop and the model-config reader)

# --- model-config reader (kvpure.models) -----------------------------------


class ModelConfigError(KVPureValueError):
    """A model's config.json cannot be turned into per-layer KV cache specs."""


class UnknownArchitectureError(ModelConfigError):
    """config.json names an architecture kvpure has no layer rules for.

    ``architecture`` is what config.json gave (its ``architectures`` list,
    joined) and ``supported`` lists every architecture kvpure knows.
    """

    def __init__(self, *, architecture: str, supported: tuple[str, ...]) -> None:
        super().__init__(
            f"config.json: unknown architecture {architecture!r}; supported: "
            + ", ".join(supported)
        )
        self.architecture = architecture
        self.supported = supported


class MissingConfigFieldError(ModelConfigError):
    """config.json lacks a field the architecture's layer rules need.

    ``field`` names it (dotted for nested configs, e.g. ``text_config.head_dim``)
    and ``architecture`` is the architecture that needs it.
    """

    def __init__(self, *, field: str, architecture: str) -> None:
        super().__init__(
            f"config.json: missing field {field!r}, which {architecture} needs; "
            "add it to the config"
        )
        self.field = field
        self.architecture = architecture


class MissingOptionError(ModelConfigError):
    """A deployment option that has no default was not given (``option`` names it)."""

    def __init__(self, *, option: str, reason: str) -> None:
        super().__init__(f"{option} is required {reason}")
        self.option = option
        self.reason = reason
