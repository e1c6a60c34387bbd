"""The shell's second room: vLLM's prefix cache (block pool + KV cache manager steps).

Mutable inside, fed and read through frozen values: a trace
(:class:`CacheTrace`, from JSON by :func:`parse_trace`) goes in,
:func:`replay` runs it through :class:`KVCacheManager` exactly as vLLM's
scheduler would, and records with vLLM's events come out
(:func:`render_result` writes the goldens' JSON shape). The release (0.26,
0.33, 0.34) is ``PlannerSettings.vllm_version``; its rules are one
:class:`CacheRules` value (:mod:`kvpure.cache.rules`).
"""

from __future__ import annotations

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.coordinator import KVCacheCoordinator
from kvpure.cache.errors import (
    CacheStateError,
    TraceFieldError,
    UnknownRequestError,
    UnsupportedTraceError,
)
from kvpure.cache.events import AllBlocksCleared, BlockRemoved, BlockStored, KVCacheEvent
from kvpure.cache.manager import KVCacheManager, PrefixCacheStats
from kvpure.cache.replay import CacheReplay, ReplayResult, replay
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.rules import CACHE_RULES, CacheRules, get_cache_rules
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.trace import CacheTrace, OpRecord, ReplaySettings
from kvpure.cache.trace_json import TRACE_FORMAT, parse_trace, render_result

__all__ = [
    "CACHE_RULES",
    "TRACE_FORMAT",
    "AllBlocksCleared",
    "BlockPool",
    "BlockRemoved",
    "BlockStored",
    "CacheReplay",
    "CacheRequest",
    "CacheRules",
    "CacheStateError",
    "CacheTrace",
    "KVCacheCoordinator",
    "KVCacheEvent",
    "KVCacheManager",
    "OpRecord",
    "PrefixCacheStats",
    "ReplayConfig",
    "ReplayResult",
    "ReplaySettings",
    "RequestStatus",
    "TraceFieldError",
    "UnknownRequestError",
    "UnsupportedTraceError",
    "get_cache_rules",
    "parse_trace",
    "render_result",
    "replay",
    "replay_config_from_plan_input",
    "replay_trace",
]


def replay_trace(data: object, *, vllm_version: str | None = None) -> dict[str, object]:
    """Replay a trace given as parsed JSON; the goldens' ``{"vllm_version", "kv_cache_config",
    ...}`` object. ``vllm_version`` wins over the trace's own key (default 0.34)."""
    return render_result(replay(parse_trace(data, vllm_version=vllm_version)))
