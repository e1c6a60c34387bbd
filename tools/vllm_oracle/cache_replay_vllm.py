"""Replay cache traces through the real vLLM 0.26.0 KVCacheManager (differential oracle).

``python cache_replay_vllm.py TRACES.json OUT.json`` (TRACES: a list of
``kvpure-cache-replay/1`` traces) writes, per trace, vLLM's records in the
goldens' shape, or ``{"error": ...}``. The scheduler steps follow the
goldens' README (the WAITING / RUNNING branches, ``Scheduler.
_mamba_block_aligned_split`` called unbound). The manager's KVCacheConfig is
kvpure's plan turned into vLLM specs (the planner is checked against vLLM by
the planning oracle). Set up as in README.md (vLLM's wheel and its import
deps on PYTHONPATH, the project's venv for torch); the environment variables
are set here, before vLLM reads them.
"""

import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(__file__))

import msgspec  # noqa: E402

from kvpure.cache.setup import replay_config_from_plan_input  # noqa: E402
from kvpure.cache.trace_json import parse_trace  # noqa: E402
from kvpure.interop.planning import render_kv_cache_spec  # noqa: E402


def run_one(trace_obj, records_wanted=True):
    """vLLM's records and final state; with ``records_wanted=False`` the same calls (events
    and stats still taken after every op) without building records (the speed baseline)."""
    # this oracle runs vLLM 0.26.0; kvpure's parser (for the config) does not know the
    # oracle-only op "preempt"
    known = [op for op in trace_obj["ops"] if op["op"] != "preempt"]
    trace = parse_trace({**trace_obj, "ops": known}, vllm_version="0.26")
    rs = trace.replay
    os.environ["PYTHONHASHSEED"] = rs.pythonhashseed
    os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1" if rs.use_int_block_hashes else "0"
    from run_vllm import parse_spec
    from vllm import envs
    from vllm.lora.request import LoRARequest
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as ku
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.request import Request, RequestStatus

    if hasattr(envs, "__getattr__") and hasattr(envs.__getattr__, "cache_clear"):
        envs.__getattr__.cache_clear()
    cfg = replay_config_from_plan_input(trace.plan_input)
    # a trace may replace fields of the derived config that no trace can reach (the
    # mutation round's direct-API cases, e.g. max_in_flight_tokens below max_model_len);
    # kvpure's replay ignores the key, its test applies the same replacement
    overrides = trace_obj.get("oracle_overrides") or {}
    if overrides:
        import dataclasses

        cfg = dataclasses.replace(cfg, **overrides)
    groups = [
        KVCacheGroupSpec(
            list(g.layer_names),
            # 0.26's fields only: kvpure renders the newest release by default, and 0.26's
            # spec classes refuse 0.33+'s fields (dcp_sharded, ...)
            parse_spec(render_kv_cache_spec(g.kv_cache_spec, vllm_version="0.26")),
            g.is_eagle_group,
        )
        for g in cfg.kv_cache_config.kv_cache_groups
    ]
    kv_cache_config = KVCacheConfig(cfg.kv_cache_config.num_blocks, [], groups)
    try:
        register_all_kvcache_specs(None)
    except Exception:  # noqa: BLE001  (the platform hook; the built-ins are registered first)
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
        log_stats=rs.log_stats,
        enable_kv_cache_events=rs.enable_kv_cache_events,
        watermark=rs.watermark,
    )
    sched = types.SimpleNamespace(
        cache_config=types.SimpleNamespace(block_size=cfg.block_size),
        use_eagle=cfg.use_eagle,
        hash_block_size=cfg.hash_block_size,
        mamba_partial_cache_hit=False,
    )
    L = cfg.num_lookahead_tokens
    reqs = {}

    def split(req, n, hit):
        if not cfg.need_mamba_block_aligned_split:
            return n
        return Scheduler._mamba_block_aligned_split(sched, req, n, hit, 0)

    def ids(blocks):
        return [[b.block_id for b in g] for g in blocks]

    def step_running(req):
        manager.new_step_starts()
        n = min(req.num_tokens - req.num_computed_tokens, cfg.max_num_batched_tokens,
                cfg.max_model_len - 1 - req.num_computed_tokens)
        n = split(req, n, 0)
        if n <= 0:
            return {"num_new_tokens": 0, "allocated": None, "new_block_ids": None}
        new = manager.allocate_slots(req, n, num_lookahead_tokens=L)
        if new is None:
            return {"num_new_tokens": n, "allocated": False, "new_block_ids": None}
        req.num_computed_tokens += n
        return {"num_new_tokens": n, "allocated": True, "new_block_ids": list(new.get_block_ids())}

    def pending(req):
        steps = []
        while req.num_computed_tokens < req.num_tokens:
            s = step_running(req)
            steps.append(s)
            if s["allocated"] is not True:
                break
        return steps

    def admit(req):
        manager.new_step_starts()
        blocks, hit, spb = manager.get_computed_blocks(req)
        req.shared_prefix_boundary = spb
        n = min(req.num_tokens - hit, cfg.max_num_batched_tokens)
        n = split(req, n, hit)
        out = {"num_cached_tokens": hit, "shared_prefix_boundary": spb,
               "cached_block_ids": [[b.block_id for b in g] for g in blocks.blocks]}
        if n <= 0:
            return {**out, "steps": [{"num_new_tokens": 0, "allocated": None, "new_block_ids": None}],
                    "admitted": False}
        running = any(r.status == RequestStatus.RUNNING for r in reqs.values())
        new = manager.allocate_slots(req, n, num_new_computed_tokens=hit, new_computed_blocks=blocks,
                                     num_lookahead_tokens=L, full_sequence_must_fit=rs.reserve_full_isl,
                                     has_scheduled_reqs=running)
        if new is None:
            return {**out, "steps": [{"num_new_tokens": n, "allocated": False, "new_block_ids": None}],
                    "admitted": False}
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = hit + n
        steps = [{"num_new_tokens": n, "allocated": True, "new_block_ids": list(new.get_block_ids())}]
        if cfg.need_mamba_block_aligned_split:
            steps += pending(req)
        return {**out, "steps": steps, "admitted": True}

    def snapshot(req):
        return {"status": "running" if req.status == RequestStatus.RUNNING else "waiting",
                "num_tokens": req.num_tokens, "num_computed_tokens": req.num_computed_tokens,
                "num_block_hashes": len(req.block_hashes),
                "block_ids": [list(x) for x in manager.get_block_ids(req.request_id)]}

    def pool():
        bp = manager.block_pool
        return {"free_queue": [b.block_id for b in bp.free_block_queue.get_all_free_blocks()],
                "num_free_blocks": bp.get_num_free_blocks(),
                "num_cached_hashes": len(bp.cached_block_hash_to_block), "usage": bp.get_usage()}

    def ev(e):
        d = {"type": type(e).__name__}
        for f in e.__struct_fields__:
            v = getattr(e, f)
            d[f] = v
        return json.loads(json.dumps(d, default=lambda x: x.hex() if isinstance(x, bytes) else list(x)))

    records = []
    for raw in trace_obj["ops"]:
        op = raw["op"]
        rid = raw.get("request_id")
        req = None
        if op == "arrive":
            sp = SamplingParams(max_tokens=1000, extra_args={"kv_cache_report_mode": raw.get("kv_cache_report_mode", "incremental")},
                                skip_reading_prefix_cache=raw.get("skip_reading_prefix_cache"))
            lora = None
            if raw.get("lora_name"):
                lora = LoRARequest(raw["lora_name"], raw.get("lora_int_id", 1),
                                   raw.get("lora_path", "/adapters/" + raw["lora_name"]))
            mm = [MultiModalFeatureSpec(data=None, modality="image", identifier=f["identifier"],
                                        mm_position=PlaceholderRange(offset=f["offset"], length=f["length"]))
                  for f in raw.get("mm_features", [])] or None
            req = Request(rid, list(raw["prompt_token_ids"]), sp, None, mm_features=mm, lora_request=lora,
                          cache_salt=raw.get("cache_salt"), block_hasher=hasher)
            reqs[rid] = req
            outcome = admit(req)
        elif op == "decode":
            req = reqs[rid]
            if req.status != RequestStatus.RUNNING:
                outcome = {"skipped": "waiting"}
            else:
                steps = pending(req)
                appended = 0
                if not steps or steps[-1]["allocated"] is True:
                    for t in raw["token_ids"]:
                        req.append_output_token_ids(t)
                        appended += 1
                        s = step_running(req)
                        steps.append(s)
                        if s["allocated"] is not True:
                            break
                outcome = {"tokens_appended": appended, "steps": steps}
        elif op == "retry":
            req = reqs[rid]
            outcome = admit(req) if req.status != RequestStatus.RUNNING else {"steps": pending(req)}
        elif op == "preempt":
            # oracle-only op (the mutation round's traces; kvpure's trace format has none):
            # the manager-level steps of vLLM 0.26's Scheduler._preempt_request
            req = reqs[rid]
            manager.free(req)
            req.status = RequestStatus.PREEMPTED
            req.num_computed_tokens = 0
            req.num_preemptions += 1
            outcome = {"was": "running"}
        elif op == "finish":
            fin = reqs.pop(rid)
            was = "running" if fin.status == RequestStatus.RUNNING else "waiting"
            manager.free(fin)
            outcome = {"was": was}
        else:
            outcome = {"ok": manager.reset_prefix_cache()}
        stats = manager.make_prefix_cache_stats()
        if not records_wanted:
            manager.take_events()
            continue
        records.append({
            "op": op, "request_id": rid, "outcome": outcome,
            "request": snapshot(req) if req is not None and rid in reqs else None,
            "pool": pool(), "events": [ev(e) for e in manager.take_events()],
            "prefix_cache_stats": None if stats is None else {
                k: getattr(stats, k) for k in ("reset", "requests", "queries", "hits", "preempted_requests",
                                               "preempted_queries", "preempted_hits")},
        })
    if not records_wanted:
        return {"records": [], "final_state": None}
    return {"records": records,
            "final_state": {"requests": {k: snapshot(r) for k, r in reqs.items()}, "pool": pool()},
            # the classes vLLM picked (the goldens' kv_cache_config "coordinator"/"manager")
            "coordinator": type(manager.coordinator).__name__,
            "managers": [type(m).__name__ for m in manager.coordinator.single_type_managers]}


if __name__ == "__main__":
    traces = json.load(open(sys.argv[1]))
    out = []
    for t in traces:
        try:
            out.append(run_one(t))
        except Exception as err:  # noqa: BLE001
            import traceback
            out.append({"error": {"type": type(err).__name__, "message": str(err),
                                  "tb": traceback.format_exc()[-1500:]}})
    json.dump(out, open(sys.argv[2], "w"))
