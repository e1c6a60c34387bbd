"""The per-group managers' shared logic (vLLM's ``SingleTypeKVCacheManager``) and full attention.

A manager keeps, for each request, its block table in one KV cache group
(``req_to_blocks``; the null block stands for blocks that are skipped or were
freed) and how many of those blocks are cached (``num_cached_block``, for
running requests). The subclasses differ in which blocks a request still
needs (``get_num_skipped_tokens``), how a cache hit is found
(``find_longest_cache_hit``) and which full blocks are worth caching
(``reachable_block_mask``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import ClassVar

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import CacheStateError
from kvpure.cache.partial_tail import cache_partial_block
from kvpure.cache.pool_loops import count_evictable
from kvpure.cache.request import CacheRequest
from kvpure.cache.rules import CacheRules, partial_tail_boundary
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import BlockHash, resolve_block_hashes
from kvpure.specs import KVCacheSpec, RSWASpec

__all__ = [
    "FullAttentionManager",
    "HitBlocks",
    "RSWAManager",
    "SingleTypeKVCacheManager",
    "cdiv",
]

HitBlocks = tuple[list[KVCacheBlock], ...]
"""Cache-hit blocks, one list per KV cache group of a lookup."""


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


class SingleTypeKVCacheManager:
    """Block tables of one KV cache group; full-attention behaviour unless overridden."""

    def __init__(
        self,
        *,
        kv_cache_spec: KVCacheSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        scheduler_block_size: int,
        max_admission_blocks_per_request: int | None = None,
    ) -> None:
        self.kv_cache_spec = kv_cache_spec
        self.block_size = kv_cache_spec.block_size
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self.kv_cache_group_id = kv_cache_group_id
        self.scheduler_block_size = scheduler_block_size
        self.max_admission_blocks_per_request = max_admission_blocks_per_request
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}
        self.null_block = block_pool.null_block
        self.use_eagle = False
        # the release's rules where partial tails are cached (full attention whose block
        # is larger than the hash block; set by the coordinator), else None
        self.partial_tail_rules: CacheRules | None = None

    def _blocks_of(self, request_id: str) -> list[KVCacheBlock]:
        """The request's block table, created empty on first use (vLLM's defaultdict)."""
        blocks = self.req_to_blocks.get(request_id)
        if blocks is None:
            blocks = self.req_to_blocks[request_id] = []
        return blocks

    @staticmethod
    def _num_evictable(blocks: Sequence[KVCacheBlock]) -> int:
        return count_evictable(blocks)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens no longer read by attention after ``num_computed_tokens``: none by default."""
        return 0

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        num_local_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """Blocks the pool must give for ``num_tokens`` slots, counting hit blocks it frees."""
        num_required = cdiv(num_tokens, self.block_size)
        cap = self.max_admission_blocks_per_request
        if apply_admission_cap and cap is not None:
            num_required = min(num_required, cap)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            if new_computed_blocks:
                raise CacheStateError(
                    operation="get_num_blocks_to_allocate",
                    reason=f"running request {request_id!r} cannot take new cache-hit blocks",
                )
            return max(num_required - num_req_blocks, 0)
        num_skipped_blocks = self.get_num_skipped_tokens(total_computed_tokens) // self.block_size
        num_local_blocks = len(new_computed_blocks) + num_req_blocks
        num_new = max(num_required - max(num_skipped_blocks, num_local_blocks), 0)
        skip_new = max(0, num_skipped_blocks - num_req_blocks)
        return num_new + self._num_evictable(new_computed_blocks[skip_new:])

    def add_local_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[KVCacheBlock],
        num_local_computed_tokens: int,
    ) -> None:
        """Give a new request its cache-hit blocks (touched), nulls for skipped ones."""
        req_blocks = self._blocks_of(request_id)
        if req_blocks:
            raise CacheStateError(
                operation="add_local_computed_blocks",
                reason=f"request {request_id!r} already holds blocks",
            )
        num_skipped_blocks = (
            self.get_num_skipped_tokens(num_local_computed_tokens) // self.block_size
        )
        if num_skipped_blocks > 0:
            new_computed_blocks = new_computed_blocks[num_skipped_blocks:]
        if self.enable_caching:
            self.block_pool.touch(new_computed_blocks)
        elif new_computed_blocks:
            raise CacheStateError(
                operation="add_local_computed_blocks",
                reason="computed blocks must be empty when prefix caching is disabled",
            )
        req_blocks.extend([self.null_block] * num_skipped_blocks)
        req_blocks.extend(new_computed_blocks)
        self.num_cached_block[request_id] = len(req_blocks)

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> list[KVCacheBlock]:
        """New blocks so the request has slots for ``num_tokens`` tokens."""
        req_blocks = self._blocks_of(request_id)
        num_new = cdiv(num_tokens, self.block_size) - len(req_blocks)
        if num_new <= 0:
            return []
        new_blocks = self.block_pool.get_new_blocks(num_new)
        req_blocks.extend(new_blocks)
        return new_blocks

    def reachable_block_mask(self, start_block: int, end_block: int) -> list[bool] | None:
        """Which of blocks ``[start_block, end_block)`` a later hit can use; None: all."""
        return None

    def cache_blocks(self, request: CacheRequest, num_tokens: int) -> None:
        """Cache the request's blocks that ``num_tokens`` tokens fill and its hashes cover.

        With lookahead hashes (0.33+) a block is hashed only once L tokens follow it, so
        fewer blocks than ``num_tokens`` fills may be cacheable (vLLM 0.33+'s
        ``SingleTypeKVCacheManager.cache_blocks`` caps at ``len(block_hashes) *
        hash_block_size``); without them the hashes cover every full block and the cap
        changes nothing (0.26 has none). Then a partial tail, where ``partial_tail_rules``
        is set (full attention whose block is larger than the hash block).
        """
        request_id = request.request_id
        num_cached = self.num_cached_block.get(request_id, 0)
        num_hashed = len(request.block_hashes) * self.block_pool.hash_block_size
        num_full = min(num_tokens, num_hashed) // self.block_size
        if num_cached < num_full:
            self.block_pool.cache_full_blocks(
                request,
                self._blocks_of(request_id),
                num_cached,
                num_full,
                self.block_size,
                self.kv_cache_group_id,
                self.reachable_block_mask(num_cached, num_full),
            )
            self.num_cached_block[request_id] = num_full
        rules = self.partial_tail_rules
        if rules is not None:  # full attention over smaller hash blocks only
            self._cache_partial_tail(request, num_tokens, rules)

    def _cache_partial_tail(
        self, request: CacheRequest, num_tokens: int, rules: CacheRules
    ) -> None:
        """A partial tail block's extra key (full attention only)."""

    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """Forget the request; its blocks in allocation order."""
        self.num_cached_block.pop(request_id, None)
        return self.req_to_blocks.pop(request_id, [])

    def free(self, request_id: str) -> None:
        """Release the request's blocks, tail first (so the tail is evicted first)."""
        self.block_pool.free_blocks(reversed(self.pop_blocks_for_free(request_id)))

    def _remove_blocks_in_range(self, request_id: str, first_block: int, last_block: int) -> None:
        """Free blocks ``[first_block, last_block)`` back to front, nulling them, until a null."""
        blocks = self.req_to_blocks.get(request_id)
        if blocks is None or first_block >= last_block:
            return
        last_block = min(last_block, len(blocks))
        freed: list[KVCacheBlock] = []
        for i in range(last_block - 1, first_block - 1, -1):
            if blocks[i] is self.null_block:
                break
            freed.append(blocks[i])
            blocks[i] = self.null_block
        if freed:
            self.block_pool.free_blocks(freed)

    def remove_skipped_blocks(
        self, request_id: str, processed_computed_tokens: int, num_prompt_tokens: int | None = None
    ) -> None:
        """Free the blocks attention will not read again (outside the window).

        ``num_prompt_tokens`` is read by R-SWA only.
        """
        num_skipped_tokens = self.get_num_skipped_tokens(processed_computed_tokens)
        if num_skipped_tokens <= 0:
            return
        blocks = self._blocks_of(request_id)
        num_skipped_blocks = min(num_skipped_tokens // self.block_size, len(blocks))
        self._remove_blocks_in_range(request_id, 0, num_skipped_blocks)

    def new_step_starts(self) -> None:
        """A scheduling step begins (only Mamba keeps per-step state)."""

    # -- cache hits -------------------------------------------------------------------------

    supports_fine_grained_hash_lookup: ClassVar[bool] = False

    def find_longest_cache_hit(
        self,
        block_hashes: Sequence[BlockHash],
        max_length: int,
        kv_cache_group_ids: Sequence[int],
        drop_eagle_block: bool,
        alignment_tokens: int,
    ) -> tuple[HitBlocks, int]:
        """The longest prefix hit of at most ``max_length`` tokens, common to the groups."""
        raise NotImplementedError


class FullAttentionManager(SingleTypeKVCacheManager):
    """Full attention (and chunked-local lookups' base): every block is kept and cached.

    With a block larger than the hash block, the block holding the prompt's last hash
    boundary is also cached under the hash there (a partial tail, see
    :meth:`_cache_partial_tail`), under ``partial_tail_rules`` (set by the coordinator).
    """

    supports_fine_grained_hash_lookup = True

    def _cache_partial_tail(
        self, request: CacheRequest, num_tokens: int, rules: CacheRules
    ) -> None:
        """Register the partial tail (vLLM's ``FullAttentionManager._cache_partial_tail_block``,
        after the full blocks): when the prompt's tail boundary ends inside a block that
        ``num_tokens`` reached, the block is cached under the hash at that boundary too."""
        hash_block_size = self.block_pool.hash_block_size
        boundary = partial_tail_boundary(
            rules,
            num_prompt_tokens=request.num_prompt_tokens,
            num_hashes=len(request.block_hashes),
            hash_block_size=hash_block_size,
            use_eagle=self.use_eagle,
        )
        if boundary == 0 or boundary > num_tokens or boundary % self.block_size == 0:
            return
        blocks = self._blocks_of(request.request_id)
        index = boundary // self.block_size
        if index < len(blocks):
            cache_partial_block(
                self.block_pool,
                request,
                blocks[index],
                boundary,
                self.kv_cache_group_id,
                mm_from_last_item=rules.partial_tail_event_scans_last_mm_item,
            )

    def find_longest_cache_hit(
        self,
        block_hashes: Sequence[BlockHash],
        max_length: int,
        kv_cache_group_ids: Sequence[int],
        drop_eagle_block: bool,
        alignment_tokens: int,
    ) -> tuple[HitBlocks, int]:
        """The longest run of cached blocks from the start (hashes chain, so a miss ends it)."""
        pool = self.block_pool
        block_size = self.block_size
        if alignment_tokens < block_size and block_size % alignment_tokens == 0:
            raise CacheStateError(
                operation="find_longest_cache_hit",
                reason="fine-grained (partial-block) cache hits are not modelled",
            )
        hashes = resolve_block_hashes(block_hashes, pool.hash_block_size, block_size)
        limit = max_length // block_size
        computed: HitBlocks
        if len(kv_cache_group_ids) == 1:  # one group: the pool's loop
            computed = (pool.longest_cached_prefix(hashes, kv_cache_group_ids[0], limit),)
        else:
            computed = tuple([] for _ in kv_cache_group_ids)
            for block_hash in itertools.islice(hashes, limit):
                cached = pool.get_cached_block(block_hash, kv_cache_group_ids)
                if not cached:
                    break
                for blocks, block in zip(computed, cached, strict=True):
                    blocks.append(block)
        hit_length = len(computed[0]) * block_size
        if drop_eagle_block and hit_length > 0:
            hit_length -= min(alignment_tokens, block_size)
        hit_length -= hit_length % alignment_tokens
        num_blocks = cdiv(hit_length, block_size)
        for blocks in computed:
            del blocks[num_blocks:]
        return computed, hit_length


class RSWAManager(FullAttentionManager):
    """Reference sliding window: the prompt stays visible, decoding keeps ``rswa_window`` tokens.

    The blocks between the prompt's last block and the decode window are freed.
    """

    def __init__(
        self,
        *,
        kv_cache_spec: RSWASpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        scheduler_block_size: int,
    ) -> None:
        super().__init__(
            kv_cache_spec=kv_cache_spec,
            block_pool=block_pool,
            enable_caching=enable_caching,
            kv_cache_group_id=kv_cache_group_id,
            scheduler_block_size=scheduler_block_size,
        )
        self.rswa_window = kv_cache_spec.rswa_window

    def remove_skipped_blocks(
        self, request_id: str, processed_computed_tokens: int, num_prompt_tokens: int | None = None
    ) -> None:
        """Free the gap blocks: wholly after the prompt and before the decode window."""
        if num_prompt_tokens is None:
            super().remove_skipped_blocks(request_id, processed_computed_tokens)
            return
        first_gap_block = cdiv(num_prompt_tokens, self.block_size)
        window_start = max(num_prompt_tokens, processed_computed_tokens - self.rswa_window)
        self._remove_blocks_in_range(request_id, first_gap_block, window_start // self.block_size)
