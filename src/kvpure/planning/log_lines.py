"""The lines vLLM 0.26.0 logs while planning, rebuilt from a plan's facts.

kvpure never logs; a caller that wants vLLM's log output (or to compare with
it) renders it from the :class:`KVCachePlan` with :func:`vllm_log_lines`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.errors import format_gib
from kvpure.planning.planner import KVCachePlan

HYBRID_DISABLED_WARNING = (
    "Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable "
    "any optimizations for saving KV cache memory (e.g., dropping the KV cache outside the "
    "sliding window). The compute of layers like sliding window is still saved."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLine:
    """One log record: vLLM's level name and message."""

    level: str
    msg: str


def vllm_log_lines(plan: KVCachePlan) -> tuple[LogLine, ...]:
    """What vLLM would have logged for this plan, in order."""
    lines: list[LogLine] = []
    if plan.hybrid_specs_converted:
        lines.append(LogLine(level="WARNING", msg=HYBRID_DISABLED_WARNING))
    lines.extend(LogLine(level="WARNING", msg=fact.message) for fact in plan.padding)
    for override in plan.num_blocks_overrides:
        lines.append(
            LogLine(
                level="INFO",
                msg=f"Overriding num_gpu_blocks={override.num_blocks_from_memory} with "
                f"num_gpu_blocks_override={override.num_gpu_blocks_override}",
            )
        )
    fit = plan.auto_fit
    if fit is not None:
        if fit.attention_free:
            msg = (
                "Auto-fit max_model_len: attention-free model, using derived "
                f"max_model_len={fit.original_max_model_len}"
            )
        elif fit.reduced:
            available = fit.limiting_available_bytes or 0
            msg = (
                f"Auto-fit max_model_len: reduced from {fit.original_max_model_len} to "
                f"{fit.fitted_max_model_len} to fit in available GPU memory "
                f"({format_gib(available)} GiB available for KV cache)"
            )
        else:
            msg = (
                "Auto-fit max_model_len: full model context length "
                f"{fit.original_max_model_len} fits in available GPU memory"
            )
        lines.append(LogLine(level="INFO", msg=msg))
    for facts in plan.workers:
        if facts.kv_cache_capacity_tokens is None or facts.max_concurrency is None:
            continue
        lines.append(
            LogLine(
                level="INFO", msg=f"GPU KV cache size: {facts.kv_cache_capacity_tokens:,} tokens"
            )
        )
        lines.append(
            LogLine(
                level="INFO",
                msg=f"Maximum concurrency for {plan.final_max_model_len:,} tokens per request: "
                f"{facts.max_concurrency:.2f}x",
            )
        )
    return tuple(lines)
