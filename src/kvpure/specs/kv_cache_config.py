"""The planner's result values: KVCacheTensor, KVCacheGroupSpec, KVCacheConfig.

They mirror vLLM's dataclasses field for field, frozen, with tuples for
vLLM's lists. :class:`PlannerSettings` (defined in ``planner_settings``) is
re-exported here: it is the planner's one input besides specs and memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.field_checks import MAX_MEMORY_BYTES
from kvpure.runtime_types import typed_init
from kvpure.settings import AUTO_FIT_MAX_MODEL_LEN, EAGLE_METHODS, PlannerSettings
from kvpure.specs.base import KVCacheSpec, check_non_negative
from kvpure.specs.mamba import MambaSpec


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheTensor:
    """One KV cache buffer for the worker to allocate.

    ``size`` is in bytes; the layers in ``shared_by`` share it. In the packed
    layout, ``offset`` is the byte offset of these layers inside each block
    and ``block_stride`` the bytes per block (0 means not packed).

    vLLM 0.33+ describes one backing allocation per worker: every tensor's ``size``
    is the whole pool, ``shared_by`` holds the layers in L order (vLLM's
    ``layers``), ``layer_stride`` and ``block_stride`` are the byte strides and
    ``offset`` the byte offset of the first layer's block 0.
    """

    size: int
    shared_by: tuple[str, ...]
    offset: int = 0
    block_stride: int = 0
    layer_stride: int = 0
    host_resident: bool = False

    def __post_init__(self) -> None:
        size, offset, block_stride, layer_stride = (
            self.size,
            self.offset,
            self.block_stride,
            self.layer_stride,
        )
        if (  # the common case in one test; the checks below name the field at fault
            type(size) is int
            and type(offset) is int
            and type(block_stride) is int
            and type(layer_stride) is int
            and 0 <= size <= MAX_MEMORY_BYTES
            and 0 <= offset <= MAX_MEMORY_BYTES
            and 0 <= block_stride <= MAX_MEMORY_BYTES
            and 0 <= layer_stride <= MAX_MEMORY_BYTES
        ):
            return
        check_non_negative("size", self.size)
        check_non_negative("offset", self.offset)
        check_non_negative("block_stride", self.block_stride)
        check_non_negative("layer_stride", self.layer_stride)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheGroupSpec:
    """Layers that share one block table, with their merged spec."""

    layer_names: tuple[str, ...]
    kv_cache_spec: KVCacheSpec
    is_eagle_group: bool = False


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheConfig:
    """One worker's KV cache plan: block count, tensors to allocate and groups."""

    num_blocks: int
    kv_cache_tensors: tuple[KVCacheTensor, ...]
    kv_cache_groups: tuple[KVCacheGroupSpec, ...]
    kv_tp_replicas: int = 1
    """vLLM 0.33+: consecutive TP ranks holding identical KV (``kv_cache_groups_tp_replicas``)."""

    def __post_init__(self) -> None:
        check_non_negative("num_blocks", self.num_blocks)

    @property
    def has_mamba_layers(self) -> bool:
        """Whether any group holds Mamba state."""
        return any(isinstance(g.kv_cache_spec, MambaSpec) for g in self.kv_cache_groups)

    @property
    def needs_kv_cache_zeroing(self) -> bool:
        """Whether the buffers must start zeroed (Mamba state must)."""
        return self.has_mamba_layers


__all__ = [
    "AUTO_FIT_MAX_MODEL_LEN",
    "EAGLE_METHODS",
    "KVCacheConfig",
    "KVCacheGroupSpec",
    "KVCacheTensor",
    "PlannerSettings",
]
