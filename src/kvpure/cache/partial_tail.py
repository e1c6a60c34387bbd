"""Partial tail blocks: a full-attention block reachable from a hash boundary inside it.

When a full-attention group's block is larger than the hash block, vLLM's
``FullAttentionManager._cache_partial_tail_block`` (every release from 0.26; where the
boundary lies is :func:`kvpure.cache.rules.partial_tail_boundary`) registers the prompt's
last hash boundary on the block holding it, with ``BlockPool.cache_partial_block``:

- a block without a hash takes the boundary's hash as its own (covering that many
  tokens), so it is freed to the queue's tail like any cached block;
- a block with a hash covering fewer tokens drops all its keys first (BlockRemoved each);
- a block whose hash covers more (the block filled, or a later boundary) keeps it and
  holds the key beside it, in :attr:`BlockPool.extra_keys`
  (vLLM's ``cached_block_hashes_by_block``);
- a new key is announced by one BlockStored of the one hash block before the boundary.

A block whose partial hash is overtaken by its full hash is promoted in
``cache_full_blocks`` (:func:`kvpure.cache.pool_loops.store`), and eviction drops every
key of a block (:func:`kvpure.cache.pool_loops.take`). No lookup reads a partial key in
the modelled configurations (vLLM probes hash boundaries inside a block only with Mamba
"align" groups of larger blocks, which the replay refuses).
"""

from __future__ import annotations

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.event_keys import event_extra_keys, lookahead_token_ids
from kvpure.cache.events import blocks_removed_on_gpu
from kvpure.cache.pool_loops import add_holder, drop_block_keys, holds
from kvpure.cache.request import CacheRequest
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import generate_block_hash_extra_keys

__all__ = ["cache_partial_block"]


def cache_partial_block(
    pool: BlockPool,
    request: CacheRequest,
    block: KVCacheBlock,
    num_tokens: int,
    group_id: int,
    *,
    mm_from_last_item: bool = False,
) -> None:
    """Make ``block`` reachable from the prefix boundary ``num_tokens`` inside it (a
    multiple of the hash block size) for ``group_id`` (vLLM's
    ``BlockPool.cache_partial_block``; see the module docstring). ``mm_from_last_item``:
    the event's multimodal keys are scanned from the last item on past the first hash
    block (0.26's ``start_mm_idx=-1``)."""
    if block.is_null:
        return
    hash_block_size = pool.hash_block_size
    num_hash_blocks = num_tokens // hash_block_size
    num_tokens = num_hash_blocks * hash_block_size
    block_hash = request.block_hashes[num_hash_blocks - 1]
    key = block_hash + pool.group_suffix(group_id)
    cache = pool.prefix_cache()
    already = block.block_hash == key or holds(cache.get(key), block)
    events = pool.enable_kv_cache_events
    covered = block.block_hash_num_tokens
    if not already and covered is not None and covered < num_tokens:
        removed: list[bytes] | None = [] if events else None
        drop_block_keys(cache, block, removed, pool.extra_keys)
        if removed:
            pool.kv_event_queue.extend(blocks_removed_on_gpu(pool.split_keys(removed)))
    if block.claim_hash(key, num_tokens):
        add_holder(cache, key, block)
    elif not already:
        pool.extra_keys.setdefault(block.block_id, []).append(key)
        add_holder(cache, key, block)
    if not events or already:
        return
    index = num_hash_blocks - 1
    lookahead = pool.num_hash_lookahead_tokens
    parent = None if index == 0 else pool.external(request.block_hashes[index - 1])
    window = (index,)
    start = index * hash_block_size
    if mm_from_last_item and index > 0 and not lookahead:
        extra_keys = [
            generate_block_hash_extra_keys(
                pool.profile, request.hash_request, start, num_tokens, -1
            )[0]
        ]
    else:
        extra_keys = event_extra_keys(pool.profile, request, window, hash_block_size, lookahead)
    pool.kv_event_queue.append(
        pool.stored_event(
            request,
            block_hashes=[pool.external(block_hash)],
            parent_block_hash=parent,
            start_token_idx=start,
            end_token_idx=num_tokens,
            block_size=hash_block_size,
            group_id=group_id,
            extra_keys=extra_keys,
            lookahead_token_ids=lookahead_token_ids(request, window, hash_block_size, lookahead),
        )
    )
