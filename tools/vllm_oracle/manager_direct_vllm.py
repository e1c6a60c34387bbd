"""vLLM 0.26.0's per-group managers called directly (issue 24, round 4: mutcache).

``python manager_direct_vllm.py CASES.json OUT.json`` (cases from
``gen_manager_direct_cases.py``; PYTHONPATH=/work/vllm/0.26.0:/work/oracle_deps:$ROOT/src:
$ROOT/tools/vllm_oracle) builds vLLM's own ``KVCacheManager`` for each case's plan input,
as ``cache_replay_vllm.py`` does, then calls its single-type managers and block pool
with the case's ``direct`` ops, arguments the coordinator never passes included (a
lookup aligned to two blocks, a default ``apply_admission_cap``, R-SWA gaps of two
prompt lengths, caching off with no hit blocks). After each op it records the call's
answer (or the type of the error vLLM raised) and the state: every manager's block
tables, cached-block counts and EAGLE flag, the hybrid coordinator's spec batches, the
pool's free queue and cached hashes.
``tests/test_cache_manager_direct.py`` makes the same calls on kvpure's managers.

Ops (``g``: the manager's group index; blocks are named by id):

- ``request rid tokens``: a request (hashed by the case's hasher), not admitted;
- ``new g rid n``: ``allocate_new_blocks(rid, n, n)``;
- ``count g rid n computed total local [cap]``: ``get_num_blocks_to_allocate``
  (``cap`` absent: the keyword's default);
- ``add g rid computed local``: ``add_local_computed_blocks`` (no external tokens);
- ``cache g rid n``: ``cache_blocks(request, n)``;
- ``skip g rid processed [prompt]``: ``remove_skipped_blocks``;
- ``free g rid``: ``free``; ``free_forward g rid``: its blocks freed head first;
- ``take_until keep``: ``block_pool.get_new_blocks`` of all but ``keep`` free blocks
  (evicts from the free queue's head);
- ``chit rid max``: the coordinator's ``find_longest_cache_hit`` (hit blocks, length,
  uncached common prefix);
- ``hit g rid max groups eagle align``: the manager class's ``find_longest_cache_hit``
  on the request's hashes.
"""

import json
import os
import sys

from kvpure.cache.setup import replay_config_from_plan_input  # noqa: E402
from kvpure.cache.trace_json import parse_trace  # noqa: E402
from kvpure.interop.planning import render_kv_cache_spec  # noqa: E402


def run_case(case):
    trace = parse_trace(case["trace"], vllm_version="0.26")
    rs = trace.replay
    os.environ["PYTHONHASHSEED"] = rs.pythonhashseed
    os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1"
    from run_vllm import parse_spec
    from vllm import envs
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as ku
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request

    if hasattr(envs, "__getattr__") and hasattr(envs.__getattr__, "cache_clear"):
        envs.__getattr__.cache_clear()
    cfg = replay_config_from_plan_input(trace.plan_input)
    overrides = case["trace"].get("oracle_overrides") or {}
    if overrides:  # fields no plan input sets; the test replaces the same ones
        import dataclasses

        cfg = dataclasses.replace(cfg, **overrides)
    # a case's "eagle_groups" marks those groups alone (is_eagle_group), as 0.26's planner
    # marks DeepSeek V4's MTP layer group; the test marks the same ones
    eagle_groups = case.get("eagle_groups")
    groups = [
        KVCacheGroupSpec(
            list(g.layer_names),
            parse_spec(render_kv_cache_spec(g.kv_cache_spec, vllm_version="0.26")),
            g.is_eagle_group if eagle_groups is None else i in eagle_groups,
        )
        for i, g in enumerate(cfg.kv_cache_config.kv_cache_groups)
    ]
    kv_cache_config = KVCacheConfig(cfg.kv_cache_config.num_blocks, [], groups)
    try:
        register_all_kvcache_specs(None)
    except Exception:  # noqa: BLE001
        pass
    hash_fn = get_hash_fn_by_name(cfg.hash_fn)
    ku.init_none_hash(hash_fn)
    hasher = ku.get_request_block_hasher(cfg.hash_block_size, hash_fn) if cfg.enable_caching else None
    manager = KVCacheManager(
        kv_cache_config,
        max_model_len=cfg.max_model_len,
        scheduler_block_size=cfg.scheduler_block_size,
        hash_block_size=cfg.hash_block_size,
        max_in_flight_tokens=cfg.max_in_flight_tokens,
        enable_caching=cfg.enable_caching,
        use_eagle=cfg.use_eagle,
        log_stats=False,
        enable_kv_cache_events=False,
        watermark=0.0,
    )
    coordinator = manager.coordinator
    managers = coordinator.single_type_managers
    pool = manager.block_pool
    reqs = {}

    def blocks(ids):
        return [pool.blocks[i] for i in ids]

    def state():
        return {
            "tables": [{rid: [b.block_id for b in bl] for rid, bl in sorted(m.req_to_blocks.items())}
                       for m in managers],
            "cached": [dict(sorted(m.num_cached_block.items())) for m in managers],
            "free_queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_cached_hashes": len(pool.cached_block_hash_to_block),
            "use_eagle": [m.use_eagle for m in managers],
            "batches": [[list(g.group_ids), g.use_eagle] for g in coordinator.attention_groups]
            if hasattr(coordinator, "attention_groups") else None,
        }

    records = []
    for op in case["direct"]:
        kind = op["op"]
        m = managers[op["g"]] if "g" in op else None
        try:
            if kind == "request":
                req = Request(op["rid"], list(op["tokens"]), SamplingParams(max_tokens=1000), None,
                              block_hasher=hasher)
                reqs[op["rid"]] = req
                answer = len(req.block_hashes)
            elif kind == "new":
                answer = [b.block_id for b in m.allocate_new_blocks(op["rid"], op["n"], op["n"])]
            elif kind == "count":
                args = (op["rid"], op["n"], blocks(op["computed"]), op["total"], op["local"], op["n"])
                if "cap" in op:
                    answer = m.get_num_blocks_to_allocate(*args, apply_admission_cap=op["cap"])
                else:
                    answer = m.get_num_blocks_to_allocate(*args)
            elif kind == "add":
                m.add_local_computed_blocks(op["rid"], blocks(op["computed"]), op["local"], 0)
                answer = None
            elif kind == "cache":
                m.cache_blocks(reqs[op["rid"]], op["n"])
                answer = None
            elif kind == "skip":
                m.remove_skipped_blocks(op["rid"], op["processed"], op.get("prompt"))
                answer = None
            elif kind == "free":
                m.free(op["rid"])
                answer = None
            elif kind == "free_forward":
                pool.free_blocks(m.pop_blocks_for_free(op["rid"]))
                answer = None
            elif kind == "chit":
                hit, length, boundary = coordinator.find_longest_cache_hit(
                    reqs[op["rid"]].block_hashes, op["max"])
                answer = {"blocks": [[b.block_id for b in bl] for bl in hit], "length": length,
                          "boundary": boundary}
            elif kind == "take_until":
                answer = [b.block_id for b in pool.get_new_blocks(pool.get_num_free_blocks() - op["keep"])]
            elif kind == "hit":
                hit, length = type(m).find_longest_cache_hit(
                    reqs[op["rid"]].block_hashes, op["max"], op["groups"], pool, m.kv_cache_spec,
                    op["eagle"], op["align"])
                answer = {"blocks": [[b.block_id for b in bl] for bl in hit], "length": length}
            else:
                raise ValueError(kind)
            records.append({"answer": answer, "state": state()})
        except Exception as err:  # noqa: BLE001
            records.append({"error": type(err).__name__, "message": str(err)[:200], "state": state()})
    return {"managers": [type(m).__name__ for m in managers], "records": records}


def class_facts():
    from vllm.v1.core import single_type_kv_cache_manager as st

    return {name: getattr(st, name).supports_fine_grained_hash_lookup
            for name in ("SingleTypeKVCacheManager", "FullAttentionManager", "RSWAManager",
                         "SlidingWindowManager", "ChunkedLocalAttentionManager", "MambaManager",
                         "SinkFullAttentionManager")}


if __name__ == "__main__":
    cases = json.load(open(sys.argv[1]))
    out = {"meta": {"vllm_version": "0.26.0"}, "supports_fine_grained_hash_lookup": class_facts(),
           "cases": []}
    for case in cases:
        try:
            result = run_case(case)
        except Exception as err:  # noqa: BLE001
            import traceback
            result = {"error": {"type": type(err).__name__, "tb": traceback.format_exc()[-1500:]}}
        out["cases"].append({**case, "vllm": result})
    json.dump(out, open(sys.argv[2], "w"), indent=0)
