"""The unbounded cache's hits from a set of the block hashes seen so far.

In a pool so large that nothing cached is evicted, every full prompt block an
admitted request computes stays cached: the analyzer caches a request's
whole prompt at admission (no chunked prefill) and never hashes output
blocks. A request's hit is then the longest run of its leading hash blocks
that an earlier request's prompt held, capped at ``num_tokens - 1`` tokens
(vLLM's ``max_cache_hit_length``): a set of the hashes seen answers it, in
memory proportional to the distinct blocks, not to a pool of every block.

That is exactly the replay's count when the deployment has one KV cache group
of full attention whose block size is the hash block size, no EAGLE lookahead
(which drops the last matched block) and no Mamba "align" split; prefix
caching off counts no lookup at all. Anything else is replayed on an
unbounded pool (:func:`seen_set_applies` says which).
``tests/test_cache_unbounded_set.py`` checks the two equal on many workloads.

A hash-id trace keys the set by trace block (:func:`kvpure.cache.hash_trace.trace_block_chains`):
a trace block's vLLM blocks are cached together (its tail is never shared), so
the set is the trace's distinct ids, a 512th of its tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvpure.cache.hash_trace import TraceRequest, trace_block_chains
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.workload_server import (
    WorkloadItem,
    check_length,
    check_trace_block_size,
    make_request,
)
from kvpure.hashing import HashScheme
from kvpure.specs import FullAttentionSpec, MLAAttentionSpec

__all__ = ["SeenSetCount", "seen_set_applies", "seen_set_count"]


def seen_set_applies(config: ReplayConfig) -> bool:
    """Whether the seen-set count equals the unbounded replay's for ``config``."""
    if not config.enable_caching:
        return True
    groups = config.kv_cache_config.kv_cache_groups
    if len(groups) != 1 or config.use_eagle or config.num_lookahead_tokens:
        return False
    if config.need_mamba_block_aligned_split:
        return False
    spec = groups[0].kv_cache_spec
    return type(spec) in (FullAttentionSpec, MLAAttentionSpec) and (
        spec.block_size == config.hash_block_size
    )


class SeenSetCount:
    """The counts of one seen-set run (the fields of a run's result it fills)."""

    __slots__ = ("hits", "measured", "queries", "rate_total", "requests")

    def __init__(self) -> None:
        self.requests = 0
        self.queries = 0
        self.hits = 0
        self.measured = 0
        self.rate_total = 0.0


def _scheme(config: ReplayConfig) -> HashScheme | None:
    """The block hash scheme a manager of ``config`` hashes with."""
    from kvpure.cache.replay import CacheReplay
    from kvpure.cache.trace import ReplaySettings

    return CacheReplay(config, ReplaySettings()).scheme


def _trace_hit(item: TraceRequest, seen: set[bytes], hash_block_size: int) -> int:
    chains = trace_block_chains(item)
    matched = 0
    for chain in chains:
        if chain not in seen:
            break
        matched += 1
    seen.update(chains)
    cap = (item.input_length - 1) // hash_block_size * hash_block_size
    return min(matched * item.block_size, cap)


def seen_set_count(
    items: Iterable[WorkloadItem],
    config: ReplayConfig,
    progress: Callable[[int], None] | None = None,
    *,
    scheme_config: ReplayConfig | None = None,
) -> SeenSetCount:
    """Requests, queries and hits of ``items`` on a cache that never evicts.

    Only for a ``config`` where :func:`seen_set_applies`. The hash scheme is the
    one a manager of ``scheme_config`` (a pool of the same deployment, default
    ``config``) hashes with; no pool of ``config``'s size is built.
    """
    count = SeenSetCount()
    size = config.hash_block_size
    caching = config.enable_caching
    seen_traces: set[bytes] = set()
    seen: set[bytes] = set()
    scheme: HashScheme | None = None
    for index, item in enumerate(items):
        check_length(item, index, config.max_model_len)
        count.requests += 1
        if progress is not None:
            progress(1)
        if not caching:
            continue
        tokens = item.num_prompt_tokens
        if isinstance(item, TraceRequest):
            check_trace_block_size(item, size)
            hit = _trace_hit(item, seen_traces, size)
        else:
            if scheme is None:
                scheme = _scheme(scheme_config or config)
            hashes = make_request(index, item, scheme, size).block_hashes
            limit = (tokens - 1) // size
            matched = 0
            for block_hash in hashes:
                if matched >= limit or block_hash not in seen:
                    break
                matched += 1
            seen.update(hashes)
            hit = matched * size
        count.queries += tokens
        count.hits += hit
        count.measured += 1
        count.rate_total += hit / tokens
    return count
