"""The ``kvpure_gpu`` entry points :mod:`api_fuzz` calls (CPU and meta tensors; needs torch).

Same scheme as :mod:`api_fuzz_table`: one good call per entry, then each
parameter replaced by every bad value of its kind. The extra kinds here are a
device, a torch dtype, a raw buffer tensor and a kvpure plan.
"""

from __future__ import annotations

from api_fuzz_table import BAD, Entry

_GPU_BAD: dict[str, list[str]] = {
    "device": ["None", "3.5", "object()", "'nope'", "''", "True", "-1", "[0]", "'cpu:-1'"],
    "torch_dtype": ["None", "'bfloat16'", "KVDtype.BFLOAT16", "torch.qint8", "3", "object()"],
    "kvdtype": ["None", "'bfloat16'", "'int3'", "torch.bfloat16", "3", "object()", "True"],
    "tensor": ["None", "[0] * 8", "object()", "3", "b'x' * 8", "torch.zeros(4, 4)"],
    "plan": ["None", "3", "'x'", "object()", "{}", "PLAN"],
    "layout": ["None", "'flash_attn_nhd'", "3", "object()", "True"],
    "layouts": ["3", "'x'", "object()", "[]", "{3: 4}", "{'a': 'mla'}", "{'a': None}"],
    "kernels": ["3", "'x'", "object()", "[None]", "[0]", "[-1]", "[1.5]", "[True]", "[2**200]"],
    "shape": ["None", "3", "[None]", "[(-1,)]", "[(1.5,)]", "[(True,)]", "[(2**200,)]", "[()]"],
    "dtypes": ["None", "3", "[None]", "['bfloat16']", "[torch.qint8]", "[object()]"],
}
for _kind, _values in list(_GPU_BAD.items()):
    _GPU_BAD["opt_" + _kind] = [v for v in _values if v != "None"]
BAD.update(_GPU_BAD)

GPU_SETUP = """
import json, math
import torch
import kvpure_gpu
from kvpure_gpu import *
from kvpure.block_table import BlockTableLayout
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.settings import PlannerSettings
from kvpure.specs import FullAttentionSpec, KVDtype, MambaSpec
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor

SPEC = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype=KVDtype.BFLOAT16)
PAGE = SPEC.page_size_bytes
KVC = KVCacheConfig(
    num_blocks=4,
    kv_cache_tensors=(KVCacheTensor(size=4 * PAGE, shared_by=('a',)),),
    kv_cache_groups=(KVCacheGroupSpec(layer_names=('a',), kv_cache_spec=SPEC),),
)
PLAN = get_kv_cache_configs(PlannerSettings(vllm_version='0.26'), [{'a': SPEC}], [2**20])
MSPEC = MambaSpec(block_size=16, shapes=((2, 4),), dtypes=(KVDtype.FLOAT32,))
BUF = allocate_kv_cache_buffers(KVC, 'cpu')
RAW = BUF.buffers[0]
GEO = attention_geometry('a', SPEC, KVCacheLayout.FLASH_ATTN_NHD)
MGEO = mamba_geometry('m', MSPEC)
LAYOUT = BlockTableLayout(block_size=16)
KV = materialize_kv_cache(KVC, 'cpu')
"""

_GEOMETRY = {
    "layer_name": ("'a'", "str"),
    "layout": ("KVCacheLayout.FLASH_ATTN_NHD", "layout"),
    "dtype": ("torch.bfloat16", "torch_dtype"),
    "block_size": ("16", "count"),
    "storage_block_size": ("16", "count"),
    "num_kv_heads": ("2", "count"),
    "head_size": ("8", "count"),
    "data_bytes": ("PAGE", "count"),
    "page_size_bytes": ("PAGE", "count"),
}

GPU_ENTRIES: tuple[Entry, ...] = (
    Entry("to_torch_dtype", "to_torch_dtype({dtype})", {"dtype": ("KVDtype.BFLOAT16", "kvdtype")}),
    Entry(
        "from_torch_dtype",
        "from_torch_dtype({dtype})",
        {"dtype": ("torch.bfloat16", "torch_dtype")},
    ),
    Entry("KVCacheLayout", "KVCacheLayout({value})", {"value": ("'mla'", "enum")}),
    Entry(
        "KVCacheLayout.kv_cache_shape",
        "KVCacheLayout.FLASH_ATTN_NHD.kv_cache_shape({n}, {bs}, {heads}, {hs})",
        {"n": ("4", "index"), "bs": ("16", "count"), "heads": ("2", "count"), "hs": ("8", "count")},
    ),
    Entry(
        "allocate_kv_cache_buffers",
        "allocate_kv_cache_buffers({config}, {device}, zero_fill={zero_fill})",
        {"config": ("KVC", "plan"), "device": ("'cpu'", "device"), "zero_fill": ("True", "bool")},
    ),
    Entry("KVCacheBuffers.buffer_of", "BUF.buffer_of({name})", {"name": ("'a'", "enum")}),
    Entry(
        "materialize_kv_cache",
        "materialize_kv_cache({config}, {device}, zero_fill={zero_fill}, "
        "attention_layout={attention_layout}, layouts={layouts}, "
        "kernel_block_sizes={kernel_block_sizes})",
        {
            "config": ("KVC", "plan"),
            "device": ("'meta'", "device"),
            "zero_fill": ("False", "bool"),
            "attention_layout": ("KVCacheLayout.FLASH_ATTN_NHD", "layout"),
            "layouts": ("None", "opt_layouts"),
            "kernel_block_sizes": ("None", "opt_kernels"),
        },
    ),
    Entry(
        "bind_kv_cache_views",
        "bind_kv_cache_views({config}, {buffers}, attention_layout={attention_layout}, "
        "layouts={layouts}, kernel_block_sizes={kernel_block_sizes})",
        {
            "config": ("KVC", "plan"),
            "buffers": ("BUF", "obj"),
            "attention_layout": ("KVCacheLayout.FLASH_ATTN_NHD", "layout"),
            "layouts": ("{'a': KVCacheLayout.FLASH_ATTN_HND}", "opt_layouts"),
            "kernel_block_sizes": ("[16]", "opt_kernels"),
        },
    ),
    Entry(
        "select_kernel_block_sizes",
        "select_kernel_block_sizes({config}, attention_layout={attention_layout}, "
        "layouts={layouts})",
        {
            "config": ("KVC", "plan"),
            "attention_layout": ("KVCacheLayout.FLASH_ATTN_NHD", "layout"),
            "layouts": ("None", "opt_layouts"),
        },
    ),
    Entry(
        "default_layout",
        "default_layout({spec}, {attention_layout})",
        {"spec": ("SPEC", "obj"), "attention_layout": ("KVCacheLayout.KV_FIRST", "layout")},
    ),
    Entry(
        "attention_geometry",
        "attention_geometry({layer_name}, {spec}, {layout})",
        {
            "layer_name": ("'a'", "str"),
            "spec": ("SPEC", "obj"),
            "layout": ("KVCacheLayout.FLASH_ATTN_NHD", "layout"),
        },
    ),
    Entry(
        "mamba_geometry",
        "mamba_geometry({layer_name}, {spec})",
        {"layer_name": ("'m'", "str"), "spec": ("MSPEC", "obj")},
    ),
    Entry(
        "AttentionGeometry",
        "AttentionGeometry(" + ", ".join(f"{k}={{{k}}}" for k in _GEOMETRY) + ")",
        _GEOMETRY,
    ),
    Entry(
        "MambaGeometry",
        "MambaGeometry(layer_name={layer_name}, shapes={shapes}, dtypes={dtypes}, "
        "page_size_bytes={page_size_bytes})",
        {
            "layer_name": ("'m'", "str"),
            "shapes": ("((2, 4),)", "shape"),
            "dtypes": ("(torch.float32,)", "dtypes"),
            "page_size_bytes": ("32", "count"),
        },
    ),
    Entry(
        "Packing",
        "Packing(offset_bytes={offset_bytes}, block_stride_bytes={block_stride_bytes})",
        {"offset_bytes": ("0", "index"), "block_stride_bytes": ("PAGE", "count")},
    ),
    Entry(
        "attention_view",
        "attention_view({raw}, {geometry}, kernel_block_size={kernel_block_size}, "
        "packing={packing}, blocks_outermost={blocks_outermost})",
        {
            "raw": ("RAW", "tensor"),
            "geometry": ("GEO", "obj"),
            "kernel_block_size": ("16", "count"),
            "packing": ("None", "opt_obj"),
            "blocks_outermost": ("False", "bool"),
        },
    ),
    Entry(
        "mamba_state_views",
        "mamba_state_views({raw}, {geometry}, packing={packing})",
        {
            "raw": ("torch.zeros(64, dtype=torch.int8)", "tensor"),
            "geometry": ("MGEO", "obj"),
            "packing": ("None", "opt_obj"),
        },
    ),
    Entry(
        "byte_offset",
        "byte_offset({view})",
        {"view": ("RAW[3:]", "tensor")},
        also_good=("view=torch.zeros(4, 4)",),
    ),
    Entry("backing_size", "backing_size({config})", {"config": ("KVC", "plan")}),
    Entry("uses_single_backing", "uses_single_backing({config})", {"config": ("KVC", "plan")}),
    Entry(
        "single_backing_views",
        "single_backing_views({config}, {raw}, {kernels})",
        {"config": ("KVC", "plan"), "raw": ("RAW", "tensor"), "kernels": ("[16]", "kernels")},
    ),
    Entry(
        "block_table_tensor",
        "block_table_tensor({rows}, {layout}, max_num_blocks_per_req={m}, device={device})",
        {
            "rows": ("[[0, 1]]", "seq"),
            "layout": ("LAYOUT", "obj"),
            "m": ("4", "count"),
            "device": ("'cpu'", "device"),
        },
    ),
    Entry(
        "slot_mapping_tensor",
        "slot_mapping_tensor({rows}, {req}, {pos}, {layout}, num_slots={num_slots}, "
        "device={device})",
        {
            "rows": ("[[0, 1]]", "seq"),
            "req": ("[0, 0]", "seq"),
            "pos": ("[0, 17]", "seq"),
            "layout": ("LAYOUT", "obj"),
            "num_slots": ("None", "opt_count"),
            "device": ("'cpu'", "device"),
        },
    ),
    Entry(
        "batch_block_tables",
        "batch_block_tables({rows}, {req}, {pos}, {layout}, max_num_blocks_per_req={m}, "
        "num_slots={num_slots}, device={device})",
        {
            "rows": ("[[0, 1]]", "seq"),
            "req": ("[0]", "seq"),
            "pos": ("[3]", "seq"),
            "layout": ("LAYOUT", "obj"),
            "m": ("4", "count"),
            "num_slots": ("4", "opt_count"),
            "device": ("'cpu'", "device"),
        },
        also_good=("pos=[3]",),
    ),
    Entry(
        "KVCache.block_table_layouts",
        "KV.block_table_layouts(dcp_world_size={w}, dcp_rank={r}, cp_kv_cache_interleave_size={i})",
        {"w": ("1", "count"), "r": ("0", "index"), "i": ("1", "count")},
    ),
)
