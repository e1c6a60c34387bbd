"""vLLM 0.34 plans become ONE backing buffer per worker and per-layer LBNHC views.

Expected numbers come from the 0.34 planning goldens' ``output`` (vLLM's own
``KVCacheTensor`` fields and spec fields): the buffer's size is the tensors'
``size``; layer ``l`` of a tensor, block ``b``, starts at
``offset + l * layer_stride + b * block_stride`` (vLLM's ``KVCacheTensor``
contract); the view's shape is vLLM 0.34's ``[B, H, N, C]``
(``compute_layer_kv_cache_shape_bytes``) in the spec's dtype. The goldens'
pools are tens of GiB, so they are viewed on ``meta``; aliasing is checked on
``cpu`` with the same specs and a few blocks.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from functools import cache
from typing import Any

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch

from kvpure.errors import InvalidFieldError
from kvpure.interop.spec_json import parse_kv_cache_spec
from kvpure.specs import AttentionSpec, KVQuantMode
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure_gpu import KVCacheLayout, allocate_kv_cache_buffers, materialize_kv_cache
from kvpure_gpu.errors import (
    BackingSizeMismatchError,
    LayerOutsideBackingError,
    LayoutCannotExpressPageError,
    UnsupportedViewError,
)
from kvpure_gpu.single_backing import uses_single_backing
from kvpure_gpu.views import byte_offset
from tests.conftest import DATA_DIR

GOLDEN_034 = DATA_DIR / "vllm-0.34.0"
CASES = ("llama3_8b", "gemma3_12b", "gpt_oss_20b", "deepseek_v3_mla", "mamba_hybrid_4attn_28mamba")
_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1}


@cache
def golden_output(case: str) -> dict[str, Any]:
    output: dict[str, Any] = json.loads((GOLDEN_034 / f"{case}.json").read_text())["output"][0]
    return output


def config_from_golden(obj: dict[str, Any]) -> KVCacheConfig:
    """A golden ``output`` entry (vLLM 0.34's KVCacheConfig) as a kvpure value."""
    return KVCacheConfig(
        num_blocks=obj["num_blocks"],
        kv_cache_tensors=tuple(
            KVCacheTensor(
                size=t["size"],
                shared_by=tuple(t["layers"]),
                offset=t["offset"],
                block_stride=t["block_stride"],
                layer_stride=t["layer_stride"],
                host_resident=t["host_resident"],
            )
            for t in obj["kv_cache_tensors"]
        ),
        kv_cache_groups=tuple(
            KVCacheGroupSpec(
                layer_names=tuple(g["layer_names"]),
                kv_cache_spec=parse_kv_cache_spec(g["kv_cache_spec"], vllm_version="0.34"),
                is_eagle_group=g["is_eagle_group"],
            )
            for g in obj["kv_cache_groups"]
        ),
    )


def golden_spec_of(obj: dict[str, Any], layer: str) -> dict[str, Any]:
    for group in obj["kv_cache_groups"]:
        if layer in group["layer_names"]:
            spec: dict[str, Any] = group["kv_cache_spec"]
            return spec
    raise AssertionError(f"{layer} in no golden group")


def expected_view(spec: dict[str, Any], num_blocks: int) -> tuple[torch.dtype, tuple[int, ...]]:
    """vLLM 0.34's per-layer view: dtype and ``[B, H, N, C]`` shape, from the spec's fields."""
    if spec["type"] == "MambaSpec":
        # no dtype attribute: int8 [B, num_heads, 1 state, state bytes]
        return torch.int8, (
            num_blocks,
            spec["num_heads"],
            1,
            spec["_derived"]["real_page_size_bytes"],
        )
    itemsize = _ITEMSIZE[spec["dtype"]]
    heads = spec["num_head_slots"] or spec["num_kv_heads"]
    content = spec["state_content_bytes"] or (spec["head_size"] + spec["head_size_v"]) * itemsize
    states = spec["block_size"] // spec["tokens_per_state"]
    dtype = getattr(torch, spec["dtype"])
    return dtype, (num_blocks, heads, states, content // itemsize)


def extent(view: torch.Tensor) -> tuple[int, int]:
    """``[first byte, end byte)`` a view touches."""
    start = byte_offset(view)
    last = sum((n - 1) * s for n, s in zip(view.shape, view.stride(), strict=True))
    return start, start + (last + 1) * view.element_size()


@pytest.mark.parametrize("case", CASES)
def test_golden_plan_is_one_buffer_of_the_pool_size(case: str) -> None:
    obj = golden_output(case)
    config = config_from_golden(obj)
    assert uses_single_backing(config), "a 0.34 plan has layer strides"
    buffers = allocate_kv_cache_buffers(config, "meta")
    sizes = {t["size"] for t in obj["kv_cache_tensors"]}
    assert len(sizes) == 1, "golden: every tensor states the one pool size"
    assert len(buffers.buffers) == 1, "one backing allocation per worker"
    assert buffers.buffers[0].numel() == sizes.pop(), "the buffer is the pool's size"
    assert buffers.buffers[0].dtype == torch.int8
    assert buffers.tensor_buffer_index == (0,) * len(obj["kv_cache_tensors"])
    assert buffers.total_bytes == buffers.buffers[0].numel()


@pytest.mark.parametrize("case", CASES)
def test_golden_layer_views_follow_the_tensor_strides(case: str) -> None:
    obj = golden_output(case)
    cache_ = materialize_kv_cache(config_from_golden(obj), "meta")
    size, num_blocks = obj["kv_cache_tensors"][0]["size"], obj["num_blocks"]
    raw = cache_.buffers.buffers[0]
    placed = {name for t in obj["kv_cache_tensors"] for name in t["layers"]}
    assert placed == set(cache_.layers), "every placed layer, and only those, has a view"
    for t in obj["kv_cache_tensors"]:
        spans = []
        for index, name in enumerate(t["layers"]):
            layer = cache_.layers[name]
            view = layer.tensor
            assert view is not None
            assert layer.layout is None
            assert layer.buffer_index == 0
            assert view.untyped_storage().nbytes() == raw.untyped_storage().nbytes()
            dtype, shape = expected_view(golden_spec_of(obj, name), num_blocks)
            assert view.dtype == dtype, f"{name}: view dtype is the spec's"
            assert tuple(view.shape) == shape, f"{name}: [B, H, N, C] of the spec"
            # LBNHC (vLLM's KVCacheLayout.LBNHC = (0, 1, 3, 2, 4)): in a page N is outer to
            # H and C is contiguous, so element [b, h, n, c] is at (n * H + h) * C + c.
            _, heads, _, content = shape
            block_elems = t["block_stride"] // view.element_size()
            assert view.stride() == (block_elems, content, heads * content, 1), f"{name}: LBNHC"
            for b in (0, 1, num_blocks - 1):
                start = t["offset"] + index * t["layer_stride"] + b * t["block_stride"]
                assert byte_offset(view[b]) == start, f"{name}: block {b} start"
                lo, hi = extent(view[b])
                assert hi - lo <= t["block_stride"], f"{name}: a page fits its block stride"
            lo, hi = extent(view)
            assert lo >= 0, f"{name}: view starts inside the buffer"
            assert hi <= size, f"{name}: view ends inside the buffer"
            spans.append((lo, hi))
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start, "distinct layers of one tensor do not overlap"


def test_views_alias_the_buffer_without_copying() -> None:
    obj = golden_output("gpt_oss_20b")
    golden = config_from_golden(obj)
    nb = 4  # few blocks on cpu: vLLM's LBNHC layer stride is num_blocks * block stride
    small = replace(
        golden,
        num_blocks=nb,
        kv_cache_tensors=tuple(
            replace(
                t, size=len(t.shared_by) * t.block_stride * nb, layer_stride=t.block_stride * nb
            )
            for t in golden.kv_cache_tensors
        ),
    )
    kv = materialize_kv_cache(small, "cpu")
    raw = kv.buffers.buffers[0]
    assert int(raw.count_nonzero()) == 0, "zero-filled by default"
    t0 = obj["kv_cache_tensors"][0]
    name = t0["layers"][1]
    view = kv.layers[name].tensor
    assert view is not None
    view[2].fill_(1.0)
    start = 1 * t0["block_stride"] * nb + 2 * t0["block_stride"]
    touched = raw.nonzero().flatten()
    assert int(touched.min()) == start, "the write lands at layer 1's block 2"
    assert int(touched.max()) == start + t0["block_stride"] - 1, "and only there"
    # the other group's tensor starts at offset 0 too: its layer 1 aliases the same bytes
    other = kv.layers[obj["kv_cache_tensors"][1]["layers"][1]].tensor
    assert other is not None
    assert bool((other[2] == 1.0).all()), "groups overlay one another (vLLM's aliasing)"


def test_kernel_block_split_divides_the_block_stride() -> None:
    golden = config_from_golden(golden_output("llama3_8b"))
    kv = materialize_kv_cache(golden, "meta", kernel_block_sizes=[8])
    view = kv.layers["model.layers.3.self_attn.attn"].tensor
    assert view is not None
    assert tuple(view.shape) == (2 * 8192, 8, 8, 256)
    assert byte_offset(view[5]) == 3 * 536870912 + 5 * 65536 // 2


def test_kernel_split_of_a_padded_page_is_refused() -> None:
    golden = config_from_golden(golden_output("llama3_8b"))
    spec = golden.kv_cache_groups[0].kv_cache_spec
    assert isinstance(spec, AttentionSpec)
    padded = replace(spec, page_size_padded=spec.page_size_bytes)
    config = replace(
        golden, kv_cache_groups=(replace(golden.kv_cache_groups[0], kv_cache_spec=padded),)
    )
    with pytest.raises(LayoutCannotExpressPageError, match="padded"):
        materialize_kv_cache(config, "meta", kernel_block_sizes=[8])


def test_tensors_stating_different_sizes_are_refused() -> None:
    golden = config_from_golden(golden_output("gpt_oss_20b"))
    t0, t1 = golden.kv_cache_tensors
    config = replace(golden, kv_cache_tensors=(t0, replace(t1, size=t1.size - 1)))
    with pytest.raises(BackingSizeMismatchError, match=r"kv_cache_tensors\[1\]") as err:
        allocate_kv_cache_buffers(config, "meta")
    assert isinstance(err.value, ValueError)


def test_a_layer_past_the_buffer_is_refused() -> None:
    golden = config_from_golden(golden_output("llama3_8b"))
    (t0,) = golden.kv_cache_tensors
    config = replace(golden, kv_cache_tensors=(replace(t0, offset=65536),))
    with pytest.raises(LayerOutsideBackingError, match=r"layers\.31"):
        materialize_kv_cache(config, "meta")


def test_quantised_and_host_resident_layers_name_the_unsupported_view() -> None:
    golden = config_from_golden(golden_output("llama3_8b"))
    (t0,) = golden.kv_cache_tensors
    host = replace(golden, kv_cache_tensors=(replace(t0, host_resident=True),))
    with pytest.raises(UnsupportedViewError, match="host-resident"):
        materialize_kv_cache(host, "meta")
    spec = golden.kv_cache_groups[0].kv_cache_spec
    assert isinstance(spec, AttentionSpec)
    quant = replace(spec, kv_quant_mode=KVQuantMode.INT8_PER_TOKEN_HEAD)
    config = replace(
        golden, kv_cache_groups=(replace(golden.kv_cache_groups[0], kv_cache_spec=quant),)
    )
    with pytest.raises(UnsupportedViewError, match="INT8_PER_TOKEN_HEAD") as err:
        materialize_kv_cache(config, "meta")
    assert isinstance(err.value, NotImplementedError)


def test_backend_layouts_do_not_apply_to_a_single_backing_plan() -> None:
    golden = config_from_golden(golden_output("llama3_8b"))
    with pytest.raises(InvalidFieldError, match="layouts"):
        materialize_kv_cache(
            golden,
            "meta",
            layouts={"model.layers.0.self_attn.attn": KVCacheLayout.FLASH_ATTN_HND},
        )


def test_026_plans_keep_one_buffer_per_tensor() -> None:
    from tests.test_gpu_golden import SCENARIOS, kv_cache_config_from_json

    for scenario, body in SCENARIOS.items():
        config = kv_cache_config_from_json(body["kv_cache_config"])
        assert not uses_single_backing(config), f"{scenario}: a 0.26 plan has no layer stride"
        buffers = allocate_kv_cache_buffers(config, "meta")
        unpacked = sum(1 for t in config.kv_cache_tensors if t.block_stride == 0)
        packed = any(t.block_stride > 0 for t in config.kv_cache_tensors)
        assert len(buffers.buffers) == unpacked + packed, f"{scenario}: 0.26 allocation"
