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
from kvpure.planning.values import new_kv_cache_config, new_kv_cache_tensor
from kvpure.settings import PlannerSettings
from kvpure.specs import KVCacheSpec, UniformTypeKVCacheSpecs, round_up
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


def _layer_specs(group: KVCacheGroupSpec) -> list[tuple[str, KVCacheSpec]]:
    spec = group.kv_cache_spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return [(name, spec.kv_cache_specs[name]) for name in group.layer_names]
    return [(name, spec) for name in group.layer_names]


def layer_block_stride(spec: KVCacheSpec) -> int:
    """vLLM 0.33+'s ``_get_layer_block_stride``: the page rounded up to its alignment."""
    return round_up(spec.page_size_bytes, spec.get_block_stride_alignment())


def single_pool_bytes_per_block(groups: Sequence[KVCacheGroupSpec]) -> int:
    """vLLM 0.33+'s ``_get_kv_cache_bytes_per_block`` for a layer-outer layout (LBNHC):
    the largest group's sum of per-layer block strides."""
    return max(_group_block_bytes(g) for g in groups)


def _group_block_bytes(group: KVCacheGroupSpec) -> int:
    spec = group.kv_cache_spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return sum(layer_block_stride(s) for _, s in _layer_specs(group))
    return len(group.layer_names) * layer_block_stride(spec)  # one spec for every layer


def pool_bytes_per_block(settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec]) -> int:
    """Bytes one block takes in the worker's pool (the divisor that turns memory into blocks).

    Rule ``single_backing_allocation``: vLLM 0.33+ ``_pool_bytes_per_block``
    (``kv_cache_planning.py``) sums each group's layer strides and takes the largest;
    0.26 (``kv_cache_utils.py get_kv_cache_config_from_groups``) divided by the uniform
    type's page, the packed block, or the shared page times the group size.
    """
    if settings.rules.single_backing_allocation:
        return single_pool_bytes_per_block(groups) if groups else 0
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
                new_kv_cache_tensor(
                    size=total, shared_by=tuple(slot), offset=offset, block_stride=per_block
                )
            )
            offset += page
    return num_blocks, tuple(tensors)


def single_backing_tensors(
    groups: Sequence[KVCacheGroupSpec], num_blocks: int
) -> tuple[KVCacheTensor, ...]:
    """vLLM 0.33+'s placement (``get_kv_cache_config_from_groups``, layer-outer LBNHC): one
    backing allocation of ``num_blocks`` blocks; per group, one tensor per distinct layer
    spec, aliasing from byte 0, its layers ``layer_stride`` apart."""
    size = single_pool_bytes_per_block(groups) * num_blocks
    tensors: list[KVCacheTensor] = []
    for group in groups:
        by_spec: dict[KVCacheSpec, list[str]] = {}
        for name, spec in _layer_specs(group):
            by_spec.setdefault(spec, []).append(name)
        offset = 0
        for spec, names in by_spec.items():
            block_stride = layer_block_stride(spec)
            layer_stride = block_stride * num_blocks
            tensors.append(
                new_kv_cache_tensor(
                    size=size,
                    shared_by=tuple(names),
                    offset=offset,
                    block_stride=block_stride,
                    layer_stride=layer_stride,
                )
            )
            offset += len(names) * layer_stride
    return tuple(tensors)


def get_kv_cache_config_from_groups(
    settings: PlannerSettings, groups: Sequence[KVCacheGroupSpec], available_memory: int
) -> KVCacheConfig:
    """One worker's KVCacheConfig for its (projected) groups and its memory in bytes.

    Rule ``single_backing_allocation`` picks vLLM 0.33+'s one backing allocation
    (:func:`single_backing_tensors`) or 0.26's three layouts.
    """
    if not groups:
        return new_kv_cache_config(num_blocks=1, kv_cache_tensors=(), kv_cache_groups=())
    if settings.rules.single_backing_allocation:
        per_block = single_pool_bytes_per_block(groups)
        if per_block == 0:  # vLLM divides by it (ZeroDivisionError)
            raise PlanningAssertionError(
                check="pool_bytes_per_block",
                detail="the worker's groups hold no layers (zero bytes per block)",
            )
        num_blocks = may_override_num_blocks(settings, available_memory // per_block)
        return new_kv_cache_config(
            num_blocks=num_blocks,
            kv_cache_tensors=single_backing_tensors(groups, num_blocks),
            kv_cache_groups=tuple(groups),
        )
    first = groups[0].kv_cache_spec
    tensors: tuple[KVCacheTensor, ...]
    if len(groups) == 1 and isinstance(first, UniformTypeKVCacheSpecs):
        num_blocks = may_override_num_blocks(settings, available_memory // first.page_size_bytes)
        per_layer = first.kv_cache_specs
        tensors = tuple(
            new_kv_cache_tensor(
                size=per_layer[name].page_size_bytes * num_blocks, shared_by=(name,)
            )
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
        size = page_size * num_blocks
        if len(groups) == 1:  # one group: a tensor per layer
            tensors = tuple(
                new_kv_cache_tensor(size=size, shared_by=(name,)) for name in groups[0].layer_names
            )
        else:
            tensors = tuple(
                new_kv_cache_tensor(
                    size=size,
                    shared_by=tuple(g.layer_names[i] for g in groups if i < len(g.layer_names)),
                )
                for i in range(group_size)
            )
    return new_kv_cache_config(
        num_blocks=num_blocks, kv_cache_tensors=tensors, kv_cache_groups=tuple(groups)
    )
