"""The planner's block equalisation keeps every field of the tensors and configs it rebuilds.

``planner._shrink`` rebuilds each worker's KVCacheTensor / KVCacheConfig field by field
(the unchecked constructors, for speed), so a field added to either class must be added
there too; this test names the fields it copies. ``LayerMap.kinds`` is the memo the
planner's boundary check reads.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvpure.errors import KVPureError
from kvpure.planning.planner import _shrink
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheTensor
from kvpure.specs.layer_map import LayerMap


def test_shrink_copies_every_field() -> None:
    assert {f.name for f in dataclasses.fields(KVCacheTensor)} == {
        "size",
        "shared_by",
        "offset",
        "block_stride",
        "layer_stride",
        "host_resident",
    }
    assert {f.name for f in dataclasses.fields(KVCacheConfig)} == {
        "num_blocks",
        "kv_cache_tensors",
        "kv_cache_groups",
        "kv_tp_replicas",
    }
    tensor = KVCacheTensor(
        size=10 * 4096,
        shared_by=("a", "b"),
        offset=64,
        block_stride=4096,
        layer_stride=128,
        host_resident=True,
    )
    config = KVCacheConfig(
        num_blocks=10, kv_cache_tensors=(tensor,), kv_cache_groups=(), kv_tp_replicas=2
    )
    shrunk = _shrink(config, 4)
    assert shrunk == KVCacheConfig(
        num_blocks=4,
        kv_cache_tensors=(dataclasses.replace(tensor, size=4 * 4096),),
        kv_cache_groups=(),
        kv_tp_replicas=2,
    )


def test_shrink_refuses_sizes_that_do_not_divide() -> None:
    tensor = KVCacheTensor(size=10 * 4096 + 1, shared_by=("a",))
    config = KVCacheConfig(num_blocks=10, kv_cache_tensors=(tensor,), kv_cache_groups=())
    with pytest.raises(KVPureError):
        _shrink(config, 4)


def test_layer_map_kinds_are_the_classes_of_names_and_values() -> None:
    layers = LayerMap.from_pairs([("a", 1), ("b", "x"), ("c", 2)])
    assert layers.kinds() == (frozenset({str}), frozenset({int, str}))
    assert layers.kinds() is layers.kinds()
    assert LayerMap.empty().kinds() == (frozenset(), frozenset())
    assert layers == LayerMap.from_pairs([("a", 1), ("b", "x"), ("c", 2)])


def test_a_one_block_worker_shrinks_to_the_smallest_count() -> None:
    # vLLM 0.26 get_kv_cache_configs: ``tensor.size = tensor.size // num_blocks_old *
    # min_num_blocks`` -- a one-block worker divides too
    tensor = KVCacheTensor(size=4096, shared_by=("a",))
    config = KVCacheConfig(num_blocks=1, kv_cache_tensors=(tensor,), kv_cache_groups=())
    shrunk = _shrink(config, 0)
    assert shrunk.num_blocks == 0
    assert shrunk.kv_cache_tensors == (KVCacheTensor(size=0, shared_by=("a",)),)
