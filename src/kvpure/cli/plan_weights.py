"""When the weights alone do not fit: the fixes that start, found by exact re-planning.

With the KV memory estimated from the GPU, a model whose weights (with the
activation peak and the rest of vLLM's start-up profile) leave no KV memory
even at the high end of the estimate's band cannot be made to start by any
``--max-model-len`` or KV setting. :func:`weight_fixes` re-estimates and
re-plans the deployment with, one at a time:

- a larger tensor-parallel size (the smallest that starts), then a larger
  pipeline-parallel size;
- fp8 weights (``--quantization fp8``), for a checkpoint that is not quantized;
- every other GPU of kvpure's table (``--gpu``), listing those that start.

A fix is listed when the plan starts at the low end of the band ("starts"),
or, if none does, at its high end ("may start"). It never suggests more KV
memory: the memory is not the flag to turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kvpure.cli.plan_memory import MemoryCase, memory_case
from kvpure.errors import KVPureError, KVPureValueError, format_gib
from kvpure.models.config import HFConfig
from kvpure.models.layout import ModelLayout
from kvpure.serve.gpus import GPUS
from kvpure.serve.memory import MemoryBand

__all__ = ["WeightsDoNotFitError", "WeightsVerdict", "weight_fixes", "weights_do_not_fit"]

_SIZES: Final = (2, 4, 8, 16, 32, 64)
_GPU_OPTIONS: Final = ("gpu", "gpu_memory", "gpu_capability", "gpu_vendor")


class WeightsDoNotFitError(KVPureValueError):
    """The weights leave no KV cache memory on the GPU (``reason``; ``fixes`` that start)."""

    def __init__(self, reason: str, fixes: tuple[str, ...]) -> None:
        first = f"; try {fixes[0].split('  ')[0]}" if fixes else ""
        super().__init__(f"vLLM would not start: {reason}{first}")
        self.reason = reason
        self.fixes = fixes


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightsVerdict:
    """Why the deployment cannot start (the weights' share) and the fixes that start."""

    reason: str
    fixes: tuple[str, ...]

    @property
    def error(self) -> WeightsDoNotFitError:
        """The one error line the command prints."""
        return WeightsDoNotFitError(self.reason, self.fixes)


def weights_do_not_fit(case: MemoryCase) -> bool:
    """Whether no KV memory is left on some worker, even at the high end of the band."""
    return min(w.budget.kv_cache_bytes_high for w in case.workers) <= 0


def _reason(case: MemoryCase) -> str:
    worst = min(case.workers, key=lambda w: w.budget.kv_cache_bytes_high)
    b = worst.budget
    return (
        f"the weights do not fit: {format_gib(b.weights_bytes)} GiB of weights per GPU, "
        f"{format_gib(b.requested_bytes)} GiB usable ({format_gib(b.total_bytes)} GiB x "
        f"{b.gpu_memory_utilization:g}), no KV cache memory left"
    )


def _tokens(case: MemoryCase) -> int:
    return case.outcome.low.tokens or case.outcome.high.tokens


def weight_fixes(
    config: HFConfig,
    layout: ModelLayout,
    options: Mapping[str, str],
    case: MemoryCase,
    *,
    model_folder: Path | None,
) -> WeightsVerdict:
    """The smallest TP / PP, the quantization and the GPUs that start, by exact re-planning."""

    def attempt(
        changes: Mapping[str, str], drop: tuple[str, ...] = (), *, longest: bool = False
    ) -> MemoryCase | None:
        kept = {k: v for k, v in options.items() if k not in drop}
        try:
            return memory_case(
                config, layout, {**kept, **changes}, model_folder=model_folder, longest=longest
            )
        except KVPureError:
            return None

    def smallest(name: str, flag: str, current: int) -> str | None:
        maybe: str | None = None
        shorter: str | None = None
        for size in (s for s in _SIZES if s > current):
            found = attempt({name: str(size)})
            if found is None or weights_do_not_fit(found):
                continue
            per_gpu = format_gib(found.workers[0].budget.weights_bytes)
            text = f"{flag} {size}  ({per_gpu} GiB of weights per GPU; "
            verdict = found.outcome.verdict
            if verdict == MemoryBand.STARTS:
                return text + f"starts with {_tokens(found):,} tokens)"
            if verdict == MemoryBand.MAY_NOT_START:
                maybe = maybe or text + "may start: only at the high end of the band)"
            elif shorter is None and maybe is None:
                # The weights fit but a full-length request does not: the longest that starts.
                longest = attempt({name: str(size)}, longest=True)
                length = None if longest is None else longest.outcome.longest_low
                if length is not None:
                    shorter = (
                        f"{flag} {size} --max-model-len {length}  ({per_gpu} GiB of weights per "
                        "GPU; the longest max_model_len that starts there)"
                    )
        return maybe or shorter

    fixes: list[str] = []
    tp = case.flags.tensor_parallel_size or 1
    pp = case.flags.pipeline_parallel_size or 1
    for name, flag, current in (
        ("tensor_parallel_size", "-tp", tp),
        ("pipeline_parallel_size", "-pp", pp),
    ):
        fix = smallest(name, flag, current)
        if fix is not None:
            fixes.append(fix)
    if "quantization" not in options and not config.has("quantization_config"):
        found = attempt({"quantization": "fp8"})
        if found is not None and found.outcome.verdict != MemoryBand.DOES_NOT_START:
            per_gpu = format_gib(found.workers[0].budget.weights_bytes)
            fixes.append(
                f"--quantization fp8  (fp8 weights, {per_gpu} GiB per GPU; "
                + (
                    f"starts with {_tokens(found):,} tokens)"
                    if found.outcome.verdict == MemoryBand.STARTS
                    else "may start: only at the high end of the band)"
                )
            )
    named = case.flags.gpu.name if case.flags.gpu is not None else None
    gpus = _starting_gpus(lambda name: attempt({"gpu": name}, drop=_GPU_OPTIONS), named)
    if gpus:
        fixes.append("--gpu " + gpus[0] + "  (GPUs that start it: " + ", ".join(gpus) + ")")
    return WeightsVerdict(reason=_reason(case), fixes=tuple(fixes))


def _starting_gpus(attempt: Callable[[str], MemoryCase | None], current: str | None) -> list[str]:
    """The catalogue's GPUs that start it (low end first, then those that may), smallest first."""
    starting: list[tuple[int, str]] = []
    maybe: list[tuple[int, str]] = []
    for name, gpu in GPUS.items():
        if name == current:
            continue
        found = attempt(name)
        if found is None or found.outcome.verdict == MemoryBand.DOES_NOT_START:
            continue
        target = starting if found.outcome.verdict == MemoryBand.STARTS else maybe
        target.append((gpu.total_memory_bytes, name))
    return [name for _, name in sorted(starting)] or [name for _, name in sorted(maybe)]
