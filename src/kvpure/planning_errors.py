"""Errors of layer specs and KV cache planning (the leaves ``kvpure.errors`` re-exports).

Grouping layers into KV cache groups, unifying their pages and budgeting the
memory raise these. Each sits under kvpure's root and also under the stdlib
exception vLLM raises; the inputs are attributes. Import them from
``kvpure.errors`` (or from here); they are the same class objects.
"""

from __future__ import annotations

from kvpure.error_roots import KVPureNotImplementedError, KVPureValueError, format_gib

__all__ = [
    "AutoFitError",
    "ContextParallelUnsupportedError",
    "HybridPromotionError",
    "HybridUnificationError",
    "InsufficientKVCacheMemoryError",
    "NoKVCacheMemoryError",
    "PageSizeUnificationError",
    "PlanningAssertionError",
    "PrefixMatchUnitError",
    "SinglePrefixMatchUnitError",
    "SpecMergeError",
    "UnregisteredSpecError",
    "WindowSizeMismatchError",
    "WorkerSpecMismatchError",
]


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
