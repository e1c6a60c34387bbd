"""From a planning input to what vLLM's engine hands the KV cache manager.

The planner (``kvpure.interop.planning``) gives the scheduler's
``KVCacheConfig``; then, as vLLM's engine does, ``cache_config.block_size``
becomes the smallest group block size, ``resolve_kv_cache_block_sizes``
gives the scheduler and hash block sizes, and the speculative config gives
``use_eagle`` and the lookahead tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvpure.cache.errors import UnsupportedTraceError
from kvpure.interop.planning import PlanningInput, plan_input
from kvpure.planning.log_lines import vllm_log_lines
from kvpure.planning.memory import resolve_kv_cache_block_sizes
from kvpure.settings import PlannerSettings
from kvpure.specs import MambaSpec
from kvpure.specs.kv_cache_config import KVCacheConfig

__all__ = ["EAGLE_METHODS", "ReplayConfig", "replay_config_from_plan_input"]

EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
"""Speculative methods for which vLLM's scheduler sets ``use_eagle``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayConfig:
    """What the manager is built from, and the scheduler facts the replay needs."""

    kv_cache_config: KVCacheConfig
    block_size: int
    """``cache_config.block_size`` after the engine's update (the smallest group block size)."""
    scheduler_block_size: int
    hash_block_size: int
    max_model_len: int
    max_in_flight_tokens: int
    max_num_batched_tokens: int
    enable_caching: bool
    hash_fn: str
    use_eagle: bool
    num_lookahead_tokens: int
    need_mamba_block_aligned_split: bool
    planner_logs: tuple[str, ...] = ()


def _check_modelled(settings: PlannerSettings, max_model_len: int) -> None:
    checks = (
        ("vllm_config.kv_transfer_config", settings.has_kv_connector, "must be null"),
        (
            "vllm_config.parallel_config.pipeline_parallel_size",
            settings.pipeline_parallel_size != 1,
            "must be 1",
        ),
        (
            "vllm_config.parallel_config.decode_context_parallel_size",
            settings.decode_context_parallel_size != 1,
            "must be 1",
        ),
        (
            "vllm_config.parallel_config.prefill_context_parallel_size",
            settings.prefill_context_parallel_size != 1,
            "must be 1",
        ),
        (
            "vllm_config.scheduler_config.async_scheduling",
            settings.async_scheduling,
            "must be false",
        ),
        (
            "vllm_config.scheduler_config.max_num_batched_tokens",
            settings.max_num_batched_tokens < max_model_len,
            f"must be at least max_model_len ({max_model_len}): chunked prefill is not modelled",
        ),
    )
    for feature, bad, reason in checks:
        if bad:
            raise UnsupportedTraceError(feature=feature, reason=reason)


def replay_config_from_plan_input(parsed: PlanningInput) -> ReplayConfig:
    """Plan ``parsed`` (one worker) and derive the manager's configuration."""
    if len(parsed.kv_cache_specs) != 1:
        raise UnsupportedTraceError(
            feature="plan_input.kv_cache_specs",
            reason=f"must describe exactly one worker (got {len(parsed.kv_cache_specs)})",
        )
    plan = plan_input(parsed)
    settings = plan.settings
    max_model_len = plan.final_max_model_len
    _check_modelled(settings, max_model_len)
    config = plan.scheduler_kv_cache_config
    groups = config.kv_cache_groups
    if not groups:
        raise UnsupportedTraceError(
            feature="plan_input.kv_cache_specs", reason="the model has no KV cache groups"
        )
    block_size = min(g.kv_cache_spec.block_size for g in groups)
    scheduler_block_size, hash_block_size = resolve_kv_cache_block_sizes(
        config, replace(settings, block_size=block_size)
    )
    method = settings.speculative_method
    use_eagle = method in EAGLE_METHODS
    lookahead = 0
    if use_eagle:
        lookahead = (settings.num_speculative_tokens or 0) + int(method == "dflash")
    has_mamba = any(isinstance(g.kv_cache_spec, MambaSpec) for g in groups)
    align = has_mamba and settings.mamba_cache_mode == "align"
    if align and hash_block_size < block_size:
        raise UnsupportedTraceError(
            feature="vllm_config.cache_config.prefix_match_unit",
            reason="Mamba partial-block cache hits (hash blocks smaller than the block size) "
            "are not modelled",
        )
    if (
        align
        and settings.enable_prefix_caching
        and any(
            isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.block_size > hash_block_size
            for g in groups
        )
    ):
        raise UnsupportedTraceError(
            feature="vllm_config.cache_config.prefix_match_unit",
            reason="Mamba partial-block cache hits (hash blocks smaller than a Mamba block) "
            "are not modelled",
        )
    return ReplayConfig(
        kv_cache_config=config,
        block_size=block_size,
        scheduler_block_size=scheduler_block_size,
        hash_block_size=hash_block_size,
        max_model_len=max_model_len,
        max_in_flight_tokens=settings.max_in_flight_tokens,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        enable_caching=settings.enable_prefix_caching,
        hash_fn=settings.prefix_caching_hash_algo,
        use_eagle=use_eagle,
        num_lookahead_tokens=lookahead,
        need_mamba_block_aligned_split=align,
        planner_logs=tuple(line.msg for line in vllm_log_lines(plan)),
    )
