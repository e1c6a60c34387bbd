"""One vLLM server under the workload analyzer's concurrency model: :class:`ServerRun`.

A server is an exact KV cache manager (:class:`kvpure.cache.replay.CacheReplay`)
and the requests running on it. :meth:`ServerRun.submit` admits one request as
:mod:`kvpure.cache.workload` states the model: while fewer than
``max_num_seqs`` run and the manager admits it, the oldest running request
finishing first when admission is refused; then the request decodes its
output at once. Only the pool and the running requests are held: a finished
request keeps nothing but its counts, so a run's memory is the pool's plus
the requests in flight, whatever the workload's length.

Requests of a hash-id trace are given to the manager with derived block keys
(:func:`kvpure.cache.hash_trace.derived_block_hashes`), no tokens: see
:class:`DerivedRequest`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Final, Protocol, runtime_checkable

from kvpure.cache.hash_trace import TraceRequest, derived_block_hashes
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.shared_prefixes import PrefixTally
from kvpure.cache.trace import ReplaySettings
from kvpure.cache.workload_input import WorkloadRequest
from kvpure.errors import InvalidFieldError
from kvpure.hashing import BlockHash, HashRequest, HashScheme

__all__ = [
    "DerivedRequest",
    "ServerRun",
    "Workload",
    "WorkloadItem",
    "check_length",
    "check_trace_block_size",
    "make_request",
    "needs_tokens",
]

WorkloadItem = WorkloadRequest | TraceRequest
"""A request of any workload format."""


@runtime_checkable
class Workload(Protocol):
    """The requests of a workload, in admission order, read again by each run."""

    def __iter__(self) -> Iterator[WorkloadItem]: ...

    def __len__(self) -> int: ...


_ONE_TOKEN: Final = HashRequest(prompt_token_ids=(0,))


class DerivedRequest(CacheRequest):
    """A prompt known by its length and its block keys only (a hash-id trace's request).

    The manager reads a request's ``block_hashes`` (only compared for equality)
    and its token count; neither needs the tokens. Output tokens are never
    appended in the analyzer (decode allocates slots only), so nothing else is read.
    """

    __slots__ = ("_derived", "_length")

    def __init__(self, *, request_id: str, block_hashes: list[BlockHash], num_tokens: int) -> None:
        super().__init__(request_id=request_id, hash_request=_ONE_TOKEN, scheme=None)
        self._derived = block_hashes
        self._length = num_tokens
        self.num_prompt_tokens = num_tokens

    @property
    def num_tokens(self) -> int:
        """The prompt's tokens."""
        return self._length

    @property
    def block_hashes(self) -> Sequence[BlockHash]:
        """The derived keys of the prompt's full hash blocks."""
        return self._derived


def check_length(item: WorkloadItem, index: int, max_model_len: int) -> None:
    """Workload request ``index``'s prompt and output must fit ``max_model_len``."""
    prompt = item.num_prompt_tokens
    if prompt + max(item.output_len, 1) > max_model_len:
        raise InvalidFieldError(
            field=f"{item.source or f'request {index + 1}'}.output_len",
            value=f"{prompt} prompt + {item.output_len} output tokens",
            reason=f"must fit max_model_len ({max_model_len} tokens)",
        )


def check_trace_block_size(item: TraceRequest, hash_block_size: int) -> None:
    """vLLM's hash block size must divide the trace's block size."""
    if item.block_size % hash_block_size:
        raise InvalidFieldError(
            field="--trace-block-size",
            value=item.block_size,
            reason=f"must be a multiple of the deployment's hash block size ({hash_block_size} "
            "tokens): each hash id stands for whole vLLM blocks",
        )


def make_request(
    index: int,
    item: WorkloadItem,
    scheme: HashScheme | None,
    hash_block_size: int,
    *,
    token_path: bool = False,
) -> CacheRequest:
    """The manager's request for workload request ``index``.

    A trace request gets derived block keys, unless ``token_path`` asks for its
    synthesized tokens hashed as any prompt is (the reference the keys are tested on;
    :func:`needs_tokens` says when a deployment takes it).
    """
    if isinstance(item, TraceRequest):
        check_trace_block_size(item, hash_block_size)
        if not token_path:
            hashes = [] if scheme is None else derived_block_hashes(item, hash_block_size)
            return DerivedRequest(
                request_id=str(index), block_hashes=hashes, num_tokens=item.input_length
            )
    return CacheRequest(
        request_id=str(index),
        hash_request=HashRequest(
            prompt_token_ids=item.prompt_token_ids,
            lora_name=item.lora_name,
            cache_salt=item.cache_salt,
        ),
        scheme=scheme,
        lora_int_id=1 if item.lora_name is not None else None,
    )


def needs_tokens(config: ReplayConfig) -> bool:
    """Whether a deployment's manager may read a request's tokens, not only its block
    hashes: with EAGLE/MTP lookahead (a release may hash lookahead blocks from the
    tokens), trace requests take the token path."""
    return config.use_eagle or config.num_lookahead_tokens > 0


class ServerRun:
    """One server's manager, running requests and counts over a run (mutable, run-local)."""

    def __init__(self, config: ReplayConfig, max_num_seqs: int) -> None:
        from kvpure.cache.replay import CacheReplay

        self.config = config
        self.max_num_seqs = max_num_seqs
        self.engine = CacheReplay(
            config,
            ReplaySettings(log_stats=True, enable_kv_cache_events=False),
            record_block_ids=False,  # only counts are read here
        )
        self.running: deque[CacheRequest] = deque()
        self.requests = 0
        self.unservable = 0
        self.queries = 0
        self.hits = 0
        self.measured = 0
        """Requests admitted with a lookup (their per-request hit rate is averaged)."""
        self.rate_total = 0.0
        """The sum of the per-request hit rates (hits over queries) of those requests."""
        self.tally = PrefixTally()

    @property
    def scheme(self) -> HashScheme | None:
        """The block hash scheme (None without prefix caching)."""
        return self.engine.scheme

    def _finish_oldest(self) -> None:
        oldest = self.running.popleft()
        del self.engine.requests[oldest.request_id]
        self.engine.manager.free(oldest)

    def cached_prefix_tokens(self, request: CacheRequest) -> int:
        """Tokens of ``request`` this server's cache would serve now (nothing is changed)."""
        manager = self.engine.manager
        if not manager.enable_caching:
            return 0
        _, hit, _ = manager.coordinator.find_longest_cache_hit(
            request.block_hashes, request.num_tokens - 1
        )
        return hit

    def submit(self, index: int, item: WorkloadItem, request: CacheRequest) -> None:
        """Admit ``request`` (workload request ``index``) and decode its output."""
        engine = self.engine
        manager = engine.manager
        running = self.running
        engine.requests[request.request_id] = request
        self.requests += 1
        while True:
            if len(running) >= self.max_num_seqs:
                self._finish_oldest()
                continue
            outcome = engine.admit(request)
            stats = manager.make_prefix_cache_stats()
            if outcome.admitted:
                if stats is not None:
                    self._count(index, item, request, stats.queries, stats.hits)
                break
            if not running:
                break
            self._finish_oldest()
        if request.status is not RequestStatus.RUNNING:
            self.unservable += 1
            del engine.requests[request.request_id]
            return
        engine.run_pending(request)
        running.append(request)
        self._decode(request, item.output_len - 1)

    def _count(
        self, index: int, item: WorkloadItem, request: CacheRequest, queries: int, hits: int
    ) -> None:
        self.queries += queries
        self.hits += hits
        if queries:
            self.measured += 1
            self.rate_total += hits / queries
        size = self.config.hash_block_size
        if hits >= size:
            self.tally.add(index, hits, request.block_hashes[hits // size - 1], item)

    def _decode(self, request: CacheRequest, slots: int) -> None:
        manager = self.engine.manager
        running = self.running
        while slots > 0:
            manager.new_step_starts()
            new_blocks = manager.allocate_slots(
                request, slots, num_lookahead_tokens=self.config.num_lookahead_tokens
            )
            if new_blocks is not None:
                request.num_computed_tokens += slots
                return
            if len(running) == 1:
                return  # alone and still short: its decode is cut (no preemption)
            other = running.popleft()
            if other is request:
                running.appendleft(other)
                return
            del self.engine.requests[other.request_id]
            manager.free(other)
