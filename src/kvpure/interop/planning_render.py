"""Planning results in vLLM-shaped JSON, per release (0.26's shape, or 0.33/0.34's).

:func:`render_plan` writes ``{"output", "final_max_model_len", "derived"}`` as the
goldens of the plan's release hold them; :func:`render_error` writes
``{"error": {"type", "vllm_type", "message"}}``.
"""

from __future__ import annotations

from kvpure.errors import (
    KVPureError,
    KVPureNotImplementedError,
    KVPureRuntimeError,
    KVPureValueError,
)
from kvpure.interop.spec_json import JSONObject, render_kv_cache_spec
from kvpure.planning.planner import KVCachePlan, WorkerPlanFacts
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor

#: The layout vLLM 0.33+ resolves for FlashAttention-style backends declaring none
#: (``vllm/v1/attention/backends/utils.py resolve_kv_cache_layout``); the only one
#: kvpure plans.
KV_CACHE_LAYOUT = "LBNHC"


def render_tensor(tensor: KVCacheTensor, vllm_version: str = "0.26") -> JSONObject:
    """A tensor in the release's ``KVCacheTensor`` shape (0.33+: one backing allocation)."""
    if vllm_version != "0.26":
        return {
            "size": tensor.size,
            "layers": list(tensor.shared_by),
            "layer_stride": tensor.layer_stride,
            "block_stride": tensor.block_stride,
            "offset": tensor.offset,
            "host_resident": tensor.host_resident,
        }
    return {
        "size": tensor.size,
        "shared_by": list(tensor.shared_by),
        "offset": tensor.offset,
        "block_stride": tensor.block_stride,
    }


def render_group(group: KVCacheGroupSpec, vllm_version: str = "0.26") -> JSONObject:
    out: JSONObject = {
        "layer_names": list(group.layer_names),
        "kv_cache_spec": render_kv_cache_spec(group.kv_cache_spec, vllm_version=vllm_version),
        "is_eagle_group": group.is_eagle_group,
    }
    if vllm_version != "0.26":
        # kvpure plans what the contract fixes: no host pool, no KV-transfer opt-out,
        # the default role.
        out.update(host_resident=False, enable_kv_transfer=True, role="DEFAULT")
    return out


def render_kv_cache_config(
    config: KVCacheConfig, plan: KVCachePlan | None = None, vllm_version: str = "0.26"
) -> JSONObject:
    """A KVCacheConfig in the goldens' ``output[i]`` shape of ``vllm_version``."""
    out: JSONObject = {
        "num_blocks": config.num_blocks,
        "kv_cache_tensors": [render_tensor(t, vllm_version) for t in config.kv_cache_tensors],
        "kv_cache_groups": [render_group(g, vllm_version) for g in config.kv_cache_groups],
    }
    if vllm_version != "0.26" and plan is not None and plan.scheduler is not None:
        out.update(
            kv_cache_layout=KV_CACHE_LAYOUT,
            hash_block_size=plan.scheduler.hash_block_size,
            cache_hit_alignment_tokens=plan.scheduler.cache_hit_alignment_tokens,
            kv_tp_replicas=config.kv_tp_replicas,
            needs_kv_cache_zeroing=plan.needs_kv_cache_zeroing,
        )
    return out


def render_worker_facts(
    facts: WorkerPlanFacts, has_groups: bool, vllm_version: str = "0.26"
) -> JSONObject:
    """One entry of the goldens' ``derived.per_worker``."""
    out: JSONObject = {}
    if has_groups:
        out["kv_cache_capacity_tokens"] = facts.kv_cache_capacity_tokens
        out["max_concurrency"] = facts.max_concurrency
        out["group_max_memory_usage_bytes"] = list(facts.group_max_memory_usage_bytes)
        out["max_memory_usage_bytes_from_groups"] = facts.max_memory_usage_bytes_from_groups
        if vllm_version != "0.26":
            out["pool_bytes_per_block"] = facts.pool_bytes_per_block
    if vllm_version == "0.26":
        out["resolve_kv_cache_block_sizes"] = [facts.scheduler_block_size, facts.hash_block_size]
    return out


def render_plan(plan: KVCachePlan) -> JSONObject:
    """``{"output", "final_max_model_len", "derived"}`` as in the goldens of the plan's
    release (``plan.settings.vllm_version``; 0.33+ adds ``"vllm_version"`` first)."""
    version = plan.settings.vllm_version
    configs = [render_kv_cache_config(c, plan, version) for c in plan.kv_cache_configs]
    per_worker = [
        render_worker_facts(f, bool(c.kv_cache_groups), version)
        for f, c in zip(plan.workers, plan.kv_cache_configs, strict=True)
    ]
    scheduler = render_kv_cache_config(plan.scheduler_kv_cache_config, plan, version)
    facts = plan.scheduler
    if version == "0.26" or facts is None:
        return {
            "output": configs,
            "final_max_model_len": plan.final_max_model_len,
            "derived": {"scheduler_kv_cache_config": scheduler, "per_worker": per_worker},
        }
    return {
        "vllm_version": version,
        "final_max_model_len": plan.final_max_model_len,
        "output": configs,
        "derived": {
            "kv_cache_layout": KV_CACHE_LAYOUT,
            "scheduler_kv_cache_config": scheduler,
            "scheduler_block_size": facts.scheduler_block_size,
            "hash_block_size": facts.hash_block_size,
            "cache_hit_alignment_tokens": facts.cache_hit_alignment_tokens,
            "cache_config_block_size": facts.cache_config_block_size,
            "kv_cache_size_tokens": facts.kv_cache_size_tokens,
            "kv_cache_max_concurrency": facts.kv_cache_max_concurrency,
            "per_worker": per_worker,
        },
    }


def vllm_error_type(err: KVPureError) -> str:
    """The stdlib exception vLLM raises where kvpure raised ``err``."""
    if isinstance(err, KVPureNotImplementedError):
        return "NotImplementedError"
    if isinstance(err, KVPureRuntimeError):
        return "RuntimeError"
    if isinstance(err, KVPureValueError):
        return "ValueError"
    return type(err).__mro__[1].__name__


def render_error(err: KVPureError) -> JSONObject:
    """``{"error": {"type", "vllm_type", "message"}}``."""
    return {
        "error": {
            "type": type(err).__name__,
            "vllm_type": vllm_error_type(err),
            "message": str(err),
        }
    }
