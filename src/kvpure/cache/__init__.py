"""The shell's second room: vLLM 0.26's prefix cache (block pool + KV cache manager steps).

Mutable inside, fed and read through frozen values: a trace
(:class:`CacheTrace`, from JSON by :func:`parse_trace`) goes in,
:func:`replay` runs it through :class:`KVCacheManager` exactly as vLLM's
scheduler would, and records with vLLM's events come out
(:func:`render_result` writes the goldens' JSON shape).
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
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.trace import CacheTrace, OpRecord, ReplaySettings
from kvpure.cache.trace_json import TRACE_FORMAT, parse_trace, render_result

__all__ = [
    "TRACE_FORMAT",
    "AllBlocksCleared",
    "BlockPool",
    "BlockRemoved",
    "BlockStored",
    "CacheReplay",
    "CacheRequest",
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
    "parse_trace",
    "render_result",
    "replay",
    "replay_config_from_plan_input",
    "replay_trace",
]


def replay_trace(data: object) -> dict[str, object]:
    """Replay a trace given as parsed JSON; the goldens' ``{"kv_cache_config", ...}`` object."""
    return render_result(replay(parse_trace(data)))
