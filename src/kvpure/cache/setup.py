"""From a planning input to what vLLM's engine hands the KV cache manager.

The planner (``kvpure.interop.planning``) gives the scheduler's
``KVCacheConfig``; then, as vLLM's engine does, ``cache_config.block_size``
becomes the smallest group block size, ``resolve_kv_cache_block_sizes``
gives the scheduler and hash block sizes, and the speculative config gives
``use_eagle``, the lookahead slots and (0.33+) the lookahead hashes. The
release's :class:`~kvpure.cache.rules.CacheRules` come from the settings'
``vllm_version`` and travel in the :class:`ReplayConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvpure.cache.block_pool import MAX_NUM_GPU_BLOCKS
from kvpure.cache.errors import UnsupportedTraceError
from kvpure.cache.rules import (
    CacheRules,
    get_cache_rules,
    manager_use_eagle,
    num_hash_lookahead_tokens,
    use_eagle_block_drop,
)
from kvpure.interop.planning import PlanningInput, plan_input
from kvpure.planning.log_lines import vllm_log_lines
from kvpure.planning.memory import resolve_kv_cache_block_sizes
from kvpure.settings import PlannerSettings
from kvpure.specs import MambaSpec
from kvpure.specs.kv_cache_config import KVCacheConfig

__all__ = [
    "EAGLE_METHODS",
    "KV_CACHE_LAYOUT",
    "ReplayConfig",
    "replay_config_from_plan_input",
]

EAGLE_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
"""Speculative methods whose drafter reads the target's hidden states (vLLM's
``use_eagle()``): they reserve lookahead slots."""

KV_CACHE_LAYOUT = "LBNHC"
"""The layout 0.33+ resolves for FlashAttention-style backends (informative)."""


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
    rules: CacheRules
    """The release's cache-manager rules (from ``PlannerSettings.vllm_version``)."""
    num_hash_lookahead_tokens: int = 0
    """L: the tokens after each block its hash covers (0.33+, EAGLE/MTP)."""
    kv_cache_layout: str | None = None
    """The layout the release resolves (0.33+; informative)."""


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


def _check_pool_size(config: KVCacheConfig) -> None:
    if config.num_blocks > MAX_NUM_GPU_BLOCKS:
        raise UnsupportedTraceError(
            feature="vllm_config.cache_config.num_gpu_blocks_override",
            reason=f"a pool of {config.num_blocks} blocks is larger than the replay builds "
            f"(at most {MAX_NUM_GPU_BLOCKS}); give a smaller num_gpu_blocks_override",
        )


def replay_config_from_plan_input(
    parsed: PlanningInput,
    *,
    disable_lookahead_block_hashes: bool = False,
    disable_eagle_block_drop: bool = False,
) -> ReplayConfig:
    """Plan ``parsed`` (one worker) and derive the manager's configuration.

    The release is ``parsed.settings.vllm_version``; the two flags are vLLM's
    ``speculative_config.disable_lookahead_block_hashes`` / ``disable_eagle_block_drop``
    (read from 0.33 on).
    """
    if len(parsed.kv_cache_specs) != 1:
        raise UnsupportedTraceError(
            feature="plan_input.kv_cache_specs",
            reason=f"must describe exactly one worker (got {len(parsed.kv_cache_specs)})",
        )
    rules = get_cache_rules(parsed.settings.vllm_version)
    plan = plan_input(parsed)
    settings = plan.settings
    max_model_len = plan.final_max_model_len
    _check_modelled(settings, max_model_len)
    config = plan.scheduler_kv_cache_config
    _check_pool_size(config)
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
    lookahead = 0
    if method in EAGLE_METHODS:
        lookahead = (settings.num_speculative_tokens or 0) + int(method == "dflash")
    block_drop = use_eagle_block_drop(
        rules, method, disable_eagle_block_drop=disable_eagle_block_drop
    )
    hash_lookahead = num_hash_lookahead_tokens(
        rules,
        block_drop=block_drop,
        enable_prefix_caching=settings.enable_prefix_caching,
        disable_lookahead_block_hashes=disable_lookahead_block_hashes,
    )
    use_eagle = manager_use_eagle(rules, block_drop=block_drop, num_lookahead_hashes=hash_lookahead)
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
        rules=rules,
        num_hash_lookahead_tokens=hash_lookahead,
        kv_cache_layout=KV_CACHE_LAYOUT if rules.header_lookahead_and_layout else None,
    )
