"""The replay's results in the goldens' JSON shape, per release.

:func:`render_result` gives ``{"vllm_version", "kv_cache_config", "records",
"final_state"}`` in the replayed release's shapes (0.33+: the events' added fields,
``hits_by_source``, the lookahead header fields). A free queue longer than the
replay's ``free_queue_limit`` is written as its head, and ``free_queue_omitted``
counts the rest.
"""

from __future__ import annotations

from typing import Any

from kvpure.cache.events import AllBlocksCleared, BlockRemoved, KVCacheEvent
from kvpure.cache.manager import PrefixCacheStats
from kvpure.cache.replay import ReplayResult
from kvpure.cache.rules import CacheRules
from kvpure.cache.trace import (
    AdmissionOutcome,
    DecodeOutcome,
    FinishOutcome,
    OpRecord,
    Outcome,
    PoolSnapshot,
    RequestSnapshot,
    StepRecord,
    StepsOutcome,
)
from kvpure.interop.planning import render_kv_cache_spec

__all__ = ["render_event", "render_kv_cache_config", "render_record", "render_result"]

JSON = dict[str, Any]


def _json_value(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    return value


def render_event(event: KVCacheEvent, rules: CacheRules | None = None) -> JSON:
    """One event as ``{"type", <every field of the release's struct>}`` (0.26's without
    ``rules``; 0.33+ add ``ownership``, ``session_id``, ``lookahead_token_ids``)."""
    added = rules is not None and rules.event_fields_0_33
    if isinstance(event, AllBlocksCleared):
        return {"type": "AllBlocksCleared"}
    if isinstance(event, BlockRemoved):
        removed: JSON = {
            "type": "BlockRemoved",
            "block_hashes": _json_value(event.block_hashes),
            "medium": event.medium,
            "group_idx": event.group_idx,
            "locality": event.locality,
        }
        if added:
            removed["ownership"] = event.ownership
        return removed
    stored: JSON = {
        "type": "BlockStored",
        "block_hashes": _json_value(event.block_hashes),
        "parent_block_hash": _json_value(event.parent_block_hash),
        "token_ids": list(event.token_ids),
        "block_size": event.block_size,
        "lora_id": event.lora_id,
        "medium": event.medium,
        "lora_name": event.lora_name,
        "extra_keys": _json_value(event.extra_keys),
        "group_idx": event.group_idx,
        "kv_cache_spec_kind": event.kv_cache_spec_kind,
        "kv_cache_spec_sliding_window": event.kv_cache_spec_sliding_window,
        "locality": event.locality,
    }
    if added:
        stored["ownership"] = event.ownership
        stored["session_id"] = event.session_id
        stored["lookahead_token_ids"] = _json_value(event.lookahead_token_ids)
    return stored


def _ids(block_ids: tuple[tuple[int, ...], ...] | None) -> list[list[int]] | None:
    return None if block_ids is None else [list(ids) for ids in block_ids]


def _step(step: StepRecord) -> JSON:
    return {
        "num_new_tokens": step.num_new_tokens,
        "allocated": step.allocated,
        "new_block_ids": _ids(step.new_block_ids),
    }


def _outcome(outcome: Outcome) -> JSON:
    if isinstance(outcome, AdmissionOutcome):
        return {
            "num_cached_tokens": outcome.num_cached_tokens,
            "shared_prefix_boundary": outcome.shared_prefix_boundary,
            "cached_block_ids": _ids(outcome.cached_block_ids),
            "steps": [_step(s) for s in outcome.steps],
            "admitted": outcome.admitted,
        }
    if isinstance(outcome, DecodeOutcome):
        if outcome.skipped is not None:
            return {"skipped": outcome.skipped}
        return {
            "tokens_appended": outcome.tokens_appended,
            "steps": [_step(s) for s in outcome.steps],
        }
    if isinstance(outcome, StepsOutcome):
        return {"steps": [_step(s) for s in outcome.steps]}
    if isinstance(outcome, FinishOutcome):
        return {"was": outcome.was}
    return {"ok": outcome.ok}


def _request(snapshot: RequestSnapshot) -> JSON:
    return {
        "status": snapshot.status,
        "num_tokens": snapshot.num_tokens,
        "num_computed_tokens": snapshot.num_computed_tokens,
        "num_block_hashes": snapshot.num_block_hashes,
        "block_ids": _ids(snapshot.block_ids),
    }


def _pool(snapshot: PoolSnapshot) -> JSON:
    out: JSON = {
        "free_queue": list(snapshot.free_queue),
        "num_free_blocks": snapshot.num_free_blocks,
        "num_cached_hashes": snapshot.num_cached_hashes,
        "usage": snapshot.usage,
    }
    omitted = snapshot.free_queue_omitted
    if omitted:
        out["free_queue_omitted"] = omitted
    return out


def _stats(stats: PrefixCacheStats | None, rules: CacheRules | None = None) -> JSON | None:
    if stats is None:
        return None
    out: JSON = {
        "reset": stats.reset,
        "requests": stats.requests,
        "queries": stats.queries,
        "hits": stats.hits,
        "preempted_requests": stats.preempted_requests,
        "preempted_queries": stats.preempted_queries,
        "preempted_hits": stats.preempted_hits,
    }
    if rules is not None and rules.prefix_cache_stats_has_hits_by_source:
        out["hits_by_source"] = {}  # only KV connectors' hits have a source
    return out


def render_record(record: OpRecord, rules: CacheRules | None = None) -> JSON:
    """One record in the goldens' shape (0.26's without ``rules``)."""
    return {
        "op": record.op,
        "request_id": record.request_id,
        "outcome": _outcome(record.outcome),
        "request": None if record.request is None else _request(record.request),
        "pool": _pool(record.pool),
        "events": [render_event(e, rules) for e in record.events],
        "prefix_cache_stats": _stats(record.prefix_cache_stats, rules),
    }


def render_kv_cache_config(result: ReplayResult) -> JSON:
    """The goldens' ``kv_cache_config``: what the manager was built from."""
    config = result.config
    rules = config.rules
    out: JSON = {
        "vllm_version": f"{rules.vllm_version}.0",
        "num_blocks": config.kv_cache_config.num_blocks,
        "kv_cache_groups": [
            {
                "layer_names": list(group.layer_names),
                "kv_cache_spec": render_kv_cache_spec(
                    group.kv_cache_spec, vllm_version=rules.vllm_version
                ),
                "manager": manager,
            }
            for group, manager in zip(
                config.kv_cache_config.kv_cache_groups, result.manager_names, strict=True
            )
        ],
        "coordinator": result.coordinator,
        "scheduler_block_size": config.scheduler_block_size,
        "hash_block_size": config.hash_block_size,
        "max_model_len": config.max_model_len,
        "max_in_flight_tokens": config.max_in_flight_tokens,
        "enable_caching": config.enable_caching,
        "hash_fn": config.hash_fn,
        "none_hash": None if result.none_hash is None else result.none_hash.hex(),
        "use_eagle": config.use_eagle,
        "num_lookahead_tokens": config.num_lookahead_tokens,
    }
    if rules.header_lookahead_and_layout:
        out["num_hash_lookahead_tokens"] = config.num_hash_lookahead_tokens
        out["kv_cache_layout"] = config.kv_cache_layout
    out["null_block_id"] = 0
    out["planner_logs"] = list(config.planner_logs)
    return out


def render_result(result: ReplayResult) -> JSON:
    """``{"vllm_version", "kv_cache_config", "records", "final_state"}`` as the goldens
    hold them, in the replayed release's shapes."""
    rules = result.config.rules
    return {
        "vllm_version": rules.vllm_version,
        "kv_cache_config": render_kv_cache_config(result),
        "records": [render_record(r, rules) for r in result.records],
        "final_state": {
            "requests": {rid: _request(snap) for rid, snap in result.final_requests},
            "pool": _pool(result.final_pool),
        },
    }
