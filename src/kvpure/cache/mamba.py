"""Mamba groups (vLLM's ``MambaManager``): one recurrent state per block, "align" mode included.

A Mamba state summarises every token before it, so a request needs only its
latest state block (the ones before are skipped), and a cache hit is the
single latest cached state at or before the hit point. In "align" mode the
scheduler makes prefill chunks end on block boundaries so each state lands
in its own block; the block of the step before is kept until the next step
has copied from it. Partial-block (fine-grained) hits are not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import CacheStateError
from kvpure.cache.request import CacheRequest
from kvpure.cache.single_type import HitBlocks, SingleTypeKVCacheManager, cdiv
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import BlockHash, resolve_block_hashes
from kvpure.specs import MambaSpec

__all__ = ["MambaManager"]


class MambaManager(SingleTypeKVCacheManager):
    """Mamba state blocks; ``mamba_cache_mode`` "align" reuses speculative blocks per step."""

    # vLLM's flag (a Mamba state may be hit at a hash boundary inside a block, in "align"
    # mode); kvpure refuses such partial-block hits at setup, so nothing here reads it
    supports_fine_grained_hash_lookup = True

    def __init__(
        self,
        *,
        kv_cache_spec: MambaSpec,
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
        self.mamba_cache_mode = kv_cache_spec.mamba_cache_mode
        self.num_speculative_blocks = kv_cache_spec.num_speculative_blocks
        self.cached_blocks_this_step: set[bytes] = set()
        self.last_state_block_idx: dict[str, int] = {}
        self.allocated_block_reqs: set[str] = set()

    @property
    def align(self) -> bool:
        """Whether the group runs in vLLM's "align" cache mode."""
        return self.mamba_cache_mode == "align"

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return num_computed_tokens - 1

    def find_longest_cache_hit(
        self,
        block_hashes: Sequence[BlockHash],
        max_length: int,
        kv_cache_group_ids: Sequence[int],
        drop_eagle_block: bool,
        alignment_tokens: int,
    ) -> tuple[HitBlocks, int]:
        """The rightmost cached state on an aligned boundary; nulls before it."""
        pool = self.block_pool
        block_size = self.block_size
        if alignment_tokens < block_size and block_size % alignment_tokens == 0:
            raise CacheStateError(
                operation="find_longest_cache_hit",
                reason="fine-grained (partial-block) Mamba cache hits are not modelled",
            )
        hashes = resolve_block_hashes(block_hashes, pool.hash_block_size, block_size)
        computed: HitBlocks = tuple([] for _ in kv_cache_group_ids)
        for i in range(max_length // block_size - 1, -1, -1):
            cached = pool.get_cached_block(hashes[i], kv_cache_group_ids)
            if not cached:
                continue
            if block_size != alignment_tokens and (i + 1) * block_size % alignment_tokens:
                continue
            for blocks, block in zip(computed, cached, strict=True):
                blocks.extend([pool.null_block] * i)
                blocks.append(block)
            return computed, (i + 1) * block_size
        return computed, 0

    def remove_skipped_blocks(
        self, request_id: str, processed_computed_tokens: int, num_prompt_tokens: int | None = None
    ) -> None:
        """Free skipped states; in align mode also the state block of two steps ago."""
        super().remove_skipped_blocks(request_id, processed_computed_tokens)
        if not self.align:
            return
        last = self.last_state_block_idx.get(request_id)
        if last is not None and last < cdiv(processed_computed_tokens, self.block_size) - 1:
            blocks = self._blocks_of(request_id)
            if blocks[last] is not self.null_block:
                self.block_pool.free_blocks([blocks[last]])
                blocks[last] = self.null_block

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
        """As the base, but align mode needs one state block (plus speculative ones) per step."""
        if new_computed_blocks and new_computed_blocks[-1].block_hash in (
            self.cached_blocks_this_step
        ):
            # A state cached in this very step is not usable yet: ask for more than the pool.
            return self.block_pool.num_gpu_blocks + 1
        if not self.align:
            if self.num_speculative_blocks > 0:
                num_tokens += self.block_size * self.num_speculative_blocks
            return super().get_num_blocks_to_allocate(
                request_id,
                num_tokens,
                new_computed_blocks,
                total_computed_tokens,
                num_local_computed_tokens,
                num_tokens_main_model,
                apply_admission_cap,
            )
        num_required = cdiv(num_tokens_main_model, self.block_size) + self.num_speculative_blocks
        num_new = (
            num_required - len(new_computed_blocks) - len(self.req_to_blocks.get(request_id, ()))
        )
        if num_new > 0:
            num_new = (
                1 if request_id in self.allocated_block_reqs else 1 + self.num_speculative_blocks
            )
        return num_new + self._num_evictable(new_computed_blocks)

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> list[KVCacheBlock]:
        """Align mode: nulls up to the new state, speculative blocks moved forward, one new."""
        if not self.align:
            if self.num_speculative_blocks > 0:
                num_tokens += self.block_size * self.num_speculative_blocks
            return super().allocate_new_blocks(request_id, num_tokens, num_tokens_main_model)
        spec = self.num_speculative_blocks
        req_blocks = self._blocks_of(request_id)
        num_required = cdiv(num_tokens_main_model, self.block_size) + spec
        if num_required <= len(req_blocks):
            return []
        prev_len = len(req_blocks)
        allocated_before = request_id in self.allocated_block_reqs
        if allocated_before:
            self.last_state_block_idx[request_id] = prev_len - 1 - spec
        elif prev_len > 0:
            self.last_state_block_idx[request_id] = prev_len - 1
        num_skipped = num_required - spec - 1
        if prev_len < num_skipped:
            req_blocks.extend([self.null_block] * (num_skipped - prev_len))
        if allocated_before:
            for block_idx in range(prev_len - spec, prev_len):
                if block_idx >= num_skipped:
                    break
                req_blocks.append(req_blocks[block_idx])
                req_blocks[block_idx] = self.null_block
        num_new = num_required - len(req_blocks)
        limit = 1 if allocated_before else spec + 1
        if num_new > limit:
            raise CacheStateError(
                operation="allocate_new_blocks",
                reason=f"align mode allocates at most {limit} blocks a step (asked for {num_new})",
            )
        new_blocks = self.block_pool.get_new_blocks(num_new)
        returned = req_blocks[prev_len:]
        req_blocks.extend(new_blocks)
        self.allocated_block_reqs.add(request_id)
        returned.extend(new_blocks)
        return returned

    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        self.allocated_block_reqs.discard(request_id)
        self.last_state_block_idx.pop(request_id, None)
        return super().pop_blocks_for_free(request_id)

    def cache_blocks(self, request: CacheRequest, num_tokens: int) -> None:
        """Cache as the base does, remembering the states cached in this step."""
        request_id = request.request_id
        before = self.num_cached_block.get(request_id, 0)
        super().cache_blocks(request, num_tokens)
        after = self.num_cached_block.get(request_id, 0)
        if after > before:
            for block in self._blocks_of(request_id)[before:after]:
                key = block.block_hash
                if not block.is_null and key is not None:
                    self.cached_blocks_this_step.add(key)

    def new_step_starts(self) -> None:
        self.cached_blocks_this_step.clear()
