"""A cache-replay trace and its results as frozen values (format ``kvpure-cache-replay/1``).

A trace is a planning input (the model and its KV cache), replay settings,
and ops: requests arrive, decode, retry, finish; the prefix cache is reset.
The replay answers one :class:`OpRecord` per op and a final state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvpure.cache.events import KVCacheEvent
from kvpure.cache.manager import PrefixCacheStats
from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_bool, check_str
from kvpure.hashing import MultiModalFeature
from kvpure.interop.planning import PlanningInput

__all__ = [
    "AdmissionOutcome",
    "ArriveOp",
    "CacheTrace",
    "DecodeOp",
    "DecodeOutcome",
    "DraftFlags",
    "FinishOp",
    "FinishOutcome",
    "Op",
    "OpRecord",
    "Outcome",
    "PoolSnapshot",
    "ReplaySettings",
    "RequestSnapshot",
    "ResetOutcome",
    "ResetPrefixCacheOp",
    "RetryOp",
    "StepRecord",
    "StepsOutcome",
]

BlockIds = tuple[tuple[int, ...], ...]
"""Block ids per KV cache group."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaySettings:
    """The engine settings a trace fixes besides the planning input."""

    log_stats: bool = True
    enable_kv_cache_events: bool = True
    use_int_block_hashes: bool = True
    pythonhashseed: str = "0"
    watermark: float = 0.0
    reserve_full_isl: bool = True

    def __post_init__(self) -> None:
        for name in ("log_stats", "enable_kv_cache_events", "use_int_block_hashes"):
            check_bool(f"replay.{name}", getattr(self, name))
        check_bool("replay.reserve_full_isl", self.reserve_full_isl)
        check_str("replay.pythonhashseed", self.pythonhashseed)
        watermark = self.watermark
        if (
            isinstance(watermark, bool)
            or not isinstance(watermark, int | float)
            or not 0 <= watermark <= 1  # NaN fails this too
        ):
            raise InvalidFieldError(
                field="replay.watermark",
                value=watermark,
                reason="must be a number from 0 to 1 (a share of the blocks)",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftFlags:
    """``speculative_config`` switches read from 0.33 on (vLLM's names)."""

    disable_lookahead_block_hashes: bool = False
    disable_eagle_block_drop: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ArriveOp:
    """A new request is admitted (one step, or more with the Mamba split)."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    lora_name: str | None = None
    lora_int_id: int = 1
    lora_path: str = ""
    cache_salt: str | None = None
    mm_features: tuple[MultiModalFeature, ...] = ()
    kv_cache_report_mode: str = "incremental"
    skip_reading_prefix_cache: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryOp:
    """A waiting request tries admission again; a running one schedules pending tokens."""

    request_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeOp:
    """Pending tokens first, then one step per appended token."""

    request_id: str
    token_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishOp:
    """The request's blocks are freed."""

    request_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetPrefixCacheOp:
    """``reset_prefix_cache()`` (no preemption)."""


Op = ArriveOp | RetryOp | DecodeOp | FinishOp | ResetPrefixCacheOp


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTrace:
    """A whole trace: the model's planning input, the settings, the ops in order."""

    name: str | None
    plan_input: PlanningInput
    replay: ReplaySettings
    ops: tuple[Op, ...]
    draft_flags: DraftFlags = DraftFlags()
    """The speculative switches of ``plan_input`` the planner does not read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One scheduling step: tokens scheduled, whether slots were given, the new blocks.

    ``allocated`` None means nothing was scheduled (then ``new_block_ids`` is None too).
    """

    num_new_tokens: int
    allocated: bool | None
    new_block_ids: BlockIds | None


_step_slots = vars(StepRecord)  # its slot descriptors, by field name
_set_step_tokens: Callable[[object, object], None] = _step_slots["num_new_tokens"].__set__
_set_step_allocated: Callable[[object, object], None] = _step_slots["allocated"].__set__
_set_step_ids: Callable[[object, object], None] = _step_slots["new_block_ids"].__set__


def allocated_step(num_new_tokens: int, new_block_ids: BlockIds) -> StepRecord:
    """``StepRecord(num_new_tokens=..., allocated=True, new_block_ids=...)``, the same value,
    built without the dataclass's per-field ``object.__setattr__`` (one per decode step)."""
    step: StepRecord = object.__new__(StepRecord)
    _set_step_tokens(step, num_new_tokens)
    _set_step_allocated(step, True)
    _set_step_ids(step, new_block_ids)
    return step


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionOutcome:
    """An admission attempt: the cache hit, the steps, whether the request now runs."""

    num_cached_tokens: int
    shared_prefix_boundary: int
    cached_block_ids: BlockIds
    steps: tuple[StepRecord, ...]
    admitted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeOutcome:
    """A decode: tokens appended and the steps (``skipped`` "waiting" for a waiting request)."""

    tokens_appended: int = 0
    steps: tuple[StepRecord, ...] = ()
    skipped: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepsOutcome:
    """A retry of a running request: the steps of its pending tokens."""

    steps: tuple[StepRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishOutcome:
    """What the finished request was: ``running`` or ``waiting``."""

    was: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetOutcome:
    """Whether the reset happened."""

    ok: bool


Outcome = AdmissionOutcome | DecodeOutcome | StepsOutcome | FinishOutcome | ResetOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSnapshot:
    """A live request after an op."""

    status: str
    num_tokens: int
    num_computed_tokens: int
    num_block_hashes: int
    block_ids: BlockIds


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSnapshot:
    """The pool after an op: free queue (head first), cached hash count, usage.

    ``free_queue`` holds the whole queue, or only its head when the queue is longer
    than the replay's ``free_queue_limit`` (then ``num_free_blocks`` is larger than
    its length).
    """

    free_queue: tuple[int, ...]
    num_free_blocks: int
    num_cached_hashes: int
    usage: float

    @property
    def free_queue_omitted(self) -> int:
        """Free blocks past the recorded head (0 when the whole queue is recorded)."""
        return self.num_free_blocks - len(self.free_queue)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpRecord:
    """What one op did and left."""

    op: str
    request_id: str | None
    outcome: Outcome
    request: RequestSnapshot | None
    pool: PoolSnapshot
    events: tuple[KVCacheEvent, ...]
    prefix_cache_stats: PrefixCacheStats | None
