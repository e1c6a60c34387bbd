"""A prefix-cache workload analyzer: how many prompt tokens a KV cache of a given size hits.

The workload is a list of requests (prompt token ids, an output length, an
optional LoRA name and cache salt). It is driven through kvpure's exact
replay of vLLM 0.26's KV cache manager (:class:`kvpure.cache.replay.CacheReplay`)
with this concurrency model:

- requests are admitted in file order while fewer than ``max_num_seqs`` run
  and the manager admits them (hit lookup, then ``allocate_slots`` for the
  whole prompt: no chunked prefill);
- an admitted request decodes its ``output_len`` tokens at once (one
  ``allocate_slots`` for ``output_len - 1`` slots; output blocks are never
  hashed, as their tokens are unknown) and keeps its blocks until it finishes;
- when admission is refused (or ``max_num_seqs`` run), the oldest running
  request finishes (its blocks are freed, still cached) and admission is
  retried; no preemption. A request refused with nothing running is counted
  as unservable and skipped.

Hits are counted from the manager's prefix-cache stats of the lookup that
admitted each request (vLLM's ``prefix_cache_queries`` / ``prefix_cache_hits``
units: prompt tokens looked up and tokens hit). The unbounded figure re-runs
the same workload with a pool so large that no cached block is ever evicted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.shared_prefixes import PrefixTally, SharedPrefix
from kvpure.cache.trace import ReplaySettings
from kvpure.cache.workload_input import WorkloadRequest, parse_request
from kvpure.errors import InvalidFieldError
from kvpure.hashing import HashRequest
from kvpure.interop.planning import PlanningInput
from kvpure.models.deployment import Deployment
from kvpure.models.derive import derive_kv_cache_specs
from kvpure.models.layout import ModelLayout

__all__ = [
    "CONCURRENCY_MODEL",
    "RunResult",
    "WorkloadReport",
    "WorkloadRequest",
    "analyze_workload",
    "parse_request",
    "replay_config",
    "run_workload",
    "short_prefix_tokens",
    "unbounded_run",
    "workload_report",
]

CONCURRENCY_MODEL = (
    "requests admitted in arrival order (file order without arrival_time) while fewer "
    "than max_num_seqs run and the manager "
    "admits them; each decodes its output_len tokens at once and holds its blocks; when "
    "admission is refused the oldest running request finishes first and admission is "
    "retried; no preemption, no chunked prefill"
)

DEFAULT_MAX_NUM_SEQS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """One run of the workload through one pool."""

    num_blocks: int
    """Blocks in the pool (block 0, the null block, included)."""
    block_size: int
    """``cache_config.block_size`` (the smallest group block size)."""
    hash_block_size: int
    """Tokens per hashed block: the unit a hit is counted in."""
    enable_caching: bool
    num_requests: int
    num_unservable: int
    queries: int
    hits: int
    top_prefixes: tuple[SharedPrefix, ...] = ()
    """The most-hit prompt prefixes (:mod:`kvpure.cache.shared_prefixes`)."""

    @property
    def hit_rate(self) -> float:
        """Hits over queries (0 without queries)."""
        return self.hits / self.queries if self.queries else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadReport:
    """The analysis of one workload at one memory figure."""

    num_requests: int
    prompt_tokens: int
    max_num_seqs: int
    actual: RunResult
    unbounded: RunResult
    short_prefix_requests: int
    short_prefix_tokens: int
    """Tokens of prompts sharing a prefix shorter than a block with an earlier prompt."""

    @property
    def hits_lost_to_eviction(self) -> int:
        """The unbounded cache's hits minus the actual hits."""
        return self.unbounded.hits - self.actual.hits


def _field(where: str, value: object, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=where, value=value, reason=reason)


def replay_config(layout: ModelLayout, deployment: Deployment) -> ReplayConfig:
    """The manager's configuration for one deployment (whole prompts in one step)."""
    derived = derive_kv_cache_specs(layout, deployment)
    settings = derived.settings
    batched = max(settings.max_num_batched_tokens, settings.max_model_len)
    settings = replace(
        settings, max_num_batched_tokens=batched, max_num_encoder_input_tokens=batched
    )
    return replay_config_from_plan_input(
        PlanningInput(
            settings=settings,
            kv_cache_specs=derived.kv_cache_specs,
            available_memory=derived.available_memory,
        )
    )


def _check_lengths(requests: Sequence[WorkloadRequest], max_model_len: int) -> None:
    for i, request in enumerate(requests):
        total = len(request.prompt_token_ids) + max(request.output_len, 1)
        if total > max_model_len:
            raise _field(
                f"{request.source or f'request {i + 1}'}.output_len",
                f"{len(request.prompt_token_ids)} prompt + {request.output_len} output tokens",
                f"must fit max_model_len ({max_model_len} tokens)",
            )


def run_workload(
    requests: Sequence[WorkloadRequest],
    config: ReplayConfig,
    max_num_seqs: int,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Drive ``requests`` through a fresh manager under the module's concurrency model.

    ``progress`` is called with 1 after each request is admitted or skipped.
    """
    from kvpure.cache.replay import CacheReplay

    _check_lengths(requests, config.max_model_len)
    engine = CacheReplay(config, ReplaySettings(log_stats=True, enable_kv_cache_events=False))
    manager = engine.manager
    running: deque[CacheRequest] = deque()
    queries = hits = unservable = 0
    tally = PrefixTally()
    hash_block_size = config.hash_block_size

    def finish_oldest() -> None:
        oldest = running.popleft()
        del engine.requests[oldest.request_id]
        manager.free(oldest)

    for index, item in enumerate(requests):
        request = CacheRequest(
            request_id=str(index),
            hash_request=HashRequest(
                prompt_token_ids=item.prompt_token_ids,
                lora_name=item.lora_name,
                cache_salt=item.cache_salt,
            ),
            scheme=engine.scheme,
            lora_int_id=1 if item.lora_name is not None else None,
        )
        engine.requests[request.request_id] = request
        if progress is not None:
            progress(1)
        while True:
            if len(running) >= max_num_seqs:
                finish_oldest()
                continue
            outcome = engine.admit(request)
            stats = manager.make_prefix_cache_stats()
            if outcome.admitted:
                if stats is not None:
                    queries += stats.queries
                    hits += stats.hits
                    if stats.hits >= hash_block_size:
                        last = request.block_hashes[stats.hits // hash_block_size - 1]
                        tally.add(index, stats.hits, last)
                break
            if not running:
                break
            finish_oldest()
        if request.status is not RequestStatus.RUNNING:
            unservable += 1
            del engine.requests[request.request_id]
            continue
        engine.run_pending(request)
        running.append(request)
        slots = item.output_len - 1
        while slots > 0:
            manager.new_step_starts()
            new_blocks = manager.allocate_slots(
                request, slots, num_lookahead_tokens=config.num_lookahead_tokens
            )
            if new_blocks is not None:
                request.num_computed_tokens += slots
                break
            if len(running) == 1:
                break  # alone and still short: its decode is cut (no preemption)
            other = running.popleft()
            if other is request:
                running.appendleft(other)
                break
            del engine.requests[other.request_id]
            manager.free(other)
    return RunResult(
        num_blocks=config.kv_cache_config.num_blocks,
        block_size=config.block_size,
        hash_block_size=config.hash_block_size,
        enable_caching=config.enable_caching,
        num_requests=len(requests),
        num_unservable=unservable,
        queries=queries,
        hits=hits,
        top_prefixes=tally.top(requests),
    )


def short_prefix_tokens(requests: Sequence[WorkloadRequest], block_size: int) -> tuple[int, int]:
    """(requests, tokens) of prompts whose longest shared prefix with an earlier prompt
    (same LoRA and salt) is shorter than one block: those tokens can never hit."""
    seen: set[tuple[str | None, str | None, tuple[int, ...]]] = set()
    count = tokens = 0
    for request in requests:
        ids = request.prompt_token_ids
        key = (request.lora_name, request.cache_salt)
        shared = 0
        for k in range(1, min(len(ids), block_size) + 1):
            if (*key, ids[:k]) in seen:
                shared = k
            else:
                break
        if 0 < shared < block_size:
            count += 1
            tokens += shared
        for k in range(1, min(len(ids), block_size) + 1):
            seen.add((*key, ids[:k]))
    return count, tokens


def _unbounded_blocks(requests: Sequence[WorkloadRequest], config: ReplayConfig) -> int:
    """A block count no run of ``requests`` can exhaust (so nothing cached is evicted)."""
    size = config.block_size
    extra = config.num_lookahead_tokens
    per_group = sum(
        -(-(len(r.prompt_token_ids) + r.output_len + extra) // size) + 1 for r in requests
    )
    one_request = -(-config.max_model_len // size) + 1  # vLLM checks one full request fits
    return max(per_group, one_request) * len(config.kv_cache_config.kv_cache_groups) + 2


def unbounded_run(
    requests: Sequence[WorkloadRequest],
    layout: ModelLayout,
    deployment: Deployment,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """The workload through a pool so large that nothing cached is ever evicted.

    The pool follows ``deployment``'s model length and block sizes, not its memory.
    """
    config = replay_config(layout, deployment)
    big = replace(
        deployment,
        num_gpu_blocks_override=_unbounded_blocks(requests, config),
        max_model_len=config.max_model_len,
        auto_fit_max_model_len=False,
    )
    return run_workload(requests, replay_config(layout, big), max_num_seqs, progress)


def workload_report(
    requests: Sequence[WorkloadRequest],
    actual: RunResult,
    unbounded: RunResult,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
) -> WorkloadReport:
    """The report of ``requests`` from their actual and unbounded runs."""
    count, tokens = (
        short_prefix_tokens(requests, actual.hash_block_size) if actual.enable_caching else (0, 0)
    )
    return WorkloadReport(
        num_requests=len(requests),
        prompt_tokens=sum(len(r.prompt_token_ids) for r in requests),
        max_num_seqs=max_num_seqs,
        actual=actual,
        unbounded=unbounded,
        short_prefix_requests=count,
        short_prefix_tokens=tokens,
    )


def analyze_workload(
    requests: Sequence[WorkloadRequest],
    layout: ModelLayout,
    deployment: Deployment,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    *,
    unbounded: RunResult | None = None,
    progress: Callable[[int], None] | None = None,
) -> WorkloadReport:
    """The workload at ``deployment``'s pool, against an unbounded pool.

    ``unbounded`` reuses an earlier unbounded run of the same workload and model
    (a memory sweep: the unbounded pool does not depend on the memory).
    """
    config = replay_config(layout, deployment)
    actual = run_workload(requests, config, max_num_seqs, progress)
    if unbounded is None:
        unbounded = unbounded_run(requests, layout, deployment, max_num_seqs, progress)
    return workload_report(requests, actual, unbounded, max_num_seqs)
