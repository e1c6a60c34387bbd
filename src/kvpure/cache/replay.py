"""Replay a trace through the KV cache manager exactly as the release's scheduler drives it.

Each op is one or more scheduling steps; every step starts with
``new_step_starts()``. Admission is the WAITING branch of
``Scheduler.schedule()`` (hit lookup, Mamba "align" split, ``allocate_slots``
with the full-sequence gate and the watermark; from 0.33 on the lookup is
counted in the stats only once admitted); a running request's step is the
RUNNING branch. A refused step changes nothing but the blocks freed outside a
window; the request keeps its tokens pending. After every op the record takes
the manager's events and prefix-cache stats, and the pool's free queue (its
first ``free_queue_limit`` ids: :data:`FREE_QUEUE_RECORD_LIMIT` by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvpure.cache.errors import TraceFieldError, UnknownRequestError
from kvpure.cache.manager import KVCacheManager
from kvpure.cache.request import CacheRequest, RequestStatus
from kvpure.cache.scheduler_steps import SchedulerSteps
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.trace import (
    ArriveOp,
    CacheTrace,
    DecodeOp,
    DecodeOutcome,
    FinishOp,
    FinishOutcome,
    Op,
    OpRecord,
    Outcome,
    PoolSnapshot,
    ReplaySettings,
    RequestSnapshot,
    ResetOutcome,
    RetryOp,
    StepsOutcome,
)
from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import BlockHash, HashRequest, HashScheme

__all__ = ["FREE_QUEUE_RECORD_LIMIT", "CacheReplay", "ReplayResult", "replay"]

INT32_MAX = 2**31 - 1

FREE_QUEUE_RECORD_LIMIT = 4096
MAX_FREE_QUEUE_LIMIT = 2**62  # a block id bound: no pool has more blocks to record
"""The most free-queue ids a record (and the final state) copies: a longer queue is
recorded by its head (the next blocks to evict), the rest counted, so a record's size
does not grow with the pool."""


def _ids(blocks: Sequence[Sequence[KVCacheBlock]]) -> tuple[tuple[int, ...], ...]:
    return tuple([tuple([b.block_id for b in group]) for group in blocks])


def _no_ids(blocks: Sequence[Sequence[KVCacheBlock]]) -> tuple[tuple[int, ...], ...]:
    return ()  # a caller that reads only counts (the workload replay) skips the copies


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """The configuration the manager was built from, one record per op, the final state."""

    config: ReplayConfig
    coordinator: str
    manager_names: tuple[str, ...]
    none_hash: BlockHash | None
    records: tuple[OpRecord, ...]
    final_requests: tuple[tuple[str, RequestSnapshot], ...]
    final_pool: PoolSnapshot


class CacheReplay(SchedulerSteps):
    """A KV cache manager and the live requests of a trace, advanced op by op.

    The scheduler's steps (``admit``, ``run_step``, ``run_pending``) are
    :class:`kvpure.cache.scheduler_steps.SchedulerSteps`'s.
    """

    def __init__(
        self,
        config: ReplayConfig,
        settings: ReplaySettings,
        *,
        free_queue_limit: int = FREE_QUEUE_RECORD_LIMIT,
        record_block_ids: bool = True,
    ) -> None:
        """``record_block_ids`` False: step and admission records carry ``()`` for block ids."""
        if (
            isinstance(free_queue_limit, bool)
            or not isinstance(free_queue_limit, int)
            or not 0 <= free_queue_limit <= MAX_FREE_QUEUE_LIMIT
        ):
            raise InvalidFieldError(
                field="free_queue_limit",
                value=free_queue_limit,
                reason="must be a non-negative integer (free-queue ids copied per record)",
            )
        self.config = config
        self.rules = config.rules
        self.free_queue_limit = free_queue_limit
        self._ids = _ids if record_block_ids else _no_ids
        self.scheme: HashScheme | None = (
            _hash_scheme(config, settings.pythonhashseed) if config.enable_caching else None
        )
        self.reserve_full_isl = settings.reserve_full_isl
        self.manager = KVCacheManager(
            kv_cache_config=config.kv_cache_config,
            max_model_len=config.max_model_len,
            scheduler_block_size=config.scheduler_block_size,
            hash_block_size=config.hash_block_size,
            max_in_flight_tokens=config.max_in_flight_tokens,
            enable_caching=config.enable_caching,
            use_eagle=config.use_eagle,
            log_stats=settings.log_stats,
            enable_kv_cache_events=settings.enable_kv_cache_events,
            watermark=settings.watermark,
            use_int_block_hashes=settings.use_int_block_hashes,
            rules=config.rules,
            num_hash_lookahead_tokens=config.num_hash_lookahead_tokens,
        )
        self.requests: dict[str, CacheRequest] = {}
        self.seen: set[str] = set()

    # -- snapshots ----------------------------------------------------------------------------

    def request_snapshot(self, request: CacheRequest) -> RequestSnapshot:
        """A live request's state."""
        return RequestSnapshot(
            status=request.status.value,
            num_tokens=request.num_tokens,
            num_computed_tokens=request.num_computed_tokens,
            num_block_hashes=len(request.block_hashes),
            block_ids=tuple(tuple(ids) for ids in self.manager.get_block_ids(request.request_id)),
        )

    def pool_snapshot(self) -> PoolSnapshot:
        """The pool's state."""
        pool = self.manager.block_pool
        return PoolSnapshot(
            free_queue=pool.free_block_ids_head(self.free_queue_limit),
            num_free_blocks=pool.get_num_free_blocks(),
            num_cached_hashes=pool.num_cached_hashes,
            usage=pool.get_usage(),
        )

    # -- ops ------------------------------------------------------------------------------------

    def _live(self, request_id: str, where: str) -> CacheRequest:
        request = self.requests.get(request_id)
        if request is None:
            reason = (
                "this request has already finished"
                if request_id in self.seen
                else "no request with this id has arrived"
            )
            raise UnknownRequestError(field=where, request_id=request_id, reason=reason)
        return request

    def _arrive(self, op: ArriveOp, where: str) -> tuple[Outcome, CacheRequest]:
        if op.request_id in self.seen:
            raise UnknownRequestError(
                field=f"{where}.request_id",
                request_id=op.request_id,
                reason="request ids are never reused; give each arrival a new id",
            )
        if len(op.prompt_token_ids) >= self.config.max_model_len:
            raise TraceFieldError(
                field=f"{where}.prompt_token_ids",
                value=f"{len(op.prompt_token_ids)} tokens",
                reason=f"a prompt must be shorter than max_model_len "
                f"({self.config.max_model_len} tokens)",
            )
        self._check_int32(op.prompt_token_ids, f"{where}.prompt_token_ids")
        hash_request = HashRequest(
            prompt_token_ids=op.prompt_token_ids,
            lora_name=op.lora_name,
            lora_path=op.lora_path,
            cache_salt=op.cache_salt,
            mm_features=op.mm_features,
        )
        try:
            request = CacheRequest(
                request_id=op.request_id,
                hash_request=hash_request,
                scheme=self.scheme,
                lora_int_id=op.lora_int_id if op.lora_name is not None else None,
                kv_cache_report_mode=op.kv_cache_report_mode,
                skip_reading_prefix_cache=op.skip_reading_prefix_cache,
            )
        except InvalidFieldError as err:  # a token id the release cannot hold (0.34: int32)
            raise TraceFieldError(
                field=f"{where}.{err.field}", value=err.value, reason=err.reason
            ) from None
        self.seen.add(op.request_id)
        self.requests[op.request_id] = request
        return self.admit(request), request

    def _check_int32(self, token_ids: Sequence[int], field: str) -> None:
        """0.34 holds token ids as int32 whether or not it hashes them (``TokenBuffer``);
        with caching on the hasher refuses them, without it this does."""
        if self.scheme is not None or not self.rules.hash_profile.int32_token_ids:
            return
        if token_ids and max(token_ids) > INT32_MAX:
            index = next(i for i, t in enumerate(token_ids) if t > INT32_MAX)
            raise TraceFieldError(
                field=f"{field}[{index}]",
                value=token_ids[index],
                reason=f"vLLM {self.rules.vllm_version} holds token ids as signed int32 "
                f"(at most {INT32_MAX})",
            )

    def _decode(self, op: DecodeOp, where: str) -> tuple[Outcome, CacheRequest]:
        request = self._live(op.request_id, f"{where}.request_id")
        if request.status is RequestStatus.WAITING:
            return DecodeOutcome(skipped="waiting"), request
        self._check_int32(op.token_ids, f"{where}.token_ids")
        steps = self.run_pending(request)
        appended = 0
        if not steps or steps[-1].allocated is True:
            for token in op.token_ids:
                if request.num_tokens + 1 >= self.config.max_model_len:
                    raise TraceFieldError(
                        field=f"{where}.token_ids",
                        value=f"{request.num_tokens + 1} tokens",
                        reason=f"decoding must keep num_tokens below max_model_len "
                        f"({self.config.max_model_len})",
                    )
                try:
                    request.append_output_token_ids(token)
                except InvalidFieldError as err:  # 0.34: an id outside int32
                    raise TraceFieldError(
                        field=f"{where}.token_ids[{appended}]", value=err.value, reason=err.reason
                    ) from None
                appended += 1
                step = self.run_step(request)
                steps.append(step)
                if step.allocated is not True:
                    break
        return DecodeOutcome(tokens_appended=appended, steps=tuple(steps)), request

    def apply(self, op: Op, index: int) -> OpRecord:
        """Run one op and record what it did."""
        where = f"ops[{index}]"
        request: CacheRequest | None
        outcome: Outcome
        if isinstance(op, ArriveOp):
            outcome, request = self._arrive(op, where)
        elif isinstance(op, DecodeOp):
            outcome, request = self._decode(op, where)
        elif isinstance(op, RetryOp):
            request = self._live(op.request_id, f"{where}.request_id")
            if request.status is RequestStatus.WAITING:
                outcome = self.admit(request)
            else:
                outcome = StepsOutcome(steps=tuple(self.run_pending(request)))
        elif isinstance(op, FinishOp):
            finished = self._live(op.request_id, f"{where}.request_id")
            del self.requests[op.request_id]
            self.manager.free(finished)
            outcome, request = FinishOutcome(was=finished.status.value), None
        else:
            outcome, request = ResetOutcome(ok=self.manager.reset_prefix_cache()), None
        return OpRecord(
            op=_op_name(op),
            request_id=getattr(op, "request_id", None),
            outcome=outcome,
            request=None if request is None else self.request_snapshot(request),
            pool=self.pool_snapshot(),
            events=tuple(self.manager.take_events()),
            prefix_cache_stats=self.manager.make_prefix_cache_stats(),
        )


_OP_NAMES: dict[type, str] = {
    ArriveOp: "arrive",
    RetryOp: "retry",
    DecodeOp: "decode",
    FinishOp: "finish",
}


def _op_name(op: Op) -> str:
    return _OP_NAMES.get(type(op), "reset_prefix_cache")


def _hash_scheme(config: ReplayConfig, seed: str) -> HashScheme:
    """The request hasher's scheme: the release's profile, and L lookahead tokens."""
    return HashScheme.from_seed(
        algorithm=config.hash_fn,
        block_size=config.hash_block_size,
        seed=seed,
        profile=config.rules.hash_profile,
        num_hash_lookahead_tokens=config.num_hash_lookahead_tokens,
    )


def replay(trace: CacheTrace, *, free_queue_limit: int = FREE_QUEUE_RECORD_LIMIT) -> ReplayResult:
    """Replay every op of ``trace``; the records and the final state.

    The release is ``trace.plan_input.settings.vllm_version``.
    """
    if not isinstance(trace, CacheTrace):
        raise FieldTypeError(
            field="trace", value=trace, reason="must be a CacheTrace (kvpure.cache.parse_trace)"
        )
    flags = trace.draft_flags
    config = replay_config_from_plan_input(
        trace.plan_input,
        disable_lookahead_block_hashes=flags.disable_lookahead_block_hashes,
        disable_eagle_block_drop=flags.disable_eagle_block_drop,
    )
    engine = CacheReplay(config, trace.replay, free_queue_limit=free_queue_limit)
    records = tuple(engine.apply(op, i) for i, op in enumerate(trace.ops))
    return ReplayResult(
        config=config,
        coordinator=engine.manager.coordinator.kind,
        manager_names=tuple(type(m).__name__ for m in engine.manager.coordinator.managers),
        none_hash=None if engine.scheme is None else engine.scheme.none_hash,
        records=records,
        final_requests=tuple(
            (rid, engine.request_snapshot(r)) for rid, r in engine.requests.items()
        ),
        final_pool=engine.pool_snapshot(),
    )
