"""A prefix-cache workload analyzer: how many prompt tokens a KV cache of a given size hits.

The workload is a list of requests (prompt token ids, an output length, an
optional LoRA name and cache salt; or the lines of a hash-id trace,
:mod:`kvpure.cache.hash_trace`). It is driven through kvpure's exact replay of
vLLM's KV cache manager (:class:`kvpure.cache.replay.CacheReplay`), for the
release given as ``vllm_version`` (``PlannerSettings.vllm_version``), with
this concurrency model:

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
units: prompt tokens looked up and tokens hit). The unbounded figure is the
same workload on a cache that never evicts: counted from a set of the block
hashes seen (:mod:`kvpure.cache.unbounded`) where that is exact, else
replayed on a pool so large that no cached block is ever evicted.

The workload is any re-iterable of requests (a tuple, or a file streamed
again for each run, :mod:`kvpure.cli.workload_files`); a run holds the pool and
the requests in flight only (:mod:`kvpure.cache.workload_server`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kvpure.cache.block_pool import MAX_NUM_GPU_BLOCKS
from kvpure.cache.errors import UnboundedPoolTooLargeError
from kvpure.cache.fleet import FleetResult
from kvpure.cache.gc_pace import replay_gc_pace
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.shared_prefixes import SharedPrefix
from kvpure.cache.unbounded import seen_set_applies, seen_set_count
from kvpure.cache.workload_input import WorkloadRequest, parse_request
from kvpure.cache.workload_server import (
    ServerRun,
    WorkloadItem,
    check_length,
    make_request,
    needs_tokens,
)
from kvpure.interop.planning import PlanningInput
from kvpure.models.deployment import Deployment
from kvpure.models.derive import derive_kv_cache_specs
from kvpure.models.layout import ModelLayout
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version

__all__ = [
    "CONCURRENCY_MODEL",
    "RunResult",
    "WorkloadItem",
    "WorkloadReport",
    "WorkloadRequest",
    "WorkloadTotals",
    "analyze_workload",
    "parse_request",
    "replay_config",
    "run_workload",
    "short_prefix_tokens",
    "unbounded_run",
    "workload_report",
    "workload_totals",
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
    measured_requests: int = 0
    """Requests admitted with a prefix-cache lookup."""
    request_hit_rate_total: float = 0.0
    """The sum over those requests of their own hits over queries."""

    @property
    def hit_rate(self) -> float:
        """Token-weighted: hits over queries, all requests together (0 without queries)."""
        return self.hits / self.queries if self.queries else 0.0

    @property
    def mean_request_hit_rate(self) -> float:
        """aiperf's per-request average: the mean of each request's hits over its queries."""
        measured = self.measured_requests
        return self.request_hit_rate_total / measured if measured else 0.0


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
    instances: int = 1
    """Servers of the fleet runs (1: none)."""
    fleet: tuple[FleetResult, ...] = ()
    """The workload over ``instances`` servers of this pool, one run per routing policy."""

    @property
    def hits_lost_to_eviction(self) -> int:
        """The unbounded cache's hits minus the actual hits."""
        return self.unbounded.hits - self.actual.hits


def replay_config(
    layout: ModelLayout, deployment: Deployment, vllm_version: str | None = None
) -> ReplayConfig:
    """The manager's configuration for one deployment (whole prompts in one step), for
    vLLM release ``vllm_version`` (``PlannerSettings.vllm_version``; None: the
    deployment's own ``vllm_version``).

    The replay admits one step at a time (``kvpure.cache`` refuses async traces), so a
    deployment that leaves ``async_scheduling`` unset is planned as a server started
    with ``--no-async-scheduling``, as ``kvpure cache`` does; one that sets it is refused.
    """
    if deployment.async_scheduling is None:
        deployment = replace(deployment, async_scheduling=False)
    derived = derive_kv_cache_specs(layout, deployment)
    settings = derived.settings
    batched = max(settings.max_num_batched_tokens, settings.max_model_len)
    settings = replace(
        settings,
        max_num_batched_tokens=batched,
        max_num_encoder_input_tokens=batched,
        vllm_version=normalize_vllm_version(
            deployment.vllm_version if vllm_version is None else vllm_version, field="--vllm"
        ),
    )
    return replay_config_from_plan_input(
        PlanningInput(
            settings=settings,
            kv_cache_specs=derived.kv_cache_specs,
            available_memory=derived.available_memory,
        )
    )


def run_workload(
    requests: Iterable[WorkloadItem],
    config: ReplayConfig,
    max_num_seqs: int,
    progress: Callable[[int], None] | None = None,
    *,
    token_path: bool = False,
) -> RunResult:
    """Drive ``requests`` through a fresh manager under the module's concurrency model.

    ``progress`` is called with 1 after each request is admitted or skipped.
    ``token_path`` hashes a hash-id trace's synthesized tokens instead of
    deriving its block keys (the same counts, slower: the reference).
    """
    server = ServerRun(config, max_num_seqs)
    scheme = server.scheme
    size = config.hash_block_size
    with replay_gc_pace():
        for index, item in enumerate(requests):
            check_length(item, index, config.max_model_len)
            tokens = token_path or needs_tokens(config)
            request = make_request(index, item, scheme, size, token_path=tokens)
            if progress is not None:
                progress(1)
            server.submit(index, item, request)
    return result_of(server)


def result_of(server: ServerRun) -> RunResult:
    """A finished server run's result."""
    config = server.config
    return RunResult(
        num_blocks=config.kv_cache_config.num_blocks,
        block_size=config.block_size,
        hash_block_size=config.hash_block_size,
        enable_caching=config.enable_caching,
        num_requests=server.requests,
        num_unservable=server.unservable,
        queries=server.queries,
        hits=server.hits,
        top_prefixes=server.tally.top(),
        measured_requests=server.measured,
        request_hit_rate_total=server.rate_total,
    )


def short_prefix_tokens(requests: Iterable[WorkloadItem], block_size: int) -> tuple[int, int]:
    """(requests, tokens) of prompts whose longest shared prefix with an earlier prompt
    (same LoRA and salt) is shorter than one block: those tokens can never hit."""
    seen: set[tuple[str | None, str | None, tuple[int, ...]]] = set()
    count = tokens = 0
    for request in requests:
        ids = request.head_token_ids(block_size)
        key = (request.lora_name, request.cache_salt)
        shared = 0
        for k in range(1, len(ids) + 1):
            if (*key, ids[:k]) in seen:
                shared = k
            else:
                break
        if 0 < shared < block_size:
            count += 1
            tokens += shared
        for k in range(1, len(ids) + 1):
            seen.add((*key, ids[:k]))
    return count, tokens


def _unbounded_blocks(requests: Iterable[WorkloadItem], config: ReplayConfig) -> int:
    """A block count no run of ``requests`` can exhaust (so nothing cached is evicted)."""
    size = config.block_size
    extra = config.num_lookahead_tokens
    per_group = sum(-(-(r.num_prompt_tokens + r.output_len + extra) // size) + 1 for r in requests)
    one_request = -(-config.max_model_len // size) + 1  # vLLM checks one full request fits
    return max(per_group, one_request) * len(config.kv_cache_config.kv_cache_groups) + 2


def unbounded_run(
    requests: Iterable[WorkloadItem],
    layout: ModelLayout,
    deployment: Deployment,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    progress: Callable[[int], None] | None = None,
    *,
    vllm_version: str = DEFAULT_VLLM_VERSION,
    replayed: bool = False,
    token_path: bool = False,
) -> RunResult:
    """The workload on a cache so large that nothing cached is ever evicted.

    The pool follows ``deployment``'s model length and block sizes, not its
    memory. Counted from the seen block hashes where that is exact, unless
    ``replayed`` asks for the replay on the unbounded pool (the reference).
    """
    config = replay_config(layout, deployment, vllm_version)
    blocks = _unbounded_blocks(requests, config)
    big = replace(
        deployment,
        # the seen-hash count builds no pool: past the replay's cap only its shape is planned
        num_gpu_blocks_override=min(blocks, MAX_NUM_GPU_BLOCKS),
        max_model_len=config.max_model_len,
        auto_fit_max_model_len=False,
    )
    big_config = replay_config(layout, big, vllm_version)
    if replayed or not seen_set_applies(big_config):
        if blocks > MAX_NUM_GPU_BLOCKS:
            raise UnboundedPoolTooLargeError(
                num_requests=sum(1 for _ in requests),
                prompt_tokens=sum(r.num_prompt_tokens for r in requests),
                num_blocks=blocks,
                limit=MAX_NUM_GPU_BLOCKS,
            )
        return run_workload(requests, big_config, max_num_seqs, progress, token_path=token_path)
    count = seen_set_count(requests, big_config, progress, scheme_config=config)
    return RunResult(
        num_blocks=blocks if blocks > MAX_NUM_GPU_BLOCKS else big_config.kv_cache_config.num_blocks,
        block_size=big_config.block_size,
        hash_block_size=big_config.hash_block_size,
        enable_caching=big_config.enable_caching,
        num_requests=count.requests,
        num_unservable=0,
        queries=count.queries,
        hits=count.hits,
        measured_requests=count.measured,
        request_hit_rate_total=count.rate_total,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadTotals:
    """What a report counts over the whole workload, whatever the pool."""

    prompt_tokens: int
    short_prefix_requests: int
    short_prefix_tokens: int


def workload_totals(
    requests: Iterable[WorkloadItem], hash_block_size: int, enable_caching: bool
) -> WorkloadTotals:
    """The prompt tokens and the shorter-than-a-block shared prefixes of ``requests``."""
    count, tokens = short_prefix_tokens(requests, hash_block_size) if enable_caching else (0, 0)
    return WorkloadTotals(
        prompt_tokens=sum(r.num_prompt_tokens for r in requests),
        short_prefix_requests=count,
        short_prefix_tokens=tokens,
    )


def workload_report(
    requests: Iterable[WorkloadItem],
    actual: RunResult,
    unbounded: RunResult,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    *,
    totals: WorkloadTotals | None = None,
) -> WorkloadReport:
    """The report of ``requests`` from their actual and unbounded runs (``totals``: the
    workload's :func:`workload_totals`, when already counted)."""
    if totals is None:
        totals = workload_totals(requests, actual.hash_block_size, actual.enable_caching)
    return WorkloadReport(
        num_requests=actual.num_requests,
        prompt_tokens=totals.prompt_tokens,
        max_num_seqs=max_num_seqs,
        actual=actual,
        unbounded=unbounded,
        short_prefix_requests=totals.short_prefix_requests,
        short_prefix_tokens=totals.short_prefix_tokens,
    )


def analyze_workload(
    requests: Iterable[WorkloadItem],
    layout: ModelLayout,
    deployment: Deployment,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    *,
    unbounded: RunResult | None = None,
    progress: Callable[[int], None] | None = None,
    vllm_version: str = DEFAULT_VLLM_VERSION,
) -> WorkloadReport:
    """The workload at ``deployment``'s pool, against an unbounded pool.

    ``requests`` is read once per run (a tuple, or a re-iterable stream).
    ``unbounded`` reuses an earlier unbounded run of the same workload and model
    (a memory sweep: the unbounded pool does not depend on the memory).
    """
    config = replay_config(layout, deployment, vllm_version)
    actual = run_workload(requests, config, max_num_seqs, progress)
    if unbounded is None:
        unbounded = unbounded_run(
            requests, layout, deployment, max_num_seqs, progress, vllm_version=vllm_version
        )
    return workload_report(requests, actual, unbounded, max_num_seqs)
