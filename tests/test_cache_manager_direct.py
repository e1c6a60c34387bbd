"""The per-group managers called directly, against vLLM 0.26.0's own managers.

``tests/data/vllm-0.26.0-oracle/manager_direct.json`` holds the cases of
``tools/vllm_oracle/gen_manager_direct_cases.py`` and what vLLM 0.26.0's managers and
block pool answered to each call (``manager_direct_vllm.py``): calls the coordinator
never makes (a sliding-window lookup aligned to two blocks, ``apply_admission_cap``
left to its default, R-SWA gaps for two prompt lengths, a request with blocks but no
hit counting hit blocks, caching off with no hit blocks) and pool states no trace
reaches (a parent block evicted before its child, a sliding window's block evicted
just past a shorter hit). After every call the answer and the state (each manager's
block tables, cached-block counts and EAGLE flag, the hybrid coordinator's spec
batches, the pool's free queue and cached hashes) must be vLLM's. Where vLLM asserts, kvpure raises
``CacheStateError``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from kvpure.cache import parse_trace
from kvpure.cache.errors import CacheStateError
from kvpure.cache.mamba import MambaManager
from kvpure.cache.replay import CacheReplay
from kvpure.cache.request import CacheRequest
from kvpure.cache.setup import replay_config_from_plan_input
from kvpure.cache.single_type import (
    FullAttentionManager,
    RSWAManager,
    SingleTypeKVCacheManager,
)
from kvpure.cache.windowed import ChunkedLocalAttentionManager, SlidingWindowManager
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import HashRequest
from tests.conftest import DATA_DIR

ORACLE: dict[str, Any] = json.loads(
    (DATA_DIR / "vllm-0.26.0-oracle" / "manager_direct.json").read_text(encoding="utf-8")
)
CASES: dict[str, dict[str, Any]] = {case["name"]: case for case in ORACLE["cases"]}


def _engine(case: dict[str, Any]) -> CacheReplay:
    parsed = parse_trace(case["trace"], vllm_version="0.26")
    config = replay_config_from_plan_input(parsed.plan_input)
    overrides: dict[str, Any] = case["trace"].get("oracle_overrides") or {}
    config = replace(config, **overrides)
    eagle_groups: list[int] | None = case.get("eagle_groups")
    if eagle_groups is not None:  # these groups alone are EAGLE groups (the oracle's too)
        groups = config.kv_cache_config.kv_cache_groups
        marked = tuple(replace(g, is_eagle_group=i in eagle_groups) for i, g in enumerate(groups))
        config = replace(
            config, kv_cache_config=replace(config.kv_cache_config, kv_cache_groups=marked)
        )
    return CacheReplay(config, parsed.replay)


def _call(engine: CacheReplay, requests: dict[str, CacheRequest], op: dict[str, Any]) -> Any:
    manager = engine.manager
    pool = manager.block_pool
    kind = op["op"]
    group = manager.coordinator.managers[op["g"]] if "g" in op else None

    def blocks(ids: list[int]) -> list[KVCacheBlock]:
        return [pool.blocks[i] for i in ids]

    if kind == "request":
        hash_request = HashRequest(prompt_token_ids=tuple(op["tokens"]))
        request = CacheRequest(
            request_id=op["rid"], hash_request=hash_request, scheme=engine.scheme
        )
        requests[op["rid"]] = request
        return len(request.block_hashes)
    if kind == "chit":
        hit, length, boundary = manager.coordinator.find_longest_cache_hit(
            requests[op["rid"]].block_hashes, op["max"]
        )
        ids = [[b.block_id for b in group_hit] for group_hit in hit]
        return {"blocks": ids, "length": length, "boundary": boundary}
    if kind == "take_until":
        return [b.block_id for b in pool.get_new_blocks(pool.get_num_free_blocks() - op["keep"])]
    assert group is not None
    rid = op["rid"]
    if kind == "new":
        return [b.block_id for b in group.allocate_new_blocks(rid, op["n"], op["n"])]
    if kind == "count":
        args = (rid, op["n"], blocks(op["computed"]), op["total"], op["local"], op["n"])
        if "cap" in op:
            return group.get_num_blocks_to_allocate(*args, apply_admission_cap=op["cap"])
        return group.get_num_blocks_to_allocate(*args)
    if kind == "add":
        group.add_local_computed_blocks(rid, blocks(op["computed"]), op["local"])
    elif kind == "cache":
        group.cache_blocks(requests[rid], op["n"])
    elif kind == "skip":
        group.remove_skipped_blocks(rid, op["processed"], op.get("prompt"))
    elif kind == "free":
        group.free(rid)
    elif kind == "free_forward":
        pool.free_blocks(group.pop_blocks_for_free(rid))
    elif kind == "hit":
        hit, length = group.find_longest_cache_hit(
            requests[rid].block_hashes, op["max"], op["groups"], op["eagle"], op["align"]
        )
        return {"blocks": [[b.block_id for b in ids] for ids in hit], "length": length}
    else:
        raise AssertionError(kind)
    return None


def _state(engine: CacheReplay) -> dict[str, Any]:
    coordinator = engine.manager.coordinator
    managers = coordinator.managers
    pool = engine.manager.block_pool
    hybrid = coordinator.kind == "HybridKVCacheCoordinator"
    return {
        "tables": [
            {rid: [b.block_id for b in ids] for rid, ids in sorted(m.req_to_blocks.items())}
            for m in managers
        ],
        "cached": [dict(sorted(m.num_cached_block.items())) for m in managers],
        "free_queue": list(pool.free_block_ids_head(pool.num_gpu_blocks)),
        "num_cached_hashes": pool.num_cached_hashes,
        "use_eagle": [m.use_eagle for m in managers],
        "batches": [[list(b.group_ids), b.use_eagle] for b in coordinator.spec_groups]
        if hybrid
        else None,
    }


def test_every_case_was_run_by_vllm() -> None:
    assert ORACLE["meta"]["vllm_version"] == "0.26.0"
    assert all("records" in case["vllm"] for case in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_direct_calls_answer_as_vllms_managers(name: str) -> None:
    case = CASES[name]
    engine = _engine(case)
    assert [type(m).__name__ for m in engine.manager.coordinator.managers] == case["vllm"][
        "managers"
    ]
    requests: dict[str, CacheRequest] = {}
    for index, (op, want) in enumerate(zip(case["direct"], case["vllm"]["records"], strict=True)):
        where = f"{name} op {index} ({op['op']})"
        if "error" in want:
            assert want["error"] == "AssertionError", where
            with pytest.raises(CacheStateError):
                _call(engine, requests, op)
        else:
            assert _call(engine, requests, op) == want["answer"], where
        assert _state(engine) == want["state"], where


def test_fine_grained_hash_lookup_flags_are_vllms() -> None:
    want: dict[str, bool] = ORACLE["supports_fine_grained_hash_lookup"]
    classes: tuple[type[SingleTypeKVCacheManager], ...] = (
        SingleTypeKVCacheManager,
        FullAttentionManager,
        RSWAManager,
        SlidingWindowManager,
        ChunkedLocalAttentionManager,
        MambaManager,
    )
    assert {c.__name__: c.supports_fine_grained_hash_lookup for c in classes} == {
        c.__name__: want[c.__name__] for c in classes
    }


def test_a_lookup_aligned_inside_a_full_attention_block_is_refused() -> None:
    # vLLM 0.26 probes the hash-block boundaries inside the block then (its fine-grained
    # mode, alignment below the block and dividing it); kvpure does not model that
    case = CASES["full_two_groups_parent_evicted"]
    engine = _engine(case)
    requests: dict[str, CacheRequest] = {}
    _call(engine, requests, case["direct"][0])
    full = engine.manager.coordinator.managers[0]
    assert full.block_size == 4
    hashes = requests["a"].block_hashes
    for alignment in (1, 2):
        with pytest.raises(CacheStateError, match="fine-grained"):
            full.find_longest_cache_hit(hashes, 16, [0], False, alignment)
    assert full.find_longest_cache_hit(hashes, 16, [0], False, 4)[1] == 0
