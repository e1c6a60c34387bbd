"""Starts or not: the verdict on a ``vllm serve`` run, and the flags that would make it fit.

:func:`serve_verdict` plans the resolved deployment. When vLLM would refuse
to start (one max-length request does not fit, or no memory is left), it
re-plans exactly to find, in kvpure's own flags:

- the largest ``--max-model-len`` that starts (a binary search over lengths;
  the memory a request needs never shrinks as the length grows);
- the smallest ``--kv-cache-memory`` per GPU that starts at the length asked
  for (a binary search over MiB);
- whether ``--kv-cache-dtype fp8`` starts, and with how many tokens.

Each candidate is re-resolved from the flags (:func:`resolve_serve_settings`),
so defaults that follow the length (``max_num_batched_tokens``) follow it here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from kvpure.errors import (
    AutoFitError,
    InsufficientKVCacheMemoryError,
    InvalidFieldError,
    KVPureError,
    NoKVCacheMemoryError,
)
from kvpure.models.derive import DerivedSpecs
from kvpure.models.layout import ModelLayout
from kvpure.planning.planner import KVCachePlan
from kvpure.report.model_plan import plan_deployment
from kvpure.serve.defaults import ServeSettings, resolve_serve_settings
from kvpure.serve.flags import ServeFlags

__all__ = ["Verdict", "largest_fitting_max_model_len", "serve_verdict", "starts"]

_MIB: Final = 2**20
_MAX_MIB: Final = 2**40  # 1 EiB in MiB: the CLI's size bound
NOT_STARTING: Final = (InsufficientKVCacheMemoryError, NoKVCacheMemoryError, AutoFitError)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Whether vLLM starts, what it holds, and (if not) the flags that would make it start.

    ``tokens`` and ``concurrency`` are per engine (0 when it does not start);
    ``error`` is the planner's error (vLLM's own message) when it does not start.
    """

    starts: bool
    tokens: int
    concurrency: float
    max_model_len: int
    max_num_seqs: int
    data_parallel_size: int
    error: KVPureError | None = field(default=None, compare=False)
    fixes: tuple[str, ...] = ()
    weights_do_not_fit: str = ""
    """Why the weights leave no KV memory (the estimated path), empty when they fit."""

    @property
    def line(self) -> str:
        """The one-line verdict the report opens with."""
        if not self.starts:
            reason = self.weights_do_not_fit or f"{self.max_model_len:,}-token requests do not fit"
            return f"Verdict: does NOT start ({reason})."
        engines = (
            f" per engine, x{self.data_parallel_size} engines"
            if (self.data_parallel_size > 1)
            else ""
        )
        at_once = min(self.concurrency, float(self.max_num_seqs))
        capped = (
            f" (max_num_seqs caps it at {self.max_num_seqs:,})"
            if (self.concurrency > self.max_num_seqs)
            else ""
        )
        return (
            f"Verdict: starts; {self.tokens:,} tokens of KV cache{engines}; "
            f"{at_once:.2f} requests of {self.max_model_len:,} tokens at once{capped}."
        )


def starts(layout: ModelLayout, flags: ServeFlags) -> bool:
    """Whether vLLM would start with these flags (nothing raises on the way to a plan)."""
    try:
        plan_deployment(layout, resolve_serve_settings(layout, flags).deployment)
    except KVPureError:
        return False
    return True


def largest_fitting_max_model_len(layout: ModelLayout, flags: ServeFlags, upper: int) -> int | None:
    """The largest ``--max-model-len`` in ``[1, upper]`` that starts, or None."""
    fixed = replace(flags, max_model_len_auto=False)
    if not starts(layout, replace(fixed, max_model_len=1)):
        return None
    low, high = 1, upper  # low starts; find the last that does
    while low < high:
        mid = (low + high + 1) // 2
        if starts(layout, replace(fixed, max_model_len=mid)):
            low = mid
        else:
            high = mid - 1
    return low


def _memory_needed_mib(layout: ModelLayout, flags: ServeFlags) -> int | None:
    """The smallest whole-MiB figure for every GPU that starts, or None."""

    def fits(mib: int) -> bool:
        return starts(layout, replace(flags, kv_cache_memory_bytes=(mib * _MIB,)))

    high = 1
    while not fits(high):
        high *= 2
        if high > _MAX_MIB:
            return None
    low = high // 2 + 1  # high // 2 did not fit (1 when high is 1)
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return high


def _capacity(plan: KVCachePlan) -> tuple[int, float]:
    facts = plan.workers[0]
    return facts.kv_cache_capacity_tokens or 0, facts.max_concurrency or 0.0


def _fixes(
    layout: ModelLayout, flags: ServeFlags, serve: ServeSettings, length: int
) -> tuple[str, ...]:
    fixes: list[str] = []
    if not flags.max_model_len_auto:
        # below the length asked, which did not start (length 1: an empty range, None)
        best = largest_fitting_max_model_len(layout, flags, length - 1)
        if best is not None:
            fixes.append(f"--max-model-len {best}  (the largest that starts)")
    if flags.num_gpu_blocks_override is None:
        mib = _memory_needed_mib(layout, replace(flags, max_model_len_auto=False))
        if mib is not None:
            fixes.append(
                f"--kv-cache-memory {mib}MiB  ({mib / 1024:.2f} GiB per GPU, the least that "
                f"starts {length:,}-token requests)"
            )
    if serve["kv_cache_dtype"].value in ("bfloat16", "float16"):  # "auto" shows the dtype
        fp8 = replace(flags, kv_cache_dtype="fp8")
        try:
            fp8_serve = resolve_serve_settings(layout, fp8)
            _, plan = plan_deployment(layout, fp8_serve.deployment)
        except KVPureError:
            pass
        else:
            tokens, _ = _capacity(plan)
            fixes.append(f"--kv-cache-dtype fp8  (starts with {tokens:,} tokens)")
    return tuple(fixes)


def _check_align_mode(derived: DerivedSpecs) -> None:
    """vLLM asserts ``block_size <= max_num_batched_tokens`` in Mamba cache mode ``align``.

    (``VllmConfig`` block-size checks, vllm/config/vllm.py.)
    """
    settings = derived.settings
    if settings.mamba_cache_mode == "align" and settings.block_size > (
        settings.max_num_batched_tokens
    ):
        raise InvalidFieldError(
            field="--max-num-batched-tokens",
            value=settings.max_num_batched_tokens,
            reason=f"Mamba cache mode align needs at least the block size "
            f"({settings.block_size} tokens); vLLM refuses to start",
        )


def serve_verdict(
    layout: ModelLayout, flags: ServeFlags, *, find_fixes: bool = True
) -> tuple[ServeSettings, Verdict, tuple[DerivedSpecs, KVCachePlan] | None]:
    """The resolved settings, the verdict, and the plan when vLLM starts.

    ``find_fixes=False`` skips the re-planning for the flags that would make it
    start (the caller has its own, e.g. when the weights do not fit).
    """
    serve = resolve_serve_settings(layout, flags)
    max_len = serve["max_model_len"].value
    length = max_len if isinstance(max_len, int) else layout.derived_max_model_len
    seqs = int(serve["max_num_seqs"].value)
    try:
        derived, plan = plan_deployment(layout, serve.deployment)
    except NOT_STARTING as err:
        verdict = Verdict(
            starts=False,
            tokens=0,
            concurrency=0.0,
            max_model_len=length,
            max_num_seqs=seqs,
            data_parallel_size=serve.data_parallel_size,
            error=err,
            fixes=_fixes(layout, flags, serve, length) if find_fixes else (),
        )
        return serve, verdict, None
    _check_align_mode(derived)
    tokens, concurrency = _capacity(plan)
    verdict = Verdict(
        starts=True,
        tokens=tokens,
        concurrency=concurrency,
        max_model_len=plan.final_max_model_len,
        max_num_seqs=seqs,
        data_parallel_size=serve.data_parallel_size,
    )
    return serve, verdict, (derived, plan)
