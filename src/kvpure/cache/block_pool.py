"""vLLM 0.26's ``BlockPool``: every block, the free queue in eviction order, the prefix cache.

Block 0 is the null block (taken off the queue at start, never freed, never
cached). A cached block is a full block (or a partial tail, see
:mod:`kvpure.cache.partial_tail`, which may hold more keys: ``extra_keys``) whose hash
(with its group id) maps to it in the prefix cache; it may be held by requests or sit
in the free queue as an eviction candidate. One hash may map to several blocks (vLLM does
not de-duplicate, so block tables stay append-only): a lookup returns the
earliest-cached block still holding it.

Events (when enabled) queue up in order and are handed over by
:meth:`BlockPool.take_events` (the event methods are in :mod:`kvpure.cache.pool_events`,
a base class of ``BlockPool``). A ``BlockStored`` event's extra keys are the
hash's, as the release publishes them (0.33+ strips its tags); with lookahead
hashes (0.33+, L > 0) they cover the window ``[s, e + L)`` as the hash does
(vLLM's ``BlockPool.generate_event_extra_keys``) and the event names the L
tokens after each block (``lookahead_token_ids``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import cast

from kvpure.cache.errors import CacheStateError
from kvpure.cache.event_keys import event_extra_keys, lookahead_token_ids
from kvpure.cache.events import (
    AllBlocksCleared,
    KVCacheEvent,
    blocks_removed_on_gpu,
)
from kvpure.cache.pool_checks import check_pool_arguments
from kvpure.cache.pool_events import BlockPoolEvents
from kvpure.cache.pool_loops import (
    CacheDict,
    Extras,
    Holders,
    first_holder,
    longest_prefix,
    release,
    store,
    take,
    touch,
)
from kvpure.cache.request import CacheRequest
from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock
from kvpure.hashing import (
    VLLM_0_26,
    BlockHash,
    BlockHashWithGroupId,
    ExternalBlockHash,
    VllmHashProfile,
    make_block_hash_with_group_id,
    resolve_block_hashes,
)
from kvpure.hashing.types import (
    block_hash_converter,
    low_64_bits_of_each,
)

__all__ = ["MAX_NUM_GPU_BLOCKS", "BlockPool"]

MAX_NUM_GPU_BLOCKS = 2**22
"""The most blocks a pool is built with (4,194,304, null block included; about 0.5 GB
of block objects, built in a few seconds). Every block is made up front, so a larger
count is refused at once rather than exhausting memory."""


class BlockPool(BlockPoolEvents):
    """The blocks of one KV cache, their free queue, and the prefix cache over them.

    ``hash_block_size`` is the block size request hashes are computed at; a
    group of a larger block size views them through
    :func:`kvpure.hashing.resolve_block_hashes`.
    """

    def __init__(
        self,
        *,
        num_gpu_blocks: int,
        enable_caching: bool,
        hash_block_size: int,
        enable_kv_cache_events: bool = False,
        use_int_block_hashes: bool = True,
        profile: VllmHashProfile = VLLM_0_26,
        num_hash_lookahead_tokens: int = 0,
    ) -> None:
        if (
            isinstance(num_gpu_blocks, bool)
            or not isinstance(num_gpu_blocks, int)
            or not 1 <= num_gpu_blocks <= MAX_NUM_GPU_BLOCKS
        ):
            raise CacheStateError(
                operation="BlockPool",
                reason=f"num_gpu_blocks must be an integer from 1 to {MAX_NUM_GPU_BLOCKS} "
                f"(got {num_gpu_blocks!r})",
            )
        if (
            isinstance(num_hash_lookahead_tokens, bool)
            or not isinstance(num_hash_lookahead_tokens, int)
            or num_hash_lookahead_tokens < 0
        ):
            raise CacheStateError(
                operation="BlockPool",
                reason="num_hash_lookahead_tokens must be a non-negative integer "
                f"(got {num_hash_lookahead_tokens!r})",
            )
        check_pool_arguments(
            enable_caching, enable_kv_cache_events, use_int_block_hashes, hash_block_size, profile
        )
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.enable_kv_cache_events = enable_kv_cache_events
        self.use_int_block_hashes = use_int_block_hashes
        self.profile = profile
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self.blocks: list[KVCacheBlock] = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # hash key -> its one block, or {block_id: block} in caching order once two blocks
        # cache it (vLLM's BlockHashToBlockMap); lookups return the first
        self.cached_block_hash_to_block: dict[BlockHashWithGroupId, Holders] = {}
        # block id -> the partial-tail keys it holds beside its own hash (vLLM's
        # cached_block_hashes_by_block); evicting or promoting the block drops them too
        self.extra_keys: Extras = {}
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.kv_event_queue: list[KVCacheEvent] = []
        self._to_external = block_hash_converter(use_int_block_hashes=use_int_block_hashes)
        # group id -> the 4 bytes a hash key ends with (make_block_hash_with_group_id's)
        self._group_suffixes: dict[int, bytes] = {}

    def group_suffix(self, group_id: int) -> bytes:
        """What ``make_block_hash_with_group_id`` appends for ``group_id`` (checked once)."""
        suffix = self._group_suffixes.get(group_id)
        if suffix is None:
            suffix = self._group_suffixes[group_id] = make_block_hash_with_group_id(
                BlockHash(b""), group_id
            )
        return suffix

    # -- lookups ---------------------------------------------------------------------------

    def get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: Sequence[int]
    ) -> list[KVCacheBlock] | None:
        """The cached block of ``block_hash`` for each group, or None if any group misses."""
        # keyed by plain bytes here: each key is a hash with its group id appended
        cache = self.prefix_cache()
        suffixes = self._group_suffixes
        found: list[KVCacheBlock] = []
        for group_id in kv_cache_group_ids:
            suffix = suffixes.get(group_id)
            if suffix is None:
                suffix = self.group_suffix(group_id)
            block = first_holder(cache.get(block_hash + suffix))
            if block is None:
                return None
            found.append(block)
        return found

    def longest_cached_prefix(
        self, block_hashes: Sequence[BlockHash], group_id: int, limit: int | None = None
    ) -> list[KVCacheBlock]:
        """``get_cached_block(h, [group_id])[0]`` for each of the first ``limit`` hashes
        (None: all) in order, up to the first miss (one group's prefix hit, without a list
        per block)."""
        return longest_prefix(
            self.prefix_cache(),
            block_hashes,
            len(block_hashes) if limit is None else limit,
            self.group_suffix(group_id),
        )

    def prefix_cache(self) -> CacheDict:
        """The prefix cache, keyed by plain bytes (each key a hash with its group id)."""
        return cast("CacheDict", self.cached_block_hash_to_block)

    @property
    def num_cached_hashes(self) -> int:
        """Distinct hash keys in the prefix cache."""
        return len(self.cached_block_hash_to_block)

    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue (eviction candidates included)."""
        return self.free_block_queue.num_free_blocks

    def free_block_ids_head(self, limit: int) -> tuple[int, ...]:
        """The ids of the first ``limit`` free blocks (next to evict first): the whole
        queue when it is no longer, without walking past ``limit`` otherwise."""
        queue = self.free_block_queue
        if queue.num_free_blocks <= limit:
            return queue.free_block_ids()
        return tuple(b.block_id for b in itertools.islice(queue.iter_blocks_after(None), limit))

    def get_usage(self) -> float:
        """``1 - free / (num_gpu_blocks - 1)``: the null block does not count."""
        total = self.num_gpu_blocks - 1
        if not total:
            return 0.0
        return 1.0 - (self.get_num_free_blocks() / total)

    # -- caching ---------------------------------------------------------------------------

    def cache_full_blocks(
        self,
        request: CacheRequest,
        blocks: Sequence[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        block_mask: Sequence[bool] | None = None,
    ) -> None:
        """Cache ``blocks[num_cached_blocks:num_full_blocks]`` under the request's hashes.

        Null blocks, and blocks whose ``block_mask`` entry is False, are skipped.
        With events on, one BlockStored covers the call.
        """
        if num_cached_blocks >= num_full_blocks:
            return
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        if block_mask is not None and len(block_mask) != len(new_full_blocks):
            raise CacheStateError(
                operation="cache_full_blocks",
                reason=f"block_mask has {len(block_mask)} entries for "
                f"{len(new_full_blocks)} new full blocks",
            )
        block_hashes = resolve_block_hashes(request.block_hashes, self.hash_block_size, block_size)
        events = self.enable_kv_cache_events
        stored_indices: list[int] | None = [] if events else None
        promoted: list[bytes] | None = [] if events else None
        store(
            self.prefix_cache(),
            blocks,
            block_hashes,
            (num_cached_blocks, num_full_blocks),
            self.group_suffix(kv_cache_group_id),
            block_size,
            self.null_block,  # the only block of this pool that is_null
            block_mask,
            stored_indices,
            self.extra_keys,
            promoted,
        )
        if stored_indices is None:
            return
        if promoted:  # a partial tail became full: its keys left it first
            self.kv_event_queue.extend(blocks_removed_on_gpu(self.split_keys(promoted)))
        stored_hashes = [block_hashes[i] for i in stored_indices]
        new_hashes: list[ExternalBlockHash] = (
            list(low_64_bits_of_each(stored_hashes))
            if self.use_int_block_hashes
            else list(stored_hashes)
        )
        parent = (
            None if num_cached_blocks == 0 else self.external(block_hashes[num_cached_blocks - 1])
        )
        lookahead = self.num_hash_lookahead_tokens
        self.kv_event_queue.append(
            self.stored_event(
                request,
                block_hashes=new_hashes,
                parent_block_hash=parent,
                start_token_idx=num_cached_blocks * block_size,
                end_token_idx=num_full_blocks * block_size,
                block_size=block_size,
                group_id=kv_cache_group_id,
                extra_keys=event_extra_keys(
                    self.profile, request, stored_indices, block_size, lookahead
                ),
                lookahead_token_ids=lookahead_token_ids(
                    request, stored_indices, block_size, lookahead
                ),
            )
        )

    def _evict_cached_blocks(self, blocks: list[KVCacheBlock]) -> None:
        """Drop each block's hash from the prefix cache, a BlockRemoved for each one that a
        lookup could still find (vLLM's ``_maybe_evict_cached_block``, in one loop); then
        one more reference to each block."""
        removed: list[bytes] | None = [] if self.enable_kv_cache_events else None
        take(self.prefix_cache() if self.enable_caching else None, blocks, removed, self.extra_keys)
        if removed:
            self.kv_event_queue.extend(blocks_removed_on_gpu(self.split_keys(removed)))

    # -- allocation --------------------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Take ``num_blocks`` blocks from the queue head, evicting their cached hashes."""
        if num_blocks > self.get_num_free_blocks():
            raise CacheStateError(
                operation="get_new_blocks",
                reason=f"cannot get {num_blocks} free blocks from the pool "
                f"({self.get_num_free_blocks()} free)",
            )
        blocks = self.free_block_queue.popleft_n(num_blocks)
        self._evict_cached_blocks(blocks)
        return blocks

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """One more reference to each block; a free one leaves the queue (a cache hit)."""
        touch(self.free_block_queue, blocks if type(blocks) is list else list(blocks))

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """One reference less each; blocks now unreferenced join the queue.

        ``ordered_blocks`` is in eviction order. Blocks without a hash go to the
        head (they can never hit), blocks with one to the tail, each set in
        the given order.
        """
        without_hash, with_hash = release(
            ordered_blocks if type(ordered_blocks) is list else list(ordered_blocks)
        )
        self.free_block_queue.prepend_n(without_hash)
        self.free_block_queue.append_n(with_hash)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash; refused (False) while any block is held."""
        if self.num_gpu_blocks - self.get_num_free_blocks() != 1:
            return False
        self.cached_block_hash_to_block = {}
        self.extra_keys = {}
        for block in self.blocks:
            block.reset_hash()
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(AllBlocksCleared())
        return True
