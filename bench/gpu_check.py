"""Materialise real-sized plans on a GPU and check every layer's view.

Not a ``bench_*.py`` script, so ``make bench`` skips it; run it by hand on a
machine with a GPU::

    .venv/bin/python bench/gpu_check.py

For a Llama-3-8B-like, a Gemma-3-like and a Mamba-hybrid model it plans the
KV cache with kvpure's planner on 90% of the free GPU memory
(``torch.cuda.mem_get_info``), materialises it, writes a distinct value
through every layer's view (first, middle and last block), reads it back
through the view and through the raw bytes where the page must lie, checks
that the views aliasing it see the write and all other memory stays zero,
checks that no view copied (same storage, data pointer inside the buffer,
allocator growth equal to the buffers), and times the materialisation
against one ``torch.zeros`` of the same total size. It prints a table and
exits non-zero on any failure. Plans follow vLLM 0.26's layout (``RELEASE``).
Without CUDA it says so, runs the same checks on small plans on the CPU, and
exits 0 if they pass.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from kvpure.planning.planner import get_kv_cache_configs
from kvpure.specs import (
    AttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    KVDtype,
    MambaSpec,
    SlidingWindowSpec,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, PlannerSettings
from kvpure.specs.layer_map import LayerMap
from kvpure_gpu import (
    KVCache,
    LayerKVCache,
    allocate_kv_cache_buffers,
    bind_kv_cache_views,
    materialize_kv_cache,
)
from kvpure_gpu.single_backing import backing_size, uses_single_backing

GiB = 1 << 30
RELEASE = "0.26"
"""The plans are vLLM 0.26's layout (a buffer per tensor), whose pages these checks locate
in the raw bytes; 0.33+'s single backing is checked by ``tests/test_gpu_single_backing.py``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    name: str
    layers: tuple[tuple[str, KVCacheSpec], ...]
    settings: PlannerSettings


def llama3_8b_like(max_model_len: int) -> Case:
    spec = FullAttentionSpec(
        block_size=16,
        num_kv_heads=8,
        head_size=128,
        dtype=KVDtype.BFLOAT16,
        indexes_kv_by_block_stride=True,
    )
    return Case(
        name="llama3-8b-like",
        layers=tuple((f"model.layers.{i}.self_attn.attn", spec) for i in range(32)),
        settings=PlannerSettings(block_size=16, max_model_len=max_model_len, vllm_version=RELEASE),
    )


def gemma3_like(max_model_len: int) -> Case:
    full = FullAttentionSpec(
        block_size=16,
        num_kv_heads=8,
        head_size=256,
        dtype=KVDtype.BFLOAT16,
        indexes_kv_by_block_stride=True,
    )
    sliding = SlidingWindowSpec(
        block_size=16,
        num_kv_heads=8,
        head_size=256,
        dtype=KVDtype.BFLOAT16,
        indexes_kv_by_block_stride=True,
        sliding_window=1024,
    )
    return Case(
        name="gemma3-12b-like",
        layers=tuple(
            (f"model.layers.{i}.self_attn.attn", full if (i + 1) % 6 == 0 else sliding)
            for i in range(48)
        ),
        settings=PlannerSettings(block_size=16, max_model_len=max_model_len, vllm_version=RELEASE),
    )


def mamba_hybrid(max_model_len: int) -> Case:
    # As the planning golden mamba_hybrid_4attn_28mamba: attention block 528
    # (platform alignment), Mamba page padded to the attention page (2162688
    # bytes), Mamba block size = max_model_len in mamba_cache_mode "none".
    attn = FullAttentionSpec(
        block_size=528,
        num_kv_heads=8,
        head_size=128,
        dtype=KVDtype.BFLOAT16,
        indexes_kv_by_block_stride=True,
    )
    mamba = MambaSpec(
        block_size=max_model_len,
        shapes=((10240, 3), (128, 64, 128)),
        dtypes=(KVDtype.BFLOAT16, KVDtype.BFLOAT16),
        page_size_padded=attn.page_size_bytes,
    )
    return Case(
        name="mamba2-hybrid",
        layers=tuple(
            (
                f"model.layers.{i}.self_attn.attn" if i % 8 == 7 else f"model.layers.{i}.mixer",
                attn if i % 8 == 7 else mamba,
            )
            for i in range(32)
        ),
        settings=PlannerSettings(
            block_size=528,
            enable_prefix_caching=False,
            max_model_len=max_model_len,
            vllm_version=RELEASE,
        ),
    )


def plan(case: Case, available_bytes: int) -> KVCacheConfig:
    """The case's KV cache as kvpure's planner (vLLM's rules) lays it out."""
    specs = LayerMap.from_pairs(case.layers)
    result = get_kv_cache_configs(case.settings, [specs], [available_bytes])
    return result.kv_cache_configs[0]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


T = TypeVar("T")


def _timed(device: torch.device, fn: Callable[[], T]) -> tuple[T, float]:
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - start


def _page_regions(kv: KVCache, layer: LayerKVCache, block: int) -> list[tuple[int, int]]:
    """``(start byte, length)`` where each of the layer's views must put ``block``'s data,
    worked out from the plan and the spec alone (not from the views)."""
    tensor = kv.kv_cache_config.kv_cache_tensors[kv.buffers.layer_tensor_index[layer.layer_name]]
    stride = tensor.block_stride or layer.spec.page_size_bytes
    start = block * stride + (tensor.offset if tensor.block_stride else 0)
    spec = layer.spec
    if isinstance(spec, MambaSpec):
        regions = []
        for shape, dtype in zip(spec.shapes, spec.dtypes, strict=True):
            length = math.prod(shape) * dtype.itemsize
            regions.append((start, length))
            start += length
        return regions
    if isinstance(spec, AttentionSpec):
        return [(start, spec.unpadded_page_size_bytes)]
    raise SystemExit(f"{layer.layer_name}: no check for {type(spec).__name__}")


def check_case(kv: KVCache, failures: list[str]) -> int:
    """Run every check on one materialised cache; returns the number of checks run."""
    checks = 0
    buffers = kv.buffers.buffers
    num_blocks = kv.kv_cache_config.num_blocks
    sample_blocks = sorted({0, num_blocks // 2, num_blocks - 1})
    for name, layer in kv.layers.items():
        raw = kv.buffers.buffers[layer.buffer_index]
        for view in layer.views:
            checks += 1
            inside = raw.data_ptr() <= view.data_ptr() < raw.data_ptr() + raw.numel()
            same = view.untyped_storage().data_ptr() == raw.untyped_storage().data_ptr()
            if not (inside and same):
                failures.append(f"{name}: view is not inside its buffer (copied?)")
    for number, (name, layer) in enumerate(kv.layers.items()):
        value = float(number % 200 + 1)
        raw = buffers[layer.buffer_index]
        for block in sample_blocks:
            for view in layer.views:
                view[block].fill_(value)
        for block in sample_blocks:
            for view in layer.views:
                checks += 1
                if not bool((view[block] == value).all()):
                    failures.append(f"{name}: block {block} does not read back {value}")
            for (start, length), view in zip(
                _page_regions(kv, layer, block), layer.views, strict=True
            ):
                checks += 1
                region = raw[start : start + length].view(view.dtype)
                if not bool((region == value).all()):
                    failures.append(f"{name}: block {block}: raw bytes at {start} miss the write")
            for other_name, other in kv.layers.items():
                if other_name == name or other.buffer_index != layer.buffer_index:
                    continue
                checks += 1
                t_self = kv.buffers.layer_tensor_index[name]
                t_other = kv.buffers.layer_tensor_index[other_name]
                tensors = kv.kv_cache_config.kv_cache_tensors
                aliased = tensors[t_self].offset == tensors[t_other].offset
                sees = any(bool(v[block].ne(0).any()) for v in other.views)
                if sees != aliased:
                    failures.append(
                        f"{name}: {other_name} {'misses' if aliased else 'sees'} the write"
                    )
        # Zero exactly where the pages must lie; then all memory must be zero again.
        for block in sample_blocks:
            for start, length in _page_regions(kv, layer, block):
                raw[start : start + length].zero_()
        for b_index, buffer in enumerate(buffers):
            checks += 1
            if bool(buffer.any()):
                failures.append(
                    f"{name}: the write reached bytes outside its pages (buffer {b_index})"
                )
                buffer.zero_()
    return checks


def _release(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _best_of(device: torch.device, fn: Callable[[], object], repeats: int = 3) -> float:
    """Fastest of ``repeats`` runs, freeing what each run made before the next."""
    best = math.inf
    for _ in range(repeats):
        out, seconds = _timed(device, fn)
        del out
        _release(device)
        best = min(best, seconds)
    return best


def planned_bytes(config: KVCacheConfig) -> int:
    """The bytes ``allocate_kv_cache_buffers`` takes for ``config``: the one backing of a
    vLLM 0.33+ plan (every tensor states its size), else each tensor's own buffer, packed
    tensors sharing one."""
    if uses_single_backing(config):
        return backing_size(config)
    packed = [t.size for t in config.kv_cache_tensors if t.block_stride > 0]
    alone = sum(t.size for t in config.kv_cache_tensors if t.block_stride == 0)
    return alone + (packed[0] if packed else 0)


def run_case(case: Case, device: torch.device, budget_bytes: int, failures: list[str]) -> list[str]:
    num_failures = len(failures)
    config = plan(case, budget_bytes)
    total = planned_bytes(config)
    t_mat = _best_of(device, lambda: materialize_kv_cache(config, device))
    t_zeros = _best_of(device, lambda: torch.zeros(total, dtype=torch.int8, device=device))
    before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    buffers = allocate_kv_cache_buffers(config, device)
    t_views = _best_of(device, lambda: bind_kv_cache_views(config, buffers))
    kv = bind_kv_cache_views(config, buffers)
    if device.type == "cuda":
        grown = torch.cuda.memory_allocated(device) - before
        slack = len(kv.buffers.buffers) * (2 << 20)
        if not kv.buffers.total_bytes <= grown <= kv.buffers.total_bytes + slack:
            failures.append(f"{case.name}: allocator grew {grown} B for {kv.buffers.total_bytes} B")
    checks = check_case(kv, failures)
    status = "ok" if len(failures) == num_failures else "FAIL"
    return [
        case.name,
        str(len(case.layers)),
        str(len(config.kv_cache_groups)),
        str(config.num_blocks),
        f"{total / GiB:.2f}",
        f"{t_mat * 1e3:.1f}",
        f"{t_zeros * 1e3:.1f}",
        f"{t_mat / t_zeros:.2f}x" if t_zeros > 0 else "-",
        f"{t_views * 1e3:.2f}",
        str(checks),
        status,
    ]


def main() -> int:
    if torch.cuda.is_available():
        device = torch.device("cuda")
        torch.zeros(1, device=device)  # initialise the context before timing
        free, total = torch.cuda.mem_get_info(device)
        budget = int(free * 0.9)
        lengths = (8192, 32768, 65536)
        print(
            f"device: {torch.cuda.get_device_name(device)}, free {free / GiB:.1f} GiB "
            f"of {total / GiB:.1f} GiB; planning on 90% of free = {budget / GiB:.1f} GiB"
        )
    else:
        device = torch.device("cpu")
        budget = 256 << 20
        lengths = (256, 256, 256)
        print(
            "no CUDA device: running the same checks on small plans on the CPU "
            f"({budget >> 20} MiB each)"
        )
    cases = [
        llama3_8b_like(lengths[0]),
        gemma3_like(lengths[1]),
        mamba_hybrid(lengths[2]),
    ]
    # Warm up torch's allocator and kernels on a tiny plan before timing anything.
    materialize_kv_cache(plan(llama3_8b_like(16), 64 * 32 * 65536), device)
    _release(device)
    failures: list[str] = []
    header = ["case", "layers", "groups", "blocks", "GiB", "materialize ms",
              "torch.zeros ms", "ratio", "views only ms", "checks", "status"]  # fmt: skip
    rows = []
    for case in cases:
        rows.append(run_case(case, device, budget, failures))
        _release(device)  # the case's buffers died with run_case's frame
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    print("baseline: one torch.zeros(int8) of the same total size on the same device; "
          "ratio = materialize / baseline; best of 3 runs each; 'views only' = "
          "bind_kv_cache_views on buffers already allocated")  # fmt: skip
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
