"""Every layer view of vLLM 0.26.0's tensor_views golden, reproduced on cpu.

The golden was made by vLLM's own worker helpers (``_allocate_kv_cache`` +
``_reshape_kv_cache``); each layer's raw tensor index and size, and each
view's dtype, shape, strides, storage offset and byte offset must match.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch

from kvpure.interop.spec_json import parse_kv_cache_spec
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure_gpu import KVCache, materialize_kv_cache, select_kernel_block_sizes
from tests.conftest import GOLDEN_026

GOLDEN = json.loads((GOLDEN_026 / "tensor_views.json").read_text())
SCENARIOS: dict[str, Any] = GOLDEN["scenarios"]
CASES = [(scenario, layer) for scenario, body in SCENARIOS.items() for layer in body["layers"]]


def kv_cache_config_from_json(obj: dict[str, Any]) -> KVCacheConfig:
    """The golden's ``kv_cache_config`` object as a kvpure value."""
    return KVCacheConfig(
        num_blocks=obj["num_blocks"],
        kv_cache_tensors=tuple(
            KVCacheTensor(
                size=t["size"],
                shared_by=tuple(t["shared_by"]),
                offset=t["offset"],
                block_stride=t["block_stride"],
            )
            for t in obj["kv_cache_tensors"]
        ),
        kv_cache_groups=tuple(
            KVCacheGroupSpec(
                layer_names=tuple(g["layer_names"]),
                kv_cache_spec=parse_kv_cache_spec(g["kv_cache_spec"], vllm_version="0.26"),
                is_eagle_group=g["is_eagle_group"],
            )
            for g in obj["kv_cache_groups"]
        ),
    )


@cache
def materialized(scenario: str) -> KVCache:
    body = SCENARIOS[scenario]
    config = kv_cache_config_from_json(body["kv_cache_config"])
    return materialize_kv_cache(config, "cpu", kernel_block_sizes=body["kernel_block_sizes"])


def _described(view: torch.Tensor, raw: torch.Tensor) -> dict[str, Any]:
    return {
        "dtype": str(view.dtype).removeprefix("torch."),
        "shape": list(view.shape),
        "stride": list(view.stride()),
        "storage_offset": view.storage_offset(),
        "byte_offset": view.data_ptr() - raw.data_ptr(),
    }


def test_the_golden_covers_every_kind_of_view() -> None:
    assert set(SCENARIOS) >= {
        "full_2layers_bf16",
        "hybrid_2full_4swa",
        "padded_page_full64_swa96",
        "packed_cross_layers_2full_2swa",
        "mla_2layers",
        "mamba_hybrid_f32",
        "uniform_type_head128_head64",
    }
    assert len(CASES) == sum(len(b["layers"]) for b in SCENARIOS.values())


@pytest.mark.parametrize(("scenario", "layer"), CASES)
def test_layer_view_matches_vllm(scenario: str, layer: str) -> None:
    expected = SCENARIOS[scenario]["layers"][layer]
    kv = materialized(scenario)
    got = kv.layers[layer]
    raw = kv.buffers.buffers[got.buffer_index]
    assert got.buffer_index == expected["raw_tensor_index"]
    assert raw.numel() == expected["raw_tensor_numel"]
    if "mamba_states" in expected:
        assert got.tensor is None
        assert [_described(s, raw) for s in got.states] == expected["mamba_states"]
    else:
        assert got.tensor is not None
        assert _described(got.tensor, raw) == expected["view"]
        assert got.backend == expected["backend"]


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_planned_layer_has_a_view_and_none_copies(scenario: str) -> None:
    kv = materialized(scenario)
    assert set(kv.layers) == set(SCENARIOS[scenario]["layers"])
    assert list(kv.kernel_block_sizes) == SCENARIOS[scenario]["kernel_block_sizes"]
    for got in kv.layers.values():
        raw = kv.buffers.buffers[got.buffer_index]
        for view in got.views:
            assert view.untyped_storage().data_ptr() == raw.untyped_storage().data_ptr()


def _planned_configs() -> list[tuple[str, int]]:
    cases: list[tuple[str, int]] = []
    for path in sorted(GOLDEN_026.glob("*.json")):
        body = json.loads(path.read_text())
        if isinstance(body.get("output"), list):
            cases.extend((path.stem, w) for w in range(len(body["output"])))
    return cases


@pytest.mark.parametrize(("case", "worker"), _planned_configs())
def test_every_planning_golden_materialises_on_meta(case: str, worker: int) -> None:
    body = json.loads((GOLDEN_026 / f"{case}.json").read_text())
    config = kv_cache_config_from_json(body["output"][worker])
    kv = materialize_kv_cache(config, "meta")
    expected = {name for g in config.kv_cache_groups for name in g.layer_names}
    assert set(kv.layers) == expected
    for layer in kv.layers.values():
        assert layer.views
        for view in layer.views:
            assert view.device.type == "meta"
            assert view.shape[0] == config.num_blocks  # default kernel block = block size


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_kernel_block_sizes_are_vllms_selection(scenario: str) -> None:
    config = kv_cache_config_from_json(SCENARIOS[scenario]["kv_cache_config"])
    assert list(select_kernel_block_sizes(config)) == SCENARIOS[scenario]["kernel_block_sizes"]
