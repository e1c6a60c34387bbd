"""kvpure_gpu refuses bad input with typed errors naming the field (issue 24, item 6).

The sweep (``tools/api_fuzz.py --gpu-only``: every public kvpure_gpu function
and constructor, each parameter given every bad value of its kind) runs in a
user's process; the cases below pin the field each error names, and that a
plan too large for its device is refused before torch is asked to allocate.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch

from kvpure.specs import FullAttentionSpec, KVDtype
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure_gpu import (
    AttentionGeometry,
    KVCacheLayout,
    allocate_kv_cache_buffers,
    attention_view,
    materialize_kv_cache,
)
from kvpure_gpu.checks import MAX_TENSOR_BYTES, device_capacity
from kvpure_gpu.errors import AllocationTooLargeError
from tests.api_audit_runner import run_cases

ROOT = Path(__file__).resolve().parent.parent
SPEC = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype=KVDtype.BFLOAT16)
PAGE = SPEC.page_size_bytes


def _config(num_blocks: int) -> KVCacheConfig:
    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=(KVCacheTensor(size=num_blocks * PAGE, shared_by=("a",)),),
        kv_cache_groups=(KVCacheGroupSpec(layer_names=("a",), kv_cache_spec=SPEC),),
    )


def test_the_gpu_sweep_finds_nothing_untyped_or_accepted() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "api_fuzz.py"), "--gpu-only"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = re.search(
        r"GPU API: (\d+) entry points, (\d+) typed / (\d+) untyped / (\d+) accepted "
        r"\((\d+) good calls failed\)",
        done.stdout,
    )
    assert summary is not None, done.stdout[-2000:]
    entries, typed, untyped, accepted, good_failed = map(int, summary.groups())
    assert (untyped, accepted, good_failed) == (0, 0, 0), done.stdout[-4000:]
    assert entries >= 25
    assert typed >= 600


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_trillion_blocks_are_refused_before_allocating(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_allocation(*args: object, **kwargs: object) -> torch.Tensor:
        raise AssertionError("torch was asked to allocate")

    monkeypatch.setattr(torch, "zeros", no_allocation)
    monkeypatch.setattr(torch, "empty", no_allocation)
    # 10**12 blocks of a 1 KiB page fit torch's size limit (meta), not a host's memory (cpu);
    # 10**19 blocks fit neither.
    num_blocks = 10**12 if device == "cpu" else 10**19
    with pytest.raises(AllocationTooLargeError) as info:
        allocate_kv_cache_buffers(_config(num_blocks), device)
    assert info.value.field == "kv_cache_config.kv_cache_tensors"
    assert info.value.total_bytes == num_blocks * PAGE
    assert info.value.capacity_bytes <= MAX_TENSOR_BYTES
    with pytest.raises(AllocationTooLargeError):
        materialize_kv_cache(_config(num_blocks), device, zero_fill=False)


def test_a_trillion_blocks_on_meta_are_laid_out_without_memory() -> None:
    kv = materialize_kv_cache(_config(10**12), "meta")
    assert kv.layers["a"].tensor is not None
    assert kv.layers["a"].tensor.shape[0] == 10**12


def test_cpu_capacity_is_the_hosts_memory() -> None:
    capacity = device_capacity(torch.device("cpu"))
    assert 0 < capacity <= MAX_TENSOR_BYTES
    assert allocate_kv_cache_buffers(_config(4), "cpu").total_bytes == 4 * PAGE


FIELD_SETUP = """
import torch
from kvpure.block_table import BlockTableLayout
from kvpure.specs import FullAttentionSpec, KVDtype
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure_gpu import *
SPEC = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype=KVDtype.BFLOAT16)
PAGE = SPEC.page_size_bytes
def config(n):
    return KVCacheConfig(
        num_blocks=n,
        kv_cache_tensors=(KVCacheTensor(size=n * PAGE, shared_by=('a',)),),
        kv_cache_groups=(KVCacheGroupSpec(layer_names=('a',), kv_cache_spec=SPEC),),
    )
def geometry(**overrides):
    fields = dict(layer_name='a', layout=KVCacheLayout.FLASH_ATTN_NHD, dtype=torch.bfloat16,
                  block_size=16, storage_block_size=16, num_kv_heads=2, head_size=8,
                  data_bytes=PAGE, page_size_bytes=PAGE)
    fields.update(overrides)
    return AttentionGeometry(**fields)
RAW = torch.zeros(4 * PAGE, dtype=torch.int8)
"""

FIELD_CASES: tuple[tuple[str, str], ...] = (
    ("allocate_kv_cache_buffers(config(1), 'nope')", "device"),
    ("allocate_kv_cache_buffers(config(1), '')", "device"),
    ("allocate_kv_cache_buffers(config(1), True)", "device"),
    ("allocate_kv_cache_buffers(config(1), -1)", "device"),
    ("allocate_kv_cache_buffers(config(1), None)", "device"),
    (
        "batch_block_tables([[0]], [0], [0], BlockTableLayout(block_size=16), "
        "max_num_blocks_per_req=1, device='cpu:-1')",
        "device",
    ),
    ("slot_mapping_tensor([[0]], [0], [0], BlockTableLayout(block_size=16), device=3.5)", "device"),
    ("materialize_kv_cache(config(1), 'meta', kernel_block_sizes=[True])", "kernel_block_sizes[0]"),
    (
        "materialize_kv_cache(config(1), 'meta', kernel_block_sizes=[float('nan')])",
        "kernel_block_sizes[0]",
    ),
    (
        "materialize_kv_cache(config(1), 'meta', kernel_block_sizes=[2**200])",
        "kernel_block_sizes[0]",
    ),
    ("materialize_kv_cache(config(1), 'meta', kernel_block_sizes='16')", "kernel_block_sizes"),
    ("materialize_kv_cache(config(1), 'meta', kernel_block_sizes=[16, 16])", "kernel_block_sizes"),
    ("materialize_kv_cache(config(1), 'meta', layouts={'a': 'mla'})", "layouts['a']"),
    ("select_kernel_block_sizes(config(1), layouts={3: KVCacheLayout.MLA})", "layouts"),
    (
        "bind_kv_cache_views(config(1), allocate_kv_cache_buffers(config(1), 'meta'), "
        "layouts={'a': None})",
        "layouts['a']",
    ),
    ("single_backing_views(config(1), RAW, [None])", "kernel_block_sizes[0]"),
    ("single_backing_views(config(1), torch.zeros(PAGE), [16])", "raw"),
    ("KVCacheLayout('nope')", "layout"),
    ("KVCacheLayout(None)", "layout"),
    ("KVCacheLayout.MLA.kv_cache_shape(-1, 16, 1, 8)", "num_blocks"),
    ("KVCacheLayout.MLA.kv_cache_shape(4, True, 1, 8)", "block_size"),
    ("KVCacheLayout.MLA.kv_cache_shape(4, 16, 1, float('inf'))", "head_size"),
    ("allocate_kv_cache_buffers(config(1), 'cpu').buffer_of('b')", "layer_name"),
    ("allocate_kv_cache_buffers(config(1), 'cpu').buffer_of(None)", "layer_name"),
    ("byte_offset([0, 1])", "view"),
    ("Packing(offset_bytes=-1, block_stride_bytes=PAGE)", "offset_bytes"),
    ("Packing(offset_bytes=0, block_stride_bytes=True)", "block_stride_bytes"),
    (
        "MambaGeometry(layer_name='m', shapes=((2, 0),), dtypes=(torch.float32,), "
        "page_size_bytes=32)",
        "shapes[0][1]",
    ),
    (
        "MambaGeometry(layer_name='m', shapes=((2, 4),), dtypes=('float32',), page_size_bytes=32)",
        "dtypes[0]",
    ),
    (
        "MambaGeometry(layer_name='m', shapes=((2, 4),), dtypes=(torch.float32,), "
        "page_size_bytes=float('nan'))",
        "page_size_bytes",
    ),
    ("geometry(block_size=True)", "block_size"),
    ("geometry(block_size=0)", "block_size"),
    ("geometry(num_kv_heads=float('nan'))", "num_kv_heads"),
    ("geometry(head_size=2**200)", "head_size"),
    ("geometry(data_bytes='3')", "data_bytes"),
    ("geometry(page_size_bytes=None)", "page_size_bytes"),
    ("geometry(layer_name=3)", "layer_name"),
    ("geometry(layout='mla')", "layout"),
    ("geometry(dtype='bfloat16')", "dtype"),
    ("geometry(dtype=KVDtype.BFLOAT16)", "dtype"),
    ("attention_view(torch.zeros(4 * PAGE), geometry(), kernel_block_size=16)", "raw"),
    (
        "attention_view(torch.zeros(2, 2 * PAGE, dtype=torch.int8), geometry(), "
        "kernel_block_size=16)",
        "raw",
    ),
    ("attention_view(RAW, geometry(), kernel_block_size=True)", "kernel_block_size"),
    ("attention_view(RAW, geometry(), kernel_block_size=float('nan'))", "kernel_block_size"),
    ("mamba_state_views(RAW.view(torch.int16), mamba_geometry('m', None))", "spec"),
)


def test_the_error_names_the_field() -> None:
    """Each bad argument gets a kvpure error whose message starts with the field's name
    (run in a user's process: no beartype hook)."""
    results = run_cases(FIELD_SETUP, [source for source, _ in FIELD_CASES])
    wrong = {}
    for source, field in FIELD_CASES:
        outcome, kind, text = results[source]
        if outcome != "typed" or not (text.startswith(f"{field}:") or f" {field} " in text):
            wrong[source] = (field, outcome, kind, text[:200])
    assert wrong == {}, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_wrong_dtype_kinds_are_typed() -> None:
    results = run_cases(FIELD_SETUP, ["geometry(dtype=torch.qint8)"])
    assert results["geometry(dtype=torch.qint8)"][:2] == ("typed", "UnsupportedDtypeError")


def test_a_one_dimensional_int8_buffer_is_viewed() -> None:
    geometry = AttentionGeometry(
        layer_name="a",
        layout=KVCacheLayout.FLASH_ATTN_NHD,
        dtype=torch.bfloat16,
        block_size=16,
        storage_block_size=16,
        num_kv_heads=2,
        head_size=8,
        data_bytes=PAGE,
        page_size_bytes=PAGE,
    )
    view = attention_view(torch.zeros(4 * PAGE, dtype=torch.int8), geometry, kernel_block_size=16)
    assert view.shape == (4, 2, 16, 16)
