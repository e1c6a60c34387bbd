"""The KV cache coordinator: one block pool, one manager per KV cache group, one hit length.

vLLM picks one of three coordinators; here one class covers them, by the
number of groups and whether prefix caching is on:

- caching off: no hits;
- one group ("unitary"): that group's hit;
- several groups ("hybrid"): the groups are batched by equal spec, full
  attention first, and each batch either accepts the candidate hit length
  or shortens it, until a length every batch accepts (a fixed point).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import ManagerRefusedError, UnsupportedTraceError
from kvpure.cache.mamba import MambaManager
from kvpure.cache.request import CacheRequest
from kvpure.cache.rules import CACHE_RULES_0_26, CacheRules, eagle_hit_max_length
from kvpure.cache.single_type import (
    FullAttentionManager,
    HitBlocks,
    RSWAManager,
    SingleTypeKVCacheManager,
    cdiv,
)
from kvpure.cache.windowed import ChunkedLocalAttentionManager, SlidingWindowManager
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import BlockHash
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowSpec,
)
from kvpure.specs.kv_cache_config import KVCacheConfig

__all__ = ["KVCacheCoordinator", "make_manager"]


def make_manager(
    spec: KVCacheSpec,
    *,
    block_pool: BlockPool,
    enable_caching: bool,
    group_id: int,
    scheduler_block_size: int,
    max_in_flight_tokens: int,
    max_model_len: int,
    rules: CacheRules | None = None,
) -> SingleTypeKVCacheManager:
    """The manager vLLM registers for ``spec``'s type (``rules``: the release's; 0.26's
    when None)."""
    if isinstance(spec, SlidingWindowSpec | ChunkedLocalAttentionSpec):
        admission = spec.max_admission_blocks_per_request(max_in_flight_tokens, max_model_len)
        if isinstance(spec, SlidingWindowSpec):
            return SlidingWindowManager(
                kv_cache_spec=spec,
                block_pool=block_pool,
                enable_caching=enable_caching,
                kv_cache_group_id=group_id,
                scheduler_block_size=scheduler_block_size,
                max_admission_blocks_per_request=admission,
            )
        return ChunkedLocalAttentionManager(
            kv_cache_spec=spec,
            block_pool=block_pool,
            enable_caching=enable_caching,
            kv_cache_group_id=group_id,
            scheduler_block_size=scheduler_block_size,
            max_admission_blocks_per_request=admission,
        )
    kind = type(spec).__name__
    if isinstance(spec, SinkFullAttentionSpec):
        # vLLM (0.26 to 0.34) passes needs_kv_cache_zeroing to every manager, which
        # SinkFullAttentionManager.__init__ does not take: building it is a TypeError.
        raise UnsupportedTraceError(
            feature=f"kv_cache_groups[{group_id}] (SinkFullAttentionSpec)",
            reason="vLLM (0.26.0 to 0.34.0) cannot build a KV cache manager for sink attention "
            "(SinkFullAttentionManager.__init__ rejects needs_kv_cache_zeroing)",
        )
    if isinstance(spec, CrossAttentionSpec):
        raise UnsupportedTraceError(
            feature=f"kv_cache_groups[{group_id}] ({kind})",
            reason="the cache replay models full-attention, sliding-window, chunked-local and "
            "Mamba groups only",
        )
    if (
        isinstance(spec, MambaSpec)
        and enable_caching
        and rules is not None
        and rules.mamba_caching_requires_align
        and spec.mamba_cache_mode != "align"
    ):
        raise ManagerRefusedError(
            feature=f"kv_cache_groups[{group_id}] (MambaSpec, mamba_cache_mode "
            f"{spec.mamba_cache_mode!r})",
            reason=f"vLLM {rules.vllm_version}: Mamba prefix caching requires "
            "mamba_cache_mode='align'",
        )
    manager: type[SingleTypeKVCacheManager] | None = (
        MambaManager
        if isinstance(spec, MambaSpec)
        else RSWAManager
        if isinstance(spec, RSWASpec)
        else FullAttentionManager
        if isinstance(spec, FullAttentionSpec)
        else None
    )
    if manager is None:
        raise UnsupportedTraceError(
            feature=f"kv_cache_groups[{group_id}] ({kind})",
            reason="no vLLM KV cache manager is modelled for this spec type",
        )
    built = manager(
        kv_cache_spec=spec,
        block_pool=block_pool,
        enable_caching=enable_caching,
        kv_cache_group_id=group_id,
        scheduler_block_size=scheduler_block_size,
    )
    if isinstance(built, FullAttentionManager) and built.block_size != block_pool.hash_block_size:
        built.partial_tail_rules = CACHE_RULES_0_26 if rules is None else rules
    return built


@dataclass(slots=True)
class _SpecGroup:
    spec: KVCacheSpec
    group_ids: list[int]
    use_eagle: bool


class KVCacheCoordinator:
    """The pool and the group managers, as vLLM's coordinators drive them."""

    def __init__(
        self,
        *,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        max_in_flight_tokens: int,
        use_eagle: bool,
        enable_caching: bool,
        enable_kv_cache_events: bool,
        scheduler_block_size: int,
        hash_block_size: int,
        use_int_block_hashes: bool,
        rules: CacheRules,
        num_hash_lookahead_tokens: int = 0,
    ) -> None:
        groups = kv_cache_config.kv_cache_groups
        self.rules = rules
        self.enable_caching = enable_caching
        self.scheduler_block_size = scheduler_block_size
        self.hash_block_size = hash_block_size
        self.block_pool = BlockPool(
            num_gpu_blocks=kv_cache_config.num_blocks,
            enable_caching=enable_caching,
            hash_block_size=hash_block_size,
            enable_kv_cache_events=enable_kv_cache_events,
            use_int_block_hashes=use_int_block_hashes,
            profile=rules.hash_profile,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens,
        )
        eagle_ids = {i for i, g in enumerate(groups) if g.is_eagle_group}
        if use_eagle and not eagle_ids:
            eagle_ids = set(range(len(groups)))
        if rules.eagle_groups_drop_only_with_use_eagle and not use_eagle:
            # 0.33+: lookahead hashes clear use_eagle; the groups stay marked, none drops
            eagle_ids = set()
        self.eagle_group_ids = eagle_ids
        """The groups whose trailing matched block is dropped (vLLM 0.33+'s
        ``drop_eagle_group_ids``; 0.26's ``eagle_group_ids``)."""
        self.managers: tuple[SingleTypeKVCacheManager, ...] = tuple(
            make_manager(
                g.kv_cache_spec,
                block_pool=self.block_pool,
                enable_caching=enable_caching,
                group_id=i,
                scheduler_block_size=scheduler_block_size,
                max_in_flight_tokens=max_in_flight_tokens,
                max_model_len=max_model_len,
                rules=rules,
            )
            for i, g in enumerate(groups)
        )
        # the managers that keep per-step state (Mamba); the others' step hook does nothing
        self._stepped = tuple(
            m
            for m in self.managers
            if type(m).new_step_starts is not SingleTypeKVCacheManager.new_step_starts
        )
        self.spec_groups: list[_SpecGroup] = []
        if not enable_caching:
            self.kind = "KVCacheCoordinatorNoPrefixCache"
        elif len(groups) == 1:
            self.kind = "UnitaryKVCacheCoordinator"
            self.managers[0].use_eagle = 0 in eagle_ids
        else:
            self.kind = "HybridKVCacheCoordinator"
            self._split_groups()

    def _split_groups(self) -> None:
        """Batch groups of equal spec (first seen first), full attention first."""
        for i, manager in enumerate(self.managers):
            spec = manager.kv_cache_spec
            for batch in self.spec_groups:
                if batch.spec == spec:
                    batch.group_ids.append(i)
                    batch.use_eagle = batch.use_eagle or i in self.eagle_group_ids
                    break
            else:
                self.spec_groups.append(_SpecGroup(spec, [i], i in self.eagle_group_ids))
        if len(self.spec_groups) < 2:
            raise UnsupportedTraceError(
                feature="kv_cache_groups",
                reason="vLLM's hybrid coordinator needs at least two distinct group specs",
            )
        self.spec_groups.sort(key=lambda b: not isinstance(b.spec, FullAttentionSpec))
        for batch in self.spec_groups:
            if batch.use_eagle:
                for gid in batch.group_ids:
                    self.managers[gid].use_eagle = True

    # -- allocation -------------------------------------------------------------------------

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]],
        total_computed_tokens: int,
        num_local_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """Blocks all groups together need from the pool."""
        total = 0
        for i, manager in enumerate(self.managers):
            total += manager.get_num_blocks_to_allocate(
                request_id,
                num_tokens,
                new_computed_blocks[i],
                total_computed_tokens,
                num_local_computed_tokens,
                num_tokens_main_model,
                apply_admission_cap,
            )
        return total

    def allocate_new_computed_blocks(
        self,
        request_id: str,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]],
        num_local_computed_tokens: int,
    ) -> None:
        """Give a new request its hit blocks in every group (no-op for a running one)."""
        if any(request_id in m.num_cached_block for m in self.managers):
            return
        for i, manager in enumerate(self.managers):
            manager.add_local_computed_blocks(
                request_id, new_computed_blocks[i], num_local_computed_tokens
            )

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> tuple[list[KVCacheBlock], ...]:
        """New blocks in every group for ``num_tokens`` slots."""
        return tuple(
            [
                m.allocate_new_blocks(request_id, num_tokens, num_tokens_main_model)
                for m in self.managers
            ]
        )

    def cache_blocks(self, request: CacheRequest, num_computed_tokens: int) -> None:
        """Cache the full blocks of ``num_computed_tokens`` (hybrid: aligned to the scheduler)."""
        if self.kind != "HybridKVCacheCoordinator":
            for manager in self.managers:
                manager.cache_blocks(request, num_computed_tokens)
            return
        step = self.scheduler_block_size
        aligned = num_computed_tokens // step * step
        for manager in self.managers:
            num_tokens = aligned
            if manager.use_eagle and aligned > 0:
                num_tokens = min(num_computed_tokens, aligned + manager.block_size)
            manager.cache_blocks(request, num_tokens)

    def free(self, request_id: str) -> None:
        """Release the request's blocks in every group."""
        for manager in self.managers:
            manager.free(request_id)

    def remove_skipped_blocks(
        self, request_id: str, processed_computed_tokens: int, num_prompt_tokens: int | None = None
    ) -> None:
        """Free blocks outside every group's attention window."""
        for manager in self.managers:
            manager.remove_skipped_blocks(request_id, processed_computed_tokens, num_prompt_tokens)

    def get_blocks(self, request_id: str) -> tuple[list[KVCacheBlock], ...]:
        """The request's block table per group (empty where it has none)."""
        return tuple(list(m.req_to_blocks.get(request_id) or []) for m in self.managers)

    def new_step_starts(self) -> None:
        """A scheduling step begins."""
        for manager in self._stepped:
            manager.new_step_starts()

    # -- cache hits -------------------------------------------------------------------------

    def find_longest_cache_hit(
        self, block_hashes: Sequence[BlockHash], max_cache_hit_length: int
    ) -> tuple[HitBlocks, int, int]:
        """Hit blocks per group, the hit length, and the uncached common prefix length."""
        if self.kind == "KVCacheCoordinatorNoPrefixCache":
            return tuple([] for _ in self.managers), 0, 0
        if self.kind == "UnitaryKVCacheCoordinator":
            manager = self.managers[0]
            blocks, length = manager.find_longest_cache_hit(
                block_hashes,
                max_cache_hit_length,
                [0],
                0 in self.eagle_group_ids,
                manager.block_size,
            )
            return blocks, length, 0
        return self._find_hybrid(block_hashes, max_cache_hit_length)

    def _find_hybrid(
        self, block_hashes: Sequence[BlockHash], max_cache_hit_length: int
    ) -> tuple[HitBlocks, int, int]:
        num_groups = len(self.managers)
        hit_length = max_cache_hit_length
        longest = 0
        hit_blocks: list[list[KVCacheBlock] | None] = [None] * num_groups
        hit_lengths = [0] * num_groups
        batches = self.spec_groups
        simple = len(batches) == 2 and isinstance(batches[0].spec, FullAttentionSpec)
        verified: set[int] = set()
        alignment = self.scheduler_block_size
        while True:
            current = hit_length
            for idx, batch in enumerate(batches):
                first = batch.group_ids[0]
                manager = self.managers[first]
                if isinstance(batch.spec, FullAttentionSpec) and hit_blocks[first] is not None:
                    current = min(current, hit_lengths[first])
                    continue
                drop = batch.use_eagle and idx not in verified
                max_length = current
                if drop and not isinstance(batch.spec, MambaSpec):
                    max_length = eagle_hit_max_length(
                        self.rules,
                        current=current,
                        block_size=manager.block_size,
                        max_cache_hit_length=max_cache_hit_length,
                        num_hashed_tokens=len(block_hashes) * self.hash_block_size,
                    )
                blocks, new_length = manager.find_longest_cache_hit(
                    block_hashes, max_length, batch.group_ids, drop, alignment
                )
                if drop:
                    verified.add(idx)
                elif new_length < current:
                    verified.clear()
                current = new_length
                for gid, group_blocks in zip(batch.group_ids, blocks, strict=True):
                    hit_blocks[gid] = group_blocks
                    hit_lengths[gid] = new_length
                longest = max(longest, current)
            if current >= hit_length:
                break
            hit_length = current
            if simple:
                break
        head = batches[0]
        if isinstance(head.spec, FullAttentionSpec):
            num_blocks = cdiv(hit_length, self.managers[head.group_ids[0]].block_size)
            for gid in head.group_ids:
                found = hit_blocks[gid]
                if found is not None:
                    del found[num_blocks:]
                    hit_lengths[gid] = hit_length
        result = tuple(b if b is not None else [] for b in hit_blocks)
        return result, hit_length, longest - hit_length
