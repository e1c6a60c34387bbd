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

The core's leaves are in sections below, one per area; ``kvpure.models``,
``kvpure.cli`` and ``kvpure_gpu`` keep theirs in their own ``errors`` modules,
under the same root.
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


class KVPureTypeError(KVPureError, TypeError):
    """An argument of the wrong type (a str where an int is meant, a bool for a count).

    Raised by the runtime checks at the public boundary (``kvpure.runtime_types``),
    in users' own processes; the message names the parameter, what it expected
    and what it got.
    """


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


class FieldIndexError(InvalidFieldError, IndexError):
    """An index out of a sequence's range (an :class:`InvalidFieldError` that is also an
    ``IndexError``, as Python raises for a list)."""


class FieldTypeError(InvalidFieldError, TypeError):
    """An argument or field of the wrong type (a str for an int, None for bytes, ...).

    An :class:`InvalidFieldError` (``field``, ``value``, ``reason``) that is also a
    ``TypeError``, as Python raises for a wrong argument type.
    """


# ---------------------------------------------------------------------------
# Specs and planning errors (hashing keeps its own in kvpure.hashing.errors)
# ---------------------------------------------------------------------------


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
            "The KV cache specs for the same layer are different across workers: "
            f"layer {layer_name} differs between worker {first_worker} and worker "
            f"{other_worker}. This is not supported: every worker must declare the same "
            "spec for a layer it shares."
        )
        self.layer_name = layer_name
        self.first_worker = first_worker
        self.other_worker = other_worker


class PageSizeUnificationError(KVPureNotImplementedError):
    """A layer's page cannot be scaled or padded to the largest page (vLLM: NotImplementedError)."""

    def __init__(
        self,
        *,
        layer_name: str,
        page_size_bytes: int,
        max_page_size_bytes: int,
        pads_any_attention_page: bool = False,
    ) -> None:
        # vLLM 0.33+ pads any non-MLA attention page (its message says so); 0.26 only
        # a backend that indexes KV pages by the block stride.
        which = (
            "non-MLA attention layers."
            if pads_any_attention_page
            else "attention layers whose backend indexes KV pages by the block stride "
            "(indexes_kv_by_block_stride is True)."
        )
        super().__init__(
            f"Layer {layer_name}: page size is not divisible by the maximum page size "
            f"and cannot be padded. Padding is only supported for {which}"
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


class HybridPromotionError(KVPureValueError):
    """vLLM 0.33+: with the hybrid manager disabled, window and chunk layers could not be
    promoted to one type (``_promote_local_kv_cache_specs``; vLLM: ValueError)."""

    def __init__(self) -> None:
        super().__init__("Failed to promote local KV cache specs to one unified type.")


class NoKVCacheMemoryError(KVPureValueError):
    """A worker has no memory at all for KV cache blocks (vLLM: ValueError)."""

    def __init__(self, *, available_bytes: int, hint: str | None = None) -> None:
        # ``hint``: vLLM 0.34's ``_more_kv_cache_memory_hint`` (None: 0.26/0.33's text,
        # which 0.34's reproduces without the extensible KV cache).
        hint = hint or (
            "Try increasing `gpu_memory_utilization` when initializing the engine (this "
            "flag also controls CPU memory reservation on the CPU backend, despite its name)."
        )
        super().__init__(
            f"No available memory for the cache blocks. {hint} See "
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
        hint: str | None = None,
    ) -> None:
        estimated = ""
        if estimated_max_model_len > 0:
            estimated = (
                "Based on the available memory, the estimated maximum model length is "
                f"{estimated_max_model_len}. "
            )
        # 0.34 (``hint`` given): the hint, then "Decreasing `max_model_len` ...".
        advice = (
            f"{hint} Decreasing `max_model_len` also reduces what is needed."
            if hint
            else "Try increasing `gpu_memory_utilization` (which also controls CPU memory "
            "on the CPU backend) or decreasing `max_model_len` when initializing the engine."
        )
        super().__init__(
            "To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({format_gib(needed_bytes)} GiB KV cache is needed, "
            "which is larger than the available KV cache memory "
            f"({format_gib(available_bytes)} GiB). {estimated}{advice} See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
            "details."
        )
        self.max_model_len = max_model_len
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.estimated_max_model_len = estimated_max_model_len


class AutoFitError(KVPureValueError):
    """Auto-fitting max_model_len found no length that fits (vLLM: ValueError)."""

    def __init__(self, *, available_bytes: tuple[int, ...], hint: str | None = None) -> None:
        super().__init__(
            "Cannot auto-fit max_model_len: not enough GPU memory available to serve "
            f"even a single token. {hint or 'Try increasing `gpu_memory_utilization`.'}"
        )
        self.available_bytes = available_bytes


class PrefixMatchUnitError(KVPureValueError):
    """Some group block size is not a multiple of the hash block size (vLLM: ValueError)."""

    def __init__(
        self,
        *,
        prefix_match_unit: int,
        group_block_sizes: tuple[int, ...],
        prefix_cacheable: tuple[int, ...] | None = None,
    ) -> None:
        if prefix_cacheable is None:  # vLLM 0.26
            text = (
                "all KV cache group block sizes must be divisible by prefix_match_unit. "
                f"Got group block sizes={list(group_block_sizes)}."
            )
        else:  # vLLM 0.33+: only prefix-cacheable groups are checked
            text = (
                "prefix-cacheable KV cache group block sizes must be divisible by "
                f"prefix_match_unit. Got group block sizes={list(group_block_sizes)}, "
                f"prefix-cacheable={list(prefix_cacheable)}."
            )
        super().__init__(f"Invalid prefix_match_unit={prefix_match_unit}; {text}")
        self.prefix_match_unit = prefix_match_unit
        self.group_block_sizes = group_block_sizes
        self.prefix_cacheable = prefix_cacheable


class SinglePrefixMatchUnitError(KVPureValueError):
    """vLLM 0.33+: with one KV cache group a ``prefix_match_unit`` other than the block
    size would be ignored, so it is refused (vLLM: ValueError)."""

    def __init__(self, *, prefix_match_unit: int, block_size: int) -> None:
        super().__init__(
            f"Invalid prefix_match_unit={prefix_match_unit}; with a single KV cache group, "
            f"prefix-cache hits land on the block size ({block_size}). Unset it or set it "
            f"to {block_size}."
        )
        self.prefix_match_unit = prefix_match_unit
        self.block_size = block_size


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


class NotABlockError(KVPureValueError, TypeError):
    """A free block queue was handed something that is not a ``KVCacheBlock``.

    ``operation`` names the queue method and ``item`` is what it was given; the
    queue and every block are left as they were.
    """

    def __init__(self, *, operation: str, item: object) -> None:
        super().__init__(
            f"{operation}() was given {type(item).__name__} {item!r:.40}, not a KVCacheBlock; "
            "pass the pool's KVCacheBlock objects"
        )
        self.operation = operation
        self.item = item


class BlockNotQueuedError(FreeBlockQueueMisuseError):
    """``remove()`` of a block that is in no free block queue (vLLM: RuntimeError)."""


class BlockAlreadyQueuedError(FreeBlockQueueMisuseError):
    """A block that already is in this queue (or twice in one batch) was added again."""


class BlockInOtherQueueError(FreeBlockQueueMisuseError):
    """A block that is linked into a different free block queue was passed."""


# ---------------------------------------------------------------------------
# Block tables (kvpure.block_table)
# ---------------------------------------------------------------------------


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
