"""The public API refuses bad input with typed errors, in a user's own process.

Every case below is a call of a public function or constructor with a wrong
type, a value out of range, NaN/inf or a bool where an int is meant. All run
in one fresh interpreter WITHOUT the suite's beartype hook (a user's process),
each in its own ``try``; the outcome must be an error deriving from
:class:`kvpure.errors.KVPureError`. Two outcomes fail the audit: an error of
another type (AssertionError, KeyError, AttributeError, a plain TypeError...)
and a bad input silently accepted.

Areas: the free block queue and its blocks, block tables, the planner's
public boundary (``get_kv_cache_configs``) and settings, specs, the models
package (config parsing, layouts, the Hugging Face cache lookup) and
``kvpure_gpu`` (where torch is installed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SETUP = """
import math
import kvpure
from kvpure.block_table import (
    BlockTableLayout, MultipleOf, batch_token_positions, block_table_rows, block_table_width,
    compute_slot_mapping, map_to_kernel_blocks, select_common_block_size, slot_for_position,
)
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock, KVCacheBlockCopy
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.hf_cache import (
    check_model_id, config_argument, hub_cache_dir, is_model_id, resolve_model_config,
    resolve_model_folder,
)
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.settings import PlannerSettings
from kvpure.specs import FullAttentionSpec, KVDtype, SlidingWindowSpec

SPEC = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
S = PlannerSettings(vllm_version="0.26")
LAYOUT = BlockTableLayout(block_size=16)

def queue(n=4):
    return FreeKVCacheBlockQueue([KVCacheBlock(i) for i in range(n)])

def block():
    return KVCacheBlock(0)

def null_block():
    b = KVCacheBlock(0)
    b.is_null = True
    return b
"""

CASES: tuple[str, ...] = (
    # -- blocks
    "KVCacheBlock(-1)",
    "KVCacheBlock(True)",
    "KVCacheBlock(1.0)",
    "KVCacheBlock('3')",
    "KVCacheBlock(None)",
    "KVCacheBlock(2**200)",
    "KVCacheBlock(0, ref_cnt=-5)",
    "KVCacheBlock(0, ref_cnt=True)",
    "KVCacheBlock(0, ref_cnt=1.5)",
    "KVCacheBlock(0, ref_cnt=None)",
    "KVCacheBlock(block_id=float('nan'))",
    "block().set_block_hash(None)",
    "block().set_block_hash(123)",
    "block().set_block_hash('abc')",
    "block().set_block_hash(bytearray(b'x'))",
    "block().set_block_hash(b'x', -1)",
    "block().set_block_hash(b'x', True)",
    "block().set_block_hash(b'x', 1.5)",
    "block().set_block_hash(b'x', '3')",
    "null_block().set_block_hash(b'x')",
    "setattr(block(), 'is_null', 'yes')",
    "setattr(block(), 'is_null', 1)",
    "setattr(block(), 'is_null', None)",
    "KVCacheBlockCopy(src_block_id=-1, dst_block_id=0)",
    "KVCacheBlockCopy(src_block_id=True, dst_block_id=0)",
    "KVCacheBlockCopy(src_block_id='1', dst_block_id=0)",
    "KVCacheBlockCopy(src_block_id=0, dst_block_id=1.0)",
    "KVCacheBlockCopy(src_block_id=0)",
    # -- the free block queue
    "FreeKVCacheBlockQueue(None)",
    "FreeKVCacheBlockQueue(3)",
    "FreeKVCacheBlockQueue([1, 2])",
    "FreeKVCacheBlockQueue('ab')",
    "FreeKVCacheBlockQueue(KVCacheBlock(0))",
    "FreeKVCacheBlockQueue([KVCacheBlock(0)] * 2)",
    "queue().popleft_n(True)",
    "queue().popleft_n(False)",
    "queue().popleft_n(-1)",
    "queue().popleft_n(1.0)",
    "queue().popleft_n(None)",
    "queue().popleft_n('2')",
    "queue().popleft_n(10**30)",
    "queue().popleft_n(5)",
    "queue(0).popleft()",
    "queue().append(3)",
    "queue().append(None)",
    "queue().remove(3)",
    "queue().remove(KVCacheBlock(9))",
    "queue().append_n(None)",
    "queue().append_n(3)",
    "queue().append_n([3])",
    "queue().append_n([None])",
    "queue().prepend_n(None)",
    "queue().prepend_n([1.5])",
    "queue().iter_blocks_after(3)",
    "queue().iter_blocks_after('x')",
    "q = queue(); q.append(q.fake_free_list_head)",
    # -- block tables
    "BlockTableLayout(block_size=0)",
    "BlockTableLayout(block_size=True)",
    "BlockTableLayout(block_size='16')",
    "BlockTableLayout(block_size=1.5)",
    "BlockTableLayout(block_size=None)",
    "BlockTableLayout(block_size=2**200)",
    "BlockTableLayout(block_size=16, kernel_block_size=3)",
    "BlockTableLayout(block_size=16, kernel_block_size=True)",
    "BlockTableLayout(block_size=16, dcp_rank='0')",
    "BlockTableLayout(block_size=16, dcp_rank=-1)",
    "BlockTableLayout(block_size=16, dcp_world_size=0)",
    "BlockTableLayout(block_size=16, cp_kv_cache_interleave_size=5)",
    "map_to_kernel_blocks(None, 2)",
    "map_to_kernel_blocks([1.5], 2)",
    "map_to_kernel_blocks([True], 2)",
    "map_to_kernel_blocks([-1], 2)",
    "map_to_kernel_blocks([1], 0)",
    "map_to_kernel_blocks('12', 2)",
    "map_to_kernel_blocks([1], True)",
    "map_to_kernel_blocks([2**200], 2)",
    "block_table_width(0, LAYOUT)",
    "block_table_width(1, None)",
    "block_table_width(True, LAYOUT)",
    "block_table_rows([[0]], LAYOUT, max_num_blocks_per_req=0)",
    "block_table_rows(None, LAYOUT)",
    "block_table_rows([None], LAYOUT)",
    "block_table_rows([[0]], 'layout')",
    "block_table_rows([[0, 1]], LAYOUT, max_num_blocks_per_req=1)",
    "slot_for_position([0], -1, LAYOUT)",
    "slot_for_position([0], 1.5, LAYOUT)",
    "slot_for_position([0], True, LAYOUT)",
    "slot_for_position([0], 0, None)",
    "slot_for_position(None, 0, LAYOUT)",
    "slot_for_position([0], 16, LAYOUT)",
    "compute_slot_mapping(None, [0], [0], LAYOUT)",
    "compute_slot_mapping([[0]], [0], [0, 1], LAYOUT)",
    "compute_slot_mapping([[0]], [1], [0], LAYOUT)",
    "compute_slot_mapping([[0]], [0.0], [0], LAYOUT)",
    "compute_slot_mapping([[0]], [0], [0], LAYOUT, num_slots=0)",
    "compute_slot_mapping([[0]], [0], [0], LAYOUT, num_slots=1.5)",
    "batch_token_positions([0], [10**12])",
    "batch_token_positions([0], [-1])",
    "batch_token_positions([0], [1.5])",
    "batch_token_positions(None, [1])",
    "batch_token_positions([0], [1, 2])",
    "select_common_block_size(16, None)",
    "select_common_block_size(16, [[0]])",
    "select_common_block_size(16, [['a']])",
    "select_common_block_size(16, [[32]])",
    "select_common_block_size(0, [[16]])",
    "select_common_block_size(16, [None])",
    "MultipleOf(base=0)",
    "MultipleOf(base=True)",
    "MultipleOf(base='16')",
    # -- the planner's public boundary
    "get_kv_cache_configs(None, [{'a': SPEC}], [2**30])",
    "get_kv_cache_configs('settings', [{'a': SPEC}], [2**30])",
    "get_kv_cache_configs({}, [{'a': SPEC}], [2**30])",
    "get_kv_cache_configs(S, None, [2**30])",
    "get_kv_cache_configs(S, 3, [2**30])",
    "get_kv_cache_configs(S, [], [])",
    "get_kv_cache_configs(S, ['x'], [2**30])",
    "get_kv_cache_configs(S, [{'a': 3}], [2**30])",
    "get_kv_cache_configs(S, [{3: SPEC}], [2**30])",
    "get_kv_cache_configs(S, [{'a': SPEC}], None)",
    "get_kv_cache_configs(S, [{'a': SPEC}], float('nan'))",
    "get_kv_cache_configs(S, [{'a': SPEC}], '24GiB')",
    "get_kv_cache_configs(S, [{'a': SPEC}], 2**30)",
    "get_kv_cache_configs(S, [{'a': SPEC}], [float('nan')])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [float('inf')])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [None])",
    "get_kv_cache_configs(S, [{'a': SPEC}], ['24GiB'])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [2**200])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [-1])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [True])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [1.5e9])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [2**30, 2**30])",
    "get_kv_cache_configs(S, [{'a': SPEC}], [0])",
    "get_kv_cache_configs(settings=None, specs_per_worker=[{'a': SPEC}], "
    "available_memory_per_worker=[2**30])",
    # -- settings
    "PlannerSettings(prefix_caching_hash_algo='md5')",
    "PlannerSettings(prefix_caching_hash_algo=None)",
    "PlannerSettings(block_size=True)",
    "PlannerSettings(block_size=0)",
    "PlannerSettings(block_size='16')",
    "PlannerSettings(block_size=16.0)",
    "PlannerSettings(block_size=2**200)",
    "PlannerSettings(max_model_len=float('nan'))",
    "PlannerSettings(max_model_len=2**200)",
    "PlannerSettings(enable_prefix_caching='no')",
    "PlannerSettings(enable_prefix_caching=None)",
    "PlannerSettings(mamba_cache_mode='sometimes')",
    "PlannerSettings(mamba_cache_mode=3)",
    "PlannerSettings(vllm_version='0.99')",
    "PlannerSettings(vllm_version=0.26)",
    "PlannerSettings(kv_connector_extra_config={'a': 1})",
    "PlannerSettings(num_gpu_blocks_override=0)",
    "PlannerSettings(num_gpu_blocks_override=True)",
    "PlannerSettings(original_max_model_len=-2)",
    "PlannerSettings(tensor_parallel_size=0)",
    "PlannerSettings(no_such_setting=1)",
    "PlannerSettings(16)",
    # -- specs
    "FullAttentionSpec(block_size=0, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)",
    "FullAttentionSpec(block_size=True, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)",
    "FullAttentionSpec(block_size='16', num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)",
    "FullAttentionSpec(block_size=1.5, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)",
    "FullAttentionSpec(block_size=16, num_kv_heads=-8, head_size=128, dtype=KVDtype.BFLOAT16)",
    "FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype='bfloat16')",
    "FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128)",
    "FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16, x=1)",
    "SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16, "
    "sliding_window=0)",
    # -- models
    "parse_model_config(None)",
    "parse_model_config('config')",
    "parse_model_config([])",
    "model_layout(None)",
    "model_layout('config')",
    "model_layout(parse_model_config({}))",
    "model_layout(parse_model_config({'architectures': ['NoSuchForCausalLM']}))",
    "model_layout(parse_model_config({'architectures': 'LlamaForCausalLM'}))",
    "model_layout(parse_model_config({'architectures': ['LlamaForCausalLM'], "
    "'num_hidden_layers': float('nan')}))",
    "model_layout(parse_model_config({'architectures': ['LlamaForCausalLM'], "
    "'num_hidden_layers': 10**12}))",
    "Deployment(kv_cache_memory_bytes=float('nan'))",
    "Deployment(kv_cache_memory_bytes=None)",
    "Deployment(kv_cache_memory_bytes='24GiB')",
    "Deployment(kv_cache_memory_bytes=True)",
    "Deployment(kv_cache_memory_bytes=-1)",
    "Deployment(block_size=0)",
    "Deployment(kv_cache_dtype='int3')",
    "resolve_model_folder(None)",
    "resolve_model_folder('..')",
    "resolve_model_folder('a')",
    "resolve_model_folder('a/b@..')",
    "resolve_model_folder('../../etc/passwd')",
    "resolve_model_folder('/abs/path')",
    "resolve_model_config(3)",
    "resolve_model_config('org/m@../x')",
    "check_model_id('org\\x00/m')",
    "is_model_id(None)",
    "is_model_id(3)",
    "config_argument(None)",
    "config_argument(3)",
    "hub_cache_dir('not a mapping')",
    "hub_cache_dir({'HF_HUB_CACHE': 3})",
)

GPU_SETUP = """
import torch
from kvpure_gpu.dtypes import from_torch_dtype, to_torch_dtype
from kvpure_gpu.layouts import contiguous_strides, inverse_permutation
from kvpure_gpu.block_tables import block_table_tensor, slot_mapping_tensor
from kvpure_gpu.allocate import allocate_kv_cache_buffers, require_device
from kvpure_gpu.kv_cache import materialize_kv_cache, select_kernel_block_sizes
from kvpure.block_table import BlockTableLayout
LAYOUT = BlockTableLayout(block_size=16)
"""

GPU_CASES: tuple[str, ...] = (
    "to_torch_dtype('bfloat16')",
    "to_torch_dtype(None)",
    "from_torch_dtype('bfloat16')",
    "from_torch_dtype(torch.qint8)",
    "contiguous_strides(None)",
    "contiguous_strides([2, -1])",
    "contiguous_strides([2, 1.5])",
    "contiguous_strides([True, 2])",
    "inverse_permutation([0, 0])",
    "inverse_permutation([1, 2])",
    "inverse_permutation(None)",
    "inverse_permutation([0.0, 1])",
    "block_table_tensor(None, LAYOUT, max_num_blocks_per_req=4)",
    "block_table_tensor([[0]], LAYOUT, max_num_blocks_per_req=0)",
    "block_table_tensor([[0, 1]], LAYOUT, max_num_blocks_per_req=1)",
    "block_table_tensor([[1.5]], LAYOUT, max_num_blocks_per_req=2)",
    "block_table_tensor([[0]], LAYOUT, max_num_blocks_per_req=True)",
    "block_table_tensor([[0]], None, max_num_blocks_per_req=1)",
    "block_table_tensor([[0]], LAYOUT)",
    "slot_mapping_tensor(None, [0], [0], LAYOUT)",
    "slot_mapping_tensor([[0]], [1.5], [0], LAYOUT)",
    "slot_mapping_tensor([[0]], ['a'], [0], LAYOUT)",
    "slot_mapping_tensor([[0]], [0], [0], 'layout')",
    "require_device('cpu')",
    "allocate_kv_cache_buffers(None, device='cpu')",
    "materialize_kv_cache(None, device='cpu')",
    "select_kernel_block_sizes(None)",
)

RUNNER = """
import json, sys
from kvpure.errors import KVPureError
cases = json.loads(sys.argv[1])
setup = sys.argv[2]
namespace = {}
exec(setup, namespace)
results = {}
for case in cases:
    try:
        exec(case, dict(namespace))
    except KVPureError as err:
        results[case] = "typed"
    except BaseException as err:
        results[case] = f"untyped {type(err).__module__}.{type(err).__name__}: {str(err)[:120]}"
    else:
        results[case] = "accepted"
print(json.dumps(results))
"""


def _run(setup: str, cases: tuple[str, ...]) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(cases), setup],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results: dict[str, str] = json.loads(done.stdout)
    return results


def test_every_bad_input_is_a_typed_error_in_a_users_process() -> None:
    results = _run(SETUP, CASES)
    failures = {case: outcome for case, outcome in results.items() if outcome != "typed"}
    assert failures == {}, "\n".join(f"{case}  ->  {outcome}" for case, outcome in failures.items())
    assert len(results) == len(CASES)


def test_the_gpu_package_refuses_bad_input_typed() -> None:
    pytest.importorskip("torch")
    results = _run(GPU_SETUP, GPU_CASES)
    failures = {case: outcome for case, outcome in results.items() if outcome != "typed"}
    assert failures == {}, "\n".join(f"{case}  ->  {outcome}" for case, outcome in failures.items())


def test_the_audit_can_fail() -> None:
    """The runner tells the three outcomes apart (so a pass means what it says)."""
    results = _run(SETUP, ("KVCacheBlock(0)", "{}['missing']", "KVCacheBlock(-1)"))
    assert results["KVCacheBlock(0)"] == "accepted"
    assert results["{}['missing']"].startswith("untyped builtins.KeyError")
    assert results["KVCacheBlock(-1)"] == "typed"
