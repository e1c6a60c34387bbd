"""The scheduler's Mamba "align" split of a prefill chunk: vLLM's
``_mamba_block_aligned_split``, as :class:`kvpure.cache.replay.CacheReplay` applies it."""

from __future__ import annotations

from kvpure.cache.request import CacheRequest
from kvpure.cache.rules import mamba_align_chunk_end, mamba_last_cache_position
from kvpure.cache.setup import ReplayConfig

__all__ = ["mamba_aligned_split"]


def mamba_aligned_split(
    config: ReplayConfig, request: CacheRequest, num_new_tokens: int, num_hit: int
) -> int:
    """vLLM's ``_mamba_block_aligned_split``: prefill chunks end on block boundaries,
    and stop at the last cacheable one (0.33+: the last one a later request can hit,
    :func:`~kvpure.cache.rules.mamba_last_cache_position`)."""
    start = request.num_computed_tokens + num_hit
    prefill_end = max(request.num_prompt_tokens, request.num_tokens - 1)
    if start >= prefill_end:
        return num_new_tokens
    block_size = config.block_size
    last = mamba_last_cache_position(
        config.rules,
        num_tokens=request.num_tokens,
        block_size=block_size,
        drop_eagle_block=config.use_eagle,
        num_lookahead_hashes=config.num_hash_lookahead_tokens,
    )
    end = mamba_align_chunk_end(
        config.rules,
        start=start,
        end=start + num_new_tokens,
        block_size=block_size,
        last_cache_position=last,
        prefill_end=prefill_end,
        max_prefill_tokens=config.max_num_batched_tokens,
    )
    next_boundary = (start // block_size + 1) * block_size
    junction = request.shared_prefix_boundary
    stops = (
        next_boundary if start % block_size != 0 and next_boundary <= last else 0,
        last,
        start + (junction - start) // block_size * block_size if start < junction < end else 0,
    )
    end = min((s for s in stops if start < s < end), default=end)
    return max(end - start, 0)
