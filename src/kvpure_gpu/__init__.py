"""kvpure_gpu: frozen kvpure plans become torch tensors.

This package decides nothing: it reads a ``KVCacheConfig`` and builds buffers,
per-layer views, block tables and slot mappings on any torch device.
"""

from __future__ import annotations

import warnings as _warnings

try:
    with _warnings.catch_warnings():
        # torch built without numpy warns once at import; kvpure_gpu never converts to numpy
        _warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch as _torch  # noqa: F401
except ImportError as _err:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "kvpure_gpu needs PyTorch: install it with `pip install 'kvpure[gpu]'` "
        "(or `pip install torch`)"
    ) from _err

from kvpure_gpu.allocate import DeviceLike, KVCacheBuffers, allocate_kv_cache_buffers
from kvpure_gpu.block_tables import (
    BatchBlockTables,
    batch_block_tables,
    block_table_tensor,
    slot_mapping_tensor,
)
from kvpure_gpu.dtypes import from_torch_dtype, to_torch_dtype
from kvpure_gpu.kv_cache import (
    KVCache,
    LayerKVCache,
    attention_geometry,
    bind_kv_cache_views,
    default_layout,
    mamba_geometry,
    materialize_kv_cache,
    select_kernel_block_sizes,
)
from kvpure_gpu.layouts import KVCacheLayout
from kvpure_gpu.single_backing import backing_size, single_backing_views, uses_single_backing
from kvpure_gpu.views import (
    AttentionGeometry,
    MambaGeometry,
    Packing,
    attention_view,
    byte_offset,
    mamba_state_views,
)

__all__ = [
    "AttentionGeometry",
    "BatchBlockTables",
    "DeviceLike",
    "KVCache",
    "KVCacheBuffers",
    "KVCacheLayout",
    "LayerKVCache",
    "MambaGeometry",
    "Packing",
    "allocate_kv_cache_buffers",
    "attention_geometry",
    "attention_view",
    "backing_size",
    "batch_block_tables",
    "bind_kv_cache_views",
    "block_table_tensor",
    "byte_offset",
    "default_layout",
    "from_torch_dtype",
    "mamba_geometry",
    "mamba_state_views",
    "materialize_kv_cache",
    "select_kernel_block_sizes",
    "single_backing_views",
    "slot_mapping_tensor",
    "to_torch_dtype",
    "uses_single_backing",
]
