"""vLLM's ``KVCacheManager``: the request-level steps the scheduler calls.

The release's :class:`~kvpure.cache.rules.CacheRules` (given at construction)
decide what changed between releases. ``get_computed_blocks`` finds a new
request's prefix-cache hit (0.26 also counts the lookup in the stats; 0.33+
counts it in ``record_prefix_cache_stats`` once the admission succeeded),
``allocate_slots`` gives a request the slots for its next tokens (or refuses,
returning None, leaving nothing changed but blocks outside a window freed),
``free`` releases a finished request, and ``take_events`` /
``make_prefix_cache_stats`` hand out what happened since the last call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvpure.cache.coordinator import KVCacheCoordinator
from kvpure.cache.errors import CacheStateError
from kvpure.cache.events import BlockStored, KVCacheEvent
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.rules import CacheRules
from kvpure.cache.single_type import HitBlocks
from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.free_queue import KVCacheBlock
from kvpure.specs import get_kv_cache_spec_kind, get_kv_cache_spec_sliding_window
from kvpure.specs.kv_cache_config import KVCacheConfig

__all__ = ["KVCacheManager", "PrefixCacheStats"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixCacheStats:
    """vLLM's prefix-cache counters since they were last taken."""

    reset: bool = False
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, *, num_tokens: int, num_hits: int, preempted: bool) -> PrefixCacheStats:
        """The counters after one lookup of ``num_tokens`` tokens that hit ``num_hits``."""
        if preempted:
            return replace(
                self,
                preempted_requests=self.preempted_requests + 1,
                preempted_queries=self.preempted_queries + num_tokens,
                preempted_hits=self.preempted_hits + num_hits,
            )
        return replace(
            self,
            requests=self.requests + 1,
            queries=self.queries + num_tokens,
            hits=self.hits + num_hits,
        )


def _check_manager_arguments(
    kv_cache_config: object, max_model_len: object, scheduler_block_size: object, lookahead: object
) -> None:
    """:class:`KVCacheManager`'s own arguments (the coordinator checks the rest)."""
    if not isinstance(kv_cache_config, KVCacheConfig):
        raise FieldTypeError(
            field="kv_cache_config", value=kv_cache_config, reason="must be a KVCacheConfig"
        )
    check_int("max_model_len", max_model_len, minimum=1, maximum=2**40)
    check_int("scheduler_block_size", scheduler_block_size, minimum=1, maximum=2**32)
    check_int("num_hash_lookahead_tokens", lookahead, minimum=0, maximum=2**16)


class KVCacheManager:
    """The scheduler's view of the KV cache, over one coordinator and its pool."""

    def __init__(
        self,
        *,
        kv_cache_config: KVCacheConfig,
        max_model_len: int,
        scheduler_block_size: int,
        hash_block_size: int,
        max_in_flight_tokens: int | None = None,
        enable_caching: bool = True,
        use_eagle: bool = False,
        log_stats: bool = False,
        enable_kv_cache_events: bool = False,
        watermark: float = 0.0,
        use_int_block_hashes: bool = True,
        rules: CacheRules,
        num_hash_lookahead_tokens: int = 0,
    ) -> None:
        _check_manager_arguments(
            kv_cache_config, max_model_len, scheduler_block_size, num_hash_lookahead_tokens
        )
        if isinstance(watermark, bool) or not isinstance(watermark, int | float):
            raise FieldTypeError(field="watermark", value=watermark, reason="must be a number")
        if not 0 <= watermark <= 1:  # NaN fails this too
            raise CacheStateError(
                operation="KVCacheManager",
                reason=f"watermark must be from 0 to 1 (got {watermark})",
            )
        if not isinstance(rules, CacheRules):
            raise InvalidFieldError(
                field="rules",
                value=rules,
                reason="must be a CacheRules record (kvpure.cache.get_cache_rules(version))",
            )
        self.rules = rules
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.enable_kv_cache_events = enable_kv_cache_events
        self.log_stats = log_stats
        self.prefix_cache_stats: PrefixCacheStats | None = PrefixCacheStats() if log_stats else None
        self.coordinator = KVCacheCoordinator(
            kv_cache_config=kv_cache_config,
            max_model_len=max_model_len,
            max_in_flight_tokens=max_model_len
            if max_in_flight_tokens is None
            else max_in_flight_tokens,
            use_eagle=use_eagle,
            enable_caching=enable_caching,
            enable_kv_cache_events=enable_kv_cache_events,
            scheduler_block_size=scheduler_block_size,
            hash_block_size=hash_block_size,
            use_int_block_hashes=use_int_block_hashes,
            rules=rules,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens,
        )
        self.block_pool = self.coordinator.block_pool
        self.kv_cache_config = kv_cache_config
        self.watermark_blocks = int(watermark * kv_cache_config.num_blocks)
        self._no_hit_blocks: tuple[tuple[KVCacheBlock, ...], ...] = tuple(
            () for _ in self.coordinator.managers
        )
        self.event_metadata = tuple(
            (
                get_kv_cache_spec_kind(g.kv_cache_spec).value,
                get_kv_cache_spec_sliding_window(g.kv_cache_spec),
            )
            for g in kv_cache_config.kv_cache_groups
        )

    @property
    def usage(self) -> float:
        """The pool's usage (null block excluded)."""
        return self.block_pool.get_usage()

    def make_prefix_cache_stats(self) -> PrefixCacheStats | None:
        """The counters so far (None without ``log_stats``); they start again from zero."""
        if not self.log_stats:
            return None
        stats = self.prefix_cache_stats
        self.prefix_cache_stats = PrefixCacheStats()
        return stats

    def get_computed_blocks(self, request: CacheRequest) -> tuple[HitBlocks, int, int]:
        """The request's hit blocks per group, the hit length, and the shared-prefix boundary.

        At most ``num_tokens - 1`` tokens can hit (the last one is recomputed
        for its logits). Under 0.26's rules the lookup is counted in the stats here
        (``vllm/v1/core/kv_cache_manager.py`` 0.26 ``get_computed_blocks``); under
        0.33+'s the caller counts it after a successful admission
        (:meth:`record_prefix_cache_stats`).
        """
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return tuple([] for _ in self.coordinator.managers), 0, 0
        blocks, num_hit, num_uncached = self.coordinator.find_longest_cache_hit(
            request.block_hashes, request.num_tokens - 1
        )
        if num_hit > 0 and self.enable_kv_cache_events and request.kv_cache_report_mode == "full":
            for group_idx, group_blocks in enumerate(blocks):
                if group_blocks:
                    self.block_pool.emit_cached_block_events(
                        request,
                        len(group_blocks),
                        self.kv_cache_config.kv_cache_groups[group_idx].kv_cache_spec.block_size,
                        group_idx,
                    )
        boundary = num_hit + num_uncached if num_uncached else 0
        if not self.rules.stats_at_admission:
            self._record(request, num_hit)
        return blocks, num_hit, boundary

    def _record(self, request: CacheRequest, num_hits: int) -> None:
        if self.prefix_cache_stats is not None:
            self.prefix_cache_stats = self.prefix_cache_stats.record(
                num_tokens=request.num_tokens,
                num_hits=num_hits,
                preempted=request.num_preemptions > 0,
            )

    def record_prefix_cache_stats(self, request: CacheRequest, num_hits: int) -> None:
        """Count an admitted request's lookup (0.33+: ``KVCacheManager.
        record_prefix_cache_stats``, called by ``Scheduler.schedule`` after
        ``allocate_slots`` admitted it). Nothing under 0.26's rules, which counted the
        lookup in :meth:`get_computed_blocks`; nothing for a request that skipped the
        lookup (caching off or ``skip_reading_prefix_cache``)."""
        if not self.rules.stats_at_admission:
            return
        if not self.enable_caching or request.skip_reading_prefix_cache:
            return
        self._record(request, num_hits)

    def allocate_slots(
        self,
        request: CacheRequest,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]] | None = None,
        num_lookahead_tokens: int = 0,
        *,
        full_sequence_must_fit: bool = False,
        reserved_blocks: int = 0,
        has_scheduled_reqs: bool = True,
    ) -> tuple[list[KVCacheBlock], ...] | None:
        """Slots for ``num_new_tokens`` more tokens (plus lookahead); None if the pool is short.

        The new blocks per group are returned; the request's hit blocks are
        taken and its newly full blocks cached. Blocks outside an attention
        window are freed first, even when the allocation is then refused.
        """
        if num_new_tokens == 0:
            raise CacheStateError(
                operation="allocate_slots",
                reason="num_new_tokens must be greater than 0 when there are no "
                "external computed tokens",
            )
        coordinator = self.coordinator
        hit_blocks: Sequence[Sequence[KVCacheBlock]]
        if new_computed_blocks is None:
            empty, hit_blocks = True, self._no_hit_blocks
        else:
            empty, hit_blocks = not any(new_computed_blocks), new_computed_blocks
        num_local = request.num_computed_tokens + num_new_computed_tokens
        total_computed = min(num_local, self.max_model_len)
        watermark = 0
        if has_scheduled_reqs and request.status is RequestStatus.WAITING:
            watermark = self.watermark_blocks
        pool = self.block_pool
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            needed = coordinator.get_num_blocks_to_allocate(
                request.request_id, full, hit_blocks, total_computed, num_local, full, True
            )
            if needed + watermark > pool.get_num_free_blocks():
                return None
        num_main = total_computed + num_new_tokens
        num_need_slot = min(num_main + num_lookahead_tokens, self.max_model_len)
        coordinator.remove_skipped_blocks(
            request.request_id, total_computed, request.num_prompt_tokens
        )
        needed = coordinator.get_num_blocks_to_allocate(
            request.request_id, num_need_slot, hit_blocks, num_local, num_local, num_main
        )
        if needed + watermark > pool.get_num_free_blocks() - reserved_blocks:
            return None
        if not empty:
            coordinator.allocate_new_computed_blocks(request.request_id, hit_blocks, num_local)
        new_blocks = coordinator.allocate_new_blocks(request.request_id, num_need_slot, num_main)
        if self.enable_caching:
            coordinator.cache_blocks(
                request, min(total_computed + num_new_tokens, request.num_tokens)
            )
        return new_blocks

    def free(self, request: CacheRequest) -> None:
        """Release the request's blocks (tail first)."""
        self.coordinator.free(request.request_id)

    def reset_prefix_cache(self) -> bool:
        """Forget all cached hashes; False (nothing done) while blocks are held."""
        if not self.block_pool.reset_prefix_cache():
            return False
        if self.prefix_cache_stats is not None:
            self.prefix_cache_stats = replace(self.prefix_cache_stats, reset=True)
        return True

    def take_events(self) -> list[KVCacheEvent]:
        """The pool's events, BlockStored annotated with its group's spec kind and window."""
        events = self.block_pool.take_events()
        metadata = self.event_metadata
        out: list[KVCacheEvent] = []
        for event in events:
            if (
                isinstance(event, BlockStored)
                and event.group_idx is not None
                and 0 <= event.group_idx < len(metadata)
            ):
                kind, window = metadata[event.group_idx]
                event = event.with_spec_metadata(kind, window)
            out.append(event)
        return out

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block ids per group."""
        return tuple(
            [b.block_id for b in blocks] for blocks in self.coordinator.get_blocks(request_id)
        )

    def new_step_starts(self) -> None:
        """A scheduling step begins."""
        self.coordinator.new_step_starts()
