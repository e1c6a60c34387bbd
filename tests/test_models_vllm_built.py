"""kvpure's derived specs against the specs vLLM 0.26's own model code builds.

``vllm_model_specs.json`` was written by tools/model_configs/vllm_model_specs.py:
each bundled config.json built by vLLM 0.26's model class (meta device, tensor
parallel 1) and every layer asked for ``get_kv_cache_spec`` as the GPU model
runner asks. Every layer name, spec kind, head count, head size, window, chunk,
dtype and recurrent-state shape/dtype/backend must be equal. Known, deliberate
difference: gpt-oss's layers are named ``model.layers.{i}.attn.attn`` by vLLM
and ``...self_attn.attn`` by kvpure, as the golden planning case spells them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.derive import derive_kv_cache_specs
from kvpure.specs import KVCacheSpec, KVDtype
from kvpure.specs.mamba import MambaAttentionBackendEnum

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "model_configs"
BUILT: dict[str, Any] = json.loads((CONFIGS / "vllm_model_specs.json").read_text())["models"]
FIELDS = (
    "num_kv_heads",
    "head_size",
    "head_size_v",
    "sliding_window",
    "attention_chunk_size",
    "dtype",
    "shapes",
    "dtypes",
    "mamba_type",
)


def _config(name: str) -> dict[str, Any]:
    path = CONFIGS / name if (CONFIGS / name).exists() else ROOT / "examples" / name
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _plain(field: str, value: object) -> object:
    if isinstance(value, KVDtype):
        return value.value
    if isinstance(value, MambaAttentionBackendEnum):
        return value.name
    if field == "shapes" and isinstance(value, tuple):
        # vLLM's default SD layout writes the conv state (state_len, channels);
        # kvpure writes (channels, state_len), as the goldens do: the same bytes.
        conv, *rest = (list(shape) for shape in value)
        return [conv[::-1], *rest]
    if isinstance(value, tuple):
        return [_plain(field, item) for item in value]
    return value


def _fields(spec: KVCacheSpec) -> dict[str, object]:
    return {f: _plain(f, getattr(spec, f)) for f in FIELDS if hasattr(spec, f)}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_specs_equal_what_vllms_model_code_builds(name: str) -> None:
    built = BUILT[name]
    layout = model_layout(parse_model_config(_config(name)))
    assert layout.architecture == built["architecture"]
    limit = min(2048, layout.derived_max_model_len)
    derived = derive_kv_cache_specs(
        layout, Deployment(kv_cache_memory_bytes=2**36, max_model_len=limit)
    )
    ours = derived.kv_cache_specs[0]
    theirs: dict[str, dict[str, Any]] = built["specs"]
    names = list(ours.keys())
    if built["architecture"] == "GptOssForCausalLM":
        names = [n.replace(".self_attn.attn", ".attn.attn") for n in names]
    assert names == list(theirs)
    assert len(theirs) > 0
    for ours_spec, (layer, expected) in zip(ours.ordered_values(), theirs.items(), strict=True):
        assert type(ours_spec).__name__ == expected["type"], layer
        got = _fields(ours_spec)
        assert got == {f: expected[f] for f in got}, layer
