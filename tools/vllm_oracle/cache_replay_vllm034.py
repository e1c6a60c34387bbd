"""Replay kvpure-cache-replay/1 traces through the real vLLM 0.34.0 KVCacheManager.

``python cache_replay_vllm034.py TRACES.json OUT.json`` with PYTHONPATH holding the unpacked
vLLM 0.34.0 wheel, its import-time deps (pip --target: psutil, urllib3, aiohttp, requests,
pybase64, cachetools, cloudpickle, uvloop, py-cpuinfo, prometheus-client, llguidance...) and a
stub ``xgrammar`` package (a module whose attributes are dummy classes), torch from the
project's venv. It produced ``tests/data/vllm-0.34.0-oracle/cache_replay_random.json.gz``.
Scheduler steps per the 0.34 contract (README section 4): stats recorded after admission,
the hasher with L lookahead tokens, the manager with use_eagle = block drop and L == 0,
Scheduler._mamba_block_aligned_split called unbound.
"""
import dataclasses, enum, json, os, sys, types


def run_one(trace_obj):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    from kvpure.cache.setup import replay_config_from_plan_input
    from kvpure.cache.trace_json import parse_trace
    from kvpure.interop.planning import render_kv_cache_spec

    # kvpure's parser (for the config) does not know the oracle-only op "preempt"
    body = trace_obj.get("trace", trace_obj)
    known = [op for op in body["ops"] if op["op"] != "preempt"]
    trace = parse_trace({**body, "ops": known}, vllm_version="0.34")
    rs = trace.replay
    os.environ["PYTHONHASHSEED"] = rs.pythonhashseed
    os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1" if rs.use_int_block_hashes else "0"
    import torch
    from vllm import envs
    from vllm.lora.request import LoRARequest
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as ku
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1 import kv_cache_interface as kvi
    from vllm.v1.request import Request, RequestStatus

    if hasattr(envs, "__getattr__") and hasattr(envs.__getattr__, "cache_clear"):
        envs.__getattr__.cache_clear()
    flags = trace.draft_flags
    cfg = replay_config_from_plan_input(
        trace.plan_input,
        disable_lookahead_block_hashes=flags.disable_lookahead_block_hashes,
        disable_eagle_block_drop=flags.disable_eagle_block_drop,
    )
    settings = trace.plan_input.settings
    method = settings.speculative_method
    block_drop = method in ("eagle", "eagle3", "mtp") and not flags.disable_eagle_block_drop
    num_prefill_lookahead = 1 if method in ("eagle", "eagle3", "mtp", "dflash", "dspark") else 0
    L = num_prefill_lookahead if (block_drop and not flags.disable_lookahead_block_hashes
                                  and settings.enable_prefix_caching) else 0
    use_eagle = block_drop and L == 0

    def parse_spec(o):
        cls = getattr(kvi, o["type"])
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {}
        for k, v in o.items():
            if k in ("type", "_derived") or k not in names:
                continue
            if k == "dtype":
                v = getattr(torch, v)
            elif k == "dtypes":
                v = tuple(getattr(torch, x) for x in v)
            elif k == "shapes":
                v = tuple(tuple(x) for x in v)
            elif k == "kv_quant_mode":
                v = kvi.KVQuantMode[v]
            elif k == "mamba_type":
                from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
                v = MambaAttentionBackendEnum[v]
            kw[k] = v
        if o["type"] == "MLAAttentionSpec" and kw.get("head_size_v") == kw.get("head_size"):
            kw.pop("head_size_v", None)
        return cls(**kw)

    groups = [
        kvi.KVCacheGroupSpec(list(g.layer_names), parse_spec(render_kv_cache_spec(g.kv_cache_spec)),
                             g.is_eagle_group)
        for g in cfg.kv_cache_config.kv_cache_groups
    ]
    kv_cache_config = kvi.KVCacheConfig(cfg.kv_cache_config.num_blocks, [], groups,
                                        hash_block_size=cfg.hash_block_size,
                                        cache_hit_alignment_tokens=cfg.scheduler_block_size)
    hash_fn = get_hash_fn_by_name(cfg.hash_fn)
    ku.init_none_hash(hash_fn)
    hasher = ku.get_request_block_hasher(cfg.hash_block_size, hash_fn, L) if cfg.enable_caching else None
    manager = KVCacheManager(
        kv_cache_config,
        max_model_len=cfg.max_model_len,
        max_in_flight_tokens=cfg.max_in_flight_tokens,
        enable_caching=cfg.enable_caching,
        use_eagle=use_eagle,
        num_hash_lookahead_tokens=L,
        num_prefill_lookahead=num_prefill_lookahead,
        log_stats=rs.log_stats,
        enable_kv_cache_events=rs.enable_kv_cache_events,
        dcp_world_size=1,
        pcp_world_size=1,
        scheduler_block_size=cfg.scheduler_block_size,
        hash_block_size=cfg.hash_block_size,
        metrics_collector=None,
        watermark=rs.watermark,
        enable_mamba_shared_prefix_checkpoint=False,
    )
    sched = types.SimpleNamespace(
        cache_config=types.SimpleNamespace(block_size=cfg.block_size),
        block_size=cfg.scheduler_block_size,
        use_eagle_block_drop=use_eagle,
        num_hash_lookahead_tokens=L,
        hash_block_size=cfg.hash_block_size,
        mamba_partial_cache_hit=False,
        mamba_has_prefill_checkpoint_blocks=False,
        mamba_prefill_checkpoint_alignment=None,
        mamba_shared_prefix_checkpoint=False,
        max_num_scheduled_tokens=cfg.max_num_batched_tokens,
        scheduler_config=types.SimpleNamespace(long_prefill_token_threshold=0),
    )
    NL = cfg.num_lookahead_tokens
    reqs = {}

    def split(req, n, hit):
        if not cfg.need_mamba_block_aligned_split:
            return n
        return Scheduler._mamba_block_aligned_split(sched, req, n, hit, 0)

    def step_running(req):
        manager.new_step_starts()
        n = min(req.num_tokens - req.num_computed_tokens, cfg.max_num_batched_tokens,
                cfg.max_model_len - req.num_computed_tokens - 1)
        n = split(req, n, 0)
        if n <= 0:
            return {"num_new_tokens": 0, "allocated": None, "new_block_ids": None}
        new = manager.allocate_slots(req, n, num_lookahead_tokens=NL)
        if new is None:
            return {"num_new_tokens": n, "allocated": False, "new_block_ids": None}
        req.num_computed_tokens += n
        return {"num_new_tokens": n, "allocated": True, "new_block_ids": [list(x) for x in new.get_block_ids()]}

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
                                     num_lookahead_tokens=NL, full_sequence_must_fit=rs.reserve_full_isl,
                                     has_scheduled_reqs=running)
        if new is None:
            return {**out, "steps": [{"num_new_tokens": n, "allocated": False, "new_block_ids": None}],
                    "admitted": False}
        manager.record_prefix_cache_stats(req, hit)
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = hit + n
        steps = [{"num_new_tokens": n, "allocated": True, "new_block_ids": [list(x) for x in new.get_block_ids()]}]
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
            d[f] = getattr(e, f)
        return json.loads(json.dumps(d, default=lambda x: x.hex() if isinstance(x, bytes) else list(x)))

    records = []
    for raw in trace_obj.get("trace", trace_obj)["ops"]:
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
            # oracle-only op: the manager-level steps of vLLM 0.34's
            # Scheduler._preempt_request with its blocks freed at once
            # (_free_request_blocks when no GPU step is in flight)
            req = reqs[rid]
            manager.free(req)
            req.status = RequestStatus.PREEMPTED
            req.num_computed_tokens = 0
            if req.spec_token_ids:
                req.spec_token_ids = []
            req.num_output_placeholders = 0
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
        records.append({
            "op": op, "request_id": rid, "outcome": outcome,
            "request": snapshot(req) if req is not None and rid in reqs else None,
            "pool": pool(), "events": [ev(e) for e in manager.take_events()],
            "prefix_cache_stats": None if stats is None else {
                k: getattr(stats, k) for k in ("reset", "requests", "queries", "hits", "preempted_requests",
                                               "preempted_queries", "preempted_hits")} | {"hits_by_source": {}},
        })
    return {"header": {"use_eagle": use_eagle, "num_hash_lookahead_tokens": L, "num_lookahead_tokens": NL},
            "records": records,
            "final_state": {"requests": {k: snapshot(r) for k, r in reqs.items()}, "pool": pool()}}


if __name__ == "__main__":
    traces = json.load(open(sys.argv[1]))
    out = []
    for t in traces:
        try:
            out.append(run_one(t))
        except Exception as err:  # noqa: BLE001
            import traceback
            out.append({"error": {"type": type(err).__name__, "message": str(err),
                                  "tb": traceback.format_exc()[-2500:]}})
    json.dump(out, open(sys.argv[2], "w"))
