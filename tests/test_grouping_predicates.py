"""kvpure's layout predicates against vLLM 0.26.0's on every worker of the planning data.

``grouping_predicates.json`` holds what vLLM's ``is_kv_cache_spec_uniform`` and
``is_kv_cache_page_size_uniform`` returned on each worker's layer map of the planning
goldens and generated cases, and on the empty map
(``tools/vllm_oracle/grouping_helpers_vllm.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvpure.interop.planning import parse_kv_cache_spec
from kvpure.planning.grouping import is_kv_cache_page_size_uniform, is_kv_cache_spec_uniform
from kvpure.specs import KVCacheSpec
from kvpure.specs.layer_map import LayerMap
from tests.conftest import DATA_DIR

EXPECTED: dict[str, Any] = json.loads(
    (DATA_DIR / "vllm-0.26.0-oracle" / "grouping_predicates.json").read_text()
)
CASES = sorted(name for name in EXPECTED if name != "empty")


def test_the_empty_map_is_uniform_but_has_no_one_page_size() -> None:
    empty: LayerMap[KVCacheSpec] = LayerMap.from_mapping({})
    assert [is_kv_cache_spec_uniform(empty), is_kv_cache_page_size_uniform(empty)] == EXPECTED[
        "empty"
    ]


def test_the_predicates_cover_both_answers() -> None:
    rows = [row for name in CASES for row in EXPECTED[name] if isinstance(row, list)]
    assert len(rows) >= 200
    assert {tuple(row) for row in rows} == {
        (True, True),
        (False, False),
        (False, True),
        (True, False),
    }


@pytest.mark.parametrize("name", CASES)
def test_predicates_equal_vllms(name: str) -> None:
    case = json.loads((DATA_DIR / name).read_text())
    for worker, row in zip(case["input"]["kv_cache_specs"], EXPECTED[name], strict=True):
        if not isinstance(row, list):
            continue  # vLLM refused to build these specs
        specs = LayerMap.from_mapping(
            {
                layer: parse_kv_cache_spec(spec, vllm_version="0.26")
                for layer, spec in worker.items()
            }
        )
        assert [is_kv_cache_spec_uniform(specs), is_kv_cache_page_size_uniform(specs)] == row
