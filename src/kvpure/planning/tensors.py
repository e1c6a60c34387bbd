"""Turning one worker's KV cache groups and memory into blocks and tensors.

Three layouts, as vLLM 0.26.0 chooses them: one tensor per layer for a
single uniform-type group; the packed layout (each block holds every
layer's page at an offset) when all groups are uniform-type or the KV
connector asks for cross-layer blocks; otherwise tensors shared by the
``i``-th layer of every group.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.errors import PlanningAssertionError
from kvpure.planning.grouping import get_uniform_page_size
from kvpure.settings import PlannerSettings
from kvpure.specs import UniformTypeKVCacheSpecs
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor


def may_override_num_blocks(settings: PlannerSettings, num_blocks: int) -> int:
    """``num_gpu_blocks_override`` when set, else ``num_blocks``."""
    override = settings.num_gpu_blocks_override
    return override if override is not None else num_blocks


def bucket_layers_by_page_size(
    groups: Sequence[KVCacheGroupSpec],
) -> dict[int, list[list[str]]]:
    """``{page size: [slot 0 layers, slot 1 layers, ...]}``, page sizes in first-seen order.

    The ``k``-th layer of a given page size in each group goes to slot ``k``.
    """
    buckets: dict[int, list[list[str]]] = {}
    for group in groups:
        spec = group.kv_cache_spec
        slot_count: dict[int, int] = {}
        for name in group.layer_names:
            if isinstance(spec, UniformTypeKVCacheSpecs):
                page = spec.kv_cache_specs[name].page_size_bytes
            else:
                page = spec.page_size_bytes
            slot = slot_count.get(page, 0)
            slot_count[page] = slot + 1
            slots = buckets.setdefault(page, [])
            if slot == len(slots):
                slots.append([])
            slots[slot].append(name)
    return buckets


def use_packed_kv_cache_config(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]
) -> bool:
    """Whether vLLM lays these groups out packed (DeepSeek-V4, or cross-layer blocks)."""
    all_uniform_type = all(isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs) for g in groups)
    return all_uniform_type or (settings.enable_cross_layers_blocks and len(groups) > 1)


def pool_bytes_per_block(settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]) -> int:
    """Bytes one block takes in the worker's pool (the divisor that turns memory into blocks)."""
    first = groups[0].kv_cache_spec
    if len(groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        return first.page_size_bytes
    if use_packed_kv_cache_config(settings, groups):
        buckets = bucket_layers_by_page_size(groups)
        return sum(page * len(slots) for page, slots in buckets.items())
    group_size = max(len(g.layer_names) for g in groups)
    return get_uniform_page_size(g.kv_cache_spec for g in groups) * group_size


def _packed_tensors(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec], available_memory: int
) -> tuple[int, tuple[KVCacheTensor, ...]]:
    buckets = bucket_layers_by_page_size(groups)
    per_block = sum(page * len(slots) for page, slots in buckets.items())
    num_blocks = may_override_num_blocks(settings, available_memory // per_block)
    total = per_block * num_blocks
    tensors: list[KVCacheTensor] = []
    offset = 0
    for page, slots in buckets.items():
        for slot in slots:
            tensors.append(
                KVCacheTensor(
                    size=total, shared_by=tuple(slot), offset=offset, block_stride=per_block
                )
            )
            offset += page
    return num_blocks, tuple(tensors)


def get_kv_cache_config_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec], available_memory: int
) -> KVCacheConfig:
    """One worker's KVCacheConfig for its (projected) groups and its memory in bytes."""
    if not groups:
        return KVCacheConfig(num_blocks=1, kv_cache_tensors=(), kv_cache_groups=())
    first = groups[0].kv_cache_spec
    tensors: tuple[KVCacheTensor, ...]
    if len(groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        num_blocks = may_override_num_blocks(settings, available_memory // first.page_size_bytes)
        per_layer = first.kv_cache_specs
        tensors = tuple(
            KVCacheTensor(size=per_layer[name].page_size_bytes * num_blocks, shared_by=(name,))
            for name in groups[0].layer_names
        )
    elif use_packed_kv_cache_config(settings, groups):
        num_blocks, tensors = _packed_tensors(settings, groups, available_memory)
    else:
        group_size = max(len(g.layer_names) for g in groups)
        page_size = get_uniform_page_size(g.kv_cache_spec for g in groups)
        if group_size <= 0:
            raise PlanningAssertionError(
                check="group_size", detail="group_size must be greater than 0"
            )
        num_blocks = max(int(available_memory // page_size // group_size), 0)
        num_blocks = may_override_num_blocks(settings, num_blocks)
        tensors = tuple(
            KVCacheTensor(
                size=page_size * num_blocks,
                shared_by=tuple(g.layer_names[i] for g in groups if i < len(g.layer_names)),
            )
            for i in range(group_size)
        )
    return KVCacheConfig(
        num_blocks=num_blocks, kv_cache_tensors=tensors, kv_cache_groups=tuple(groups)
    )
