"""Sliding-window and chunked-local attention groups (vLLM's managers of the same names).

Both free the blocks that fall out of what the next token attends to, so a
request's table holds the null block where those were; a cache hit for them
needs only the blocks inside the window at the hit point.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import CacheStateError
from kvpure.cache.single_type import HitBlocks, SingleTypeKVCacheManager, cdiv
from kvpure.hashing import BlockHash, resolve_block_hashes
from kvpure.specs import ChunkedLocalAttentionSpec, SlidingWindowSpec

__all__ = ["ChunkedLocalAttentionManager", "SlidingWindowManager"]


class SlidingWindowManager(SingleTypeKVCacheManager):
    """A sliding window of ``sliding_window`` tokens: token t reads ``(t - window, t]``."""

    def __init__(
        self,
        *,
        kv_cache_spec: SlidingWindowSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        scheduler_block_size: int,
        max_admission_blocks_per_request: int | None = None,
    ) -> None:
        super().__init__(
            kv_cache_spec=kv_cache_spec,
            block_pool=block_pool,
            enable_caching=enable_caching,
            kv_cache_group_id=kv_cache_group_id,
            scheduler_block_size=scheduler_block_size,
            max_admission_blocks_per_request=max_admission_blocks_per_request,
        )
        self.sliding_window = kv_cache_spec.sliding_window

    def contiguous_blocks_for_hit(self, use_eagle: bool) -> int:
        """Cached blocks in a row a hit needs: ``cdiv(window - 1, block_size)`` (+1 for EAGLE)."""
        return cdiv(self.sliding_window - 1, self.block_size) + int(use_eagle)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return max(0, num_computed_tokens - self.sliding_window + 1)

    def reachable_block_mask(self, start_block: int, end_block: int) -> list[bool] | None:
        """Only the last ``need`` blocks before each scheduler-block boundary can serve a hit."""
        block_size = self.block_size
        alignment = self.scheduler_block_size
        need = self.contiguous_blocks_for_hit(self.use_eagle)
        shift = 1 if self.use_eagle else 0
        per_segment = alignment // block_size
        if need >= per_segment:
            return None
        return [
            i >= shift and (i - shift) % per_segment >= per_segment - need
            for i in range(start_block, end_block)
        ]

    def find_longest_cache_hit(
        self,
        block_hashes: Sequence[BlockHash],
        max_length: int,
        kv_cache_group_ids: Sequence[int],
        drop_eagle_block: bool,
        alignment_tokens: int,
    ) -> tuple[HitBlocks, int]:
        """Scan right to left for ``need`` cached blocks in a row; blocks before them are null."""
        pool = self.block_pool
        block_size = self.block_size
        if alignment_tokens % block_size:
            raise CacheStateError(
                operation="find_longest_cache_hit",
                reason="sliding-window groups do not support partial-block cache hits",
            )
        hashes = resolve_block_hashes(block_hashes, pool.hash_block_size, block_size)
        need = self.contiguous_blocks_for_hit(drop_eagle_block)
        max_num_blocks = max_length // block_size
        computed: HitBlocks = tuple([pool.null_block] * max_num_blocks for _ in kv_cache_group_ids)
        num_contiguous = 0
        match_found = False
        for i in range(max_num_blocks - 1, -1, -1):
            cached = pool.get_cached_block(hashes[i], kv_cache_group_ids)
            if not cached:
                num_contiguous = 0
                continue
            if num_contiguous == 0 and block_size != alignment_tokens:
                post_pop = i if drop_eagle_block else i + 1
                if (post_pop * block_size) % alignment_tokens:
                    continue
            for blocks, block in zip(computed, cached, strict=True):
                blocks[i] = block
            num_contiguous += 1
            if num_contiguous >= need:
                for blocks in computed:
                    del blocks[i + num_contiguous :]
                match_found = True
                break
        if not match_found:
            for blocks in computed:
                del blocks[num_contiguous:]
            self._realign(computed, alignment_tokens)
        if drop_eagle_block and computed[0]:
            for blocks in computed:
                blocks.pop()
            self._realign(computed, alignment_tokens)
        return computed, len(computed[0]) * block_size

    def _realign(self, computed: HitBlocks, alignment_tokens: int) -> None:
        while self.block_size != alignment_tokens and (
            len(computed[0]) * self.block_size % alignment_tokens
        ):
            for blocks in computed:
                blocks.pop()


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    """Chunked local attention: a token reads only its own ``attention_chunk_size`` chunk."""

    def __init__(
        self,
        *,
        kv_cache_spec: ChunkedLocalAttentionSpec,
        block_pool: BlockPool,
        enable_caching: bool,
        kv_cache_group_id: int,
        scheduler_block_size: int,
        max_admission_blocks_per_request: int | None = None,
    ) -> None:
        super().__init__(
            kv_cache_spec=kv_cache_spec,
            block_pool=block_pool,
            enable_caching=enable_caching,
            kv_cache_group_id=kv_cache_group_id,
            scheduler_block_size=scheduler_block_size,
            max_admission_blocks_per_request=max_admission_blocks_per_request,
        )
        self.attention_chunk_size = kv_cache_spec.attention_chunk_size

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        chunk = self.attention_chunk_size
        return num_computed_tokens // chunk * chunk

    def find_longest_cache_hit(
        self,
        block_hashes: Sequence[BlockHash],
        max_length: int,
        kv_cache_group_ids: Sequence[int],
        drop_eagle_block: bool,
        alignment_tokens: int,
    ) -> tuple[HitBlocks, int]:
        """Blocks before the current chunk count as hits (null); inside it, a prefix run."""
        if drop_eagle_block:
            raise CacheStateError(
                operation="find_longest_cache_hit",
                reason="EAGLE with chunked local attention is not supported by vLLM",
            )
        if self.block_size != alignment_tokens:
            raise CacheStateError(
                operation="find_longest_cache_hit",
                reason="chunked local attention needs every group to share its block size",
            )
        pool = self.block_pool
        block_size = self.block_size
        hashes = resolve_block_hashes(block_hashes, pool.hash_block_size, block_size)
        max_num_blocks = max_length // block_size
        chunk = self.attention_chunk_size
        start_idx = max_length // chunk * chunk if max_length > 0 else 0
        start_block = start_idx // block_size
        computed: HitBlocks = tuple([pool.null_block] * start_block for _ in kv_cache_group_ids)
        for i in range(start_block, max_num_blocks):
            cached = pool.get_cached_block(hashes[i], kv_cache_group_ids)
            if not cached:
                break
            for blocks, block in zip(computed, cached, strict=True):
                blocks.append(block)
        return computed, len(computed[0]) * block_size
