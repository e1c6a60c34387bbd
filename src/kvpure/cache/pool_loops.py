"""The block pool's per-block loops, in Python, and their optional C accelerator.

:class:`~kvpure.cache.block_pool.BlockPool` spends its time in five loops over
blocks: taking blocks from the free queue (evicting their hashes, one more
reference each), caching full blocks under their hashes, releasing blocks,
touching cache-hit blocks, and walking the longest cached prefix. Each
function here is the reference loop; where ``kvpure._pool_loops``
(``src/kvpure/csrc/pool_loops.c``) is built, it runs the same loop over the
same slots first and returns the position of the first item it does not
handle (anything unusual: not exactly a block, a slot of an unexpected type,
a block the reference raises for), and the Python loop does the rest from
there, so every answer and every error is the reference's.

:func:`set_accelerated` switches the C loops off (the CLI does under
``KVPURE_NO_EXTENSION=1``); ``tests/test_cache_pool_loops.py`` runs both paths
on random traces and compares them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from types import ModuleType
from typing import Final

from kvpure.cache.errors import CacheStateError
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock

__all__ = [
    "CacheDict",
    "Extras",
    "Holders",
    "add_holder",
    "accelerated",
    "first_holder",
    "holders_by_id",
    "count_evictable",
    "drop_block_keys",
    "drop_holder",
    "holds",
    "longest_prefix",
    "release",
    "set_accelerated",
    "store",
    "take",
    "touch",
]

Holders = KVCacheBlock | dict[int, KVCacheBlock]
"""What the prefix cache keeps under one key, as vLLM's ``BlockHashToBlockMap`` does: the
one block that holds it, or (once a second block caches the same key) its holders by
block id, in caching order; a dict stays a dict as holders leave, until the last one."""

CacheDict = dict[bytes, Holders]
"""The prefix cache: a hash key (block hash + group id) -> its holders."""

Extras = dict[int, list[bytes]]
"""A block's secondary keys by block id: the partial-tail entries a block holds beside its
own hash (vLLM's ``BlockPool.cached_block_hashes_by_block``), in the order they came."""


def first_holder(holders: Holders | None) -> KVCacheBlock | None:
    """The block a lookup of the key returns (the first cached), or None: no holder."""
    if isinstance(holders, dict):
        return next(iter(holders.values()), None)
    return holders


def holders_by_id(holders: Holders) -> dict[int, KVCacheBlock]:
    """The holders of one key by block id, in caching order, whichever form they are kept in."""
    return dict(holders) if isinstance(holders, dict) else {holders.block_id: holders}


def _load() -> ModuleType | None:
    try:
        from kvpure import _pool_loops
    except ImportError:  # not built: the Python loops run
        return None
    from kvpure.kv_cache_block import _NULL

    slots = vars(KVCacheBlock)
    _pool_loops.configure(
        KVCacheBlock,
        FreeKVCacheBlockQueue,
        _NULL,
        slots["prev_free_block"],
        slots["next_free_block"],
        slots["_queue"],
        slots["block_id"],
        slots["ref_cnt"],
        slots["_hash_entry"],
        vars(FreeKVCacheBlockQueue)["_num_free_blocks"],
    )
    return _pool_loops


_BUILT: Final = _load()
_loops: ModuleType | None = _BUILT


def accelerated() -> bool:
    """Whether the C loops run (built and not switched off)."""
    return _loops is not None


def set_accelerated(enabled: bool) -> bool:
    """Switch the C loops on or off for this process; returns whether they are now in use."""
    global _loops  # the one process-wide switch
    _loops = _BUILT if enabled else None
    return _loops is not None


def take(
    cache: CacheDict | None,
    blocks: list[KVCacheBlock],
    removed: list[bytes] | None,
    extras: Extras | None = None,
) -> None:
    """Blocks just taken from the free queue, one by one: the block's hash leaves the block
    and ``cache`` (``cache`` None: prefix caching off, nothing evicted), the key appended to
    ``removed`` (when given) if its entry held the block, then the block's secondary keys
    in ``extras`` (partial-tail entries: vLLM's ``cached_block_hashes_by_block``) the
    same way; then one more reference."""
    # the C loop stops at a block with secondary keys (or anything unusual): that one
    # block runs here, then C resumes after it
    position = 0 if _loops is None else _loops.take(cache, blocks, removed, 0, extras)
    count = len(blocks)
    while position < count:
        stop = count if _loops is None else position + 1
        for block in blocks[position:stop]:  # one loop, as vLLM's get_new_blocks
            key = None if cache is None else block.pop_block_hash()
            if key is not None and cache is not None:
                drop_holder(cache, key, block, removed)
                if extras:
                    for extra in extras.pop(block.block_id, ()):
                        drop_holder(cache, extra, block, removed)
            block.ref_cnt += 1
        position = stop
        if _loops is not None and position < count:
            position = _loops.take(cache, blocks, removed, position, extras)


def drop_holder(
    cache: CacheDict, key: bytes, block: KVCacheBlock, removed: list[bytes] | None
) -> None:
    """``block`` no longer holds ``key`` (vLLM's ``BlockHashToBlockMap.pop``): the key is
    appended to ``removed`` (when given) if the block was one of its holders, and leaves
    ``cache`` with its last holder."""
    holders = cache.get(key)
    if isinstance(holders, dict):
        if holders.pop(block.block_id, None) is not None and removed is not None:
            removed.append(key)
        if not holders:
            del cache[key]
    elif holders is not None and holders.block_id == block.block_id:
        del cache[key]
        if removed is not None:
            removed.append(key)


def add_holder(cache: CacheDict, key: bytes, block: KVCacheBlock) -> None:
    """``block`` holds ``key`` too, after the key's earlier holders (vLLM's ``insert``)."""
    holders = cache.get(key)
    if holders is None:
        cache[key] = block
    elif isinstance(holders, dict):
        holders[block.block_id] = block
    elif holders.block_id != block.block_id:
        cache[key] = {holders.block_id: holders, block.block_id: block}


def holds(holders: Holders | None, block: KVCacheBlock) -> bool:
    """Whether ``block`` is one of ``holders`` (vLLM's ``BlockHashToBlockMap.contain``)."""
    if isinstance(holders, dict):
        return block.block_id in holders
    return holders is not None and holders.block_id == block.block_id


def drop_block_keys(
    cache: CacheDict, block: KVCacheBlock, removed: list[bytes] | None, extras: Extras
) -> None:
    """Every key of ``block`` leaves it and ``cache``, its primary hash first, then its
    secondary keys (vLLM's ``BlockPool._remove_cached_block_hashes``)."""
    key = block.pop_block_hash()
    if key is None:
        return
    drop_holder(cache, key, block, removed)
    for extra in extras.pop(block.block_id, ()):
        drop_holder(cache, extra, block, removed)


def store(
    cache: CacheDict,
    blocks: Sequence[KVCacheBlock],
    block_hashes: Sequence[bytes],
    span: tuple[int, int],
    suffix: bytes,
    block_size: int,
    null: KVCacheBlock,
    block_mask: Sequence[bool] | None,
    stored: list[int] | None = None,
    extras: Extras | None = None,
    removed: list[bytes] | None = None,
) -> None:
    """Cache ``blocks[start:stop]`` (``span``) under ``block_hashes[i] + suffix``, skipping
    ``null`` and the blocks whose ``block_mask`` entry (from ``start``) is False; ``stored``
    (when given) collects the indexes of the blocks cached. A block that already holds a
    hash for fewer tokens (a partial tail) is promoted when ``extras`` is given: its keys
    leave it first (into ``removed``, when given), as vLLM's ``cache_full_blocks`` does;
    any other block that holds a hash is refused."""
    start, stop = span
    position = start
    if _loops is not None and type(blocks) is list:
        position = _loops.store(
            cache, blocks, block_hashes, start, stop, start, suffix, block_size, null,
            block_mask, stored,
        )  # fmt: skip
    for index, blk in enumerate(blocks[position:stop], position):
        if blk is null or (block_mask is not None and not block_mask[index - start]):
            continue
        key = block_hashes[index] + suffix
        num_tokens = (index + 1) * block_size
        if not blk.claim_hash(key, num_tokens):
            if blk.is_null:  # a null block not this pool's: skipped as the null block is
                continue
            partial = blk.block_hash_num_tokens
            if extras is None or partial is None or partial >= num_tokens:
                raise CacheStateError(
                    operation="cache_full_blocks",
                    reason=f"block {blk.block_id} is already cached (only a partial tail "
                    "block is promoted to a full one)",
                )
            drop_block_keys(cache, blk, removed, extras)
            blk.claim_hash(key, num_tokens)
        add_holder(cache, key, blk)
        if stored is not None:
            stored.append(index)


def release(blocks: list[KVCacheBlock]) -> tuple[list[KVCacheBlock], list[KVCacheBlock]]:
    """One reference less each; the blocks now unreferenced (the null block aside), as
    ``(without a hash, with a hash)``, each in the given order."""
    plain: list[KVCacheBlock] = []
    hashed: list[KVCacheBlock] = []
    done = 0 if _loops is None else _loops.release(blocks, plain, hashed, 0)
    for block in blocks[done:] if done else blocks:
        count = block.ref_cnt - 1
        block.ref_cnt = count
        if count == 0 and not block.is_null:
            if block.block_hash is None:
                plain.append(block)
            else:
                hashed.append(block)
    return plain, hashed


def touch(queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock]) -> None:
    """One more reference each; an unreferenced block (the null block aside) leaves
    ``queue`` first (a cache hit on an eviction candidate)."""
    done = 0 if _loops is None else _loops.touch(queue, blocks, 0)
    for block in blocks[done:] if done else blocks:
        if block.ref_cnt == 0 and not block.is_null:
            queue.remove(block)
        block.ref_cnt += 1


def count_evictable(blocks: Sequence[KVCacheBlock]) -> int:
    """How many of ``blocks`` have no reference and are not the null block (a hit on
    them takes an eviction candidate from the free queue)."""
    if _loops is not None and type(blocks) is list:
        count: int = _loops.evictable(blocks)
        if count >= 0:
            return count
    return sum(blk.ref_cnt == 0 and not blk.is_null for blk in blocks)


def longest_prefix(
    cache: CacheDict, block_hashes: Sequence[bytes], limit: int, suffix: bytes
) -> list[KVCacheBlock]:
    """The first holder of ``block_hashes[i] + suffix`` for each ``i`` below ``limit``,
    up to the first key without holders."""
    found: list[KVCacheBlock] = []
    start = 0
    if _loops is not None:
        start = _loops.prefix(cache, block_hashes, suffix, 0, limit, found)
        if start < 0:
            return found
    for block_hash in itertools.islice(block_hashes, start, limit):
        block = first_holder(cache.get(block_hash + suffix))
        if block is None:
            break
        found.append(block)
    return found
