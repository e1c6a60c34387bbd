"""One request's scheduling steps, as the release's ``Scheduler.schedule()`` takes them.

:class:`SchedulerSteps` is a base of :class:`kvpure.cache.replay.CacheReplay`
(its methods are found on the class as before: no call goes through another
layer). ``admit`` is the WAITING branch (hit lookup, Mamba "align" split,
``allocate_slots`` with the full-sequence gate and the watermark; from 0.33 on
the lookup is counted in the stats only once admitted); ``run_step`` the
RUNNING branch. Every step starts with ``new_step_starts()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kvpure.cache.mamba_split import mamba_aligned_split
from kvpure.cache.manager import KVCacheManager
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.trace import AdmissionOutcome, StepRecord, allocated_step
from kvpure.free_queue import KVCacheBlock

__all__ = ["SchedulerSteps"]


class SchedulerSteps:
    """The scheduler's branches for one request (``CacheReplay`` sets these attributes)."""

    config: ReplayConfig
    manager: KVCacheManager
    requests: dict[str, CacheRequest]
    reserve_full_isl: bool
    _ids: Callable[[Sequence[Sequence[KVCacheBlock]]], tuple[tuple[int, ...], ...]]

    def _any_running(self) -> bool:
        return any(r.status is RequestStatus.RUNNING for r in self.requests.values())

    def admit(self, request: CacheRequest) -> AdmissionOutcome:
        """The WAITING branch: hit lookup, then ``allocate_slots`` for the rest of the prompt."""
        manager = self.manager
        manager.new_step_starts()
        blocks, num_hit, boundary = manager.get_computed_blocks(request)
        request.shared_prefix_boundary = boundary
        num_new = min(request.num_tokens - num_hit, self.config.max_num_batched_tokens)
        if self.config.need_mamba_block_aligned_split:
            num_new = mamba_aligned_split(self.config, request, num_new, num_hit)

        def outcome(steps: tuple[StepRecord, ...], admitted: bool) -> AdmissionOutcome:
            return AdmissionOutcome(
                num_cached_tokens=num_hit,
                shared_prefix_boundary=boundary,
                cached_block_ids=self._ids(blocks),
                steps=steps,
                admitted=admitted,
            )

        if num_new <= 0:
            return outcome(
                (StepRecord(num_new_tokens=0, allocated=None, new_block_ids=None),), False
            )
        new_blocks = manager.allocate_slots(
            request,
            num_new,
            num_hit,
            blocks,
            self.config.num_lookahead_tokens,
            full_sequence_must_fit=self.reserve_full_isl,
            has_scheduled_reqs=self._any_running(),
        )
        if new_blocks is None:
            return outcome(
                (StepRecord(num_new_tokens=num_new, allocated=False, new_block_ids=None),), False
            )
        manager.record_prefix_cache_stats(request, num_hit)
        request.status = RequestStatus.RUNNING
        request.num_computed_tokens = num_hit + num_new
        steps = [
            StepRecord(num_new_tokens=num_new, allocated=True, new_block_ids=self._ids(new_blocks))
        ]
        if self.config.need_mamba_block_aligned_split:
            steps.extend(self.run_pending(request))
        return outcome(tuple(steps), True)

    def run_step(self, request: CacheRequest) -> StepRecord:
        """The RUNNING branch: schedule the request's uncomputed tokens."""
        manager = self.manager
        manager.new_step_starts()
        computed = request.num_computed_tokens
        num_new = min(
            request.num_tokens - computed,
            self.config.max_num_batched_tokens,
            self.config.max_model_len - 1 - computed,
        )
        if self.config.need_mamba_block_aligned_split:
            num_new = mamba_aligned_split(self.config, request, num_new, 0)
        if num_new <= 0:
            return StepRecord(num_new_tokens=0, allocated=None, new_block_ids=None)
        new_blocks = manager.allocate_slots(
            request, num_new, num_lookahead_tokens=self.config.num_lookahead_tokens
        )
        if new_blocks is None:
            return StepRecord(num_new_tokens=num_new, allocated=False, new_block_ids=None)
        request.num_computed_tokens = computed + num_new
        return allocated_step(num_new, self._ids(new_blocks))

    def run_pending(self, request: CacheRequest) -> list[StepRecord]:
        """Steps until the request has no uncomputed tokens or a step schedules nothing."""
        steps: list[StepRecord] = []
        while request.num_computed_tokens < request.num_tokens:
            step = self.run_step(request)
            steps.append(step)
            if step.allocated is not True:
                break
        return steps
