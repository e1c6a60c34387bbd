"""From a config.json and deployment options to a capacity report (or a sweep of them).

:func:`plan_deployment` derives the specs (``kvpure.models.derive``) and runs
the planner on them; :func:`capacity_report` explains the plan, with one
suggestion found by planning the alternatives exactly; :func:`sweep` plans
once per deployment of a list (typically one option walked through values).
Everything here takes typed values; the command line's text is read in
``kvpure.cli``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.deployment import Deployment
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs
from kvpure.models.layout import ModelLayout
from kvpure.planning.planner import KVCachePlan, get_kv_cache_configs
from kvpure.report.capacity import CapacityReport, ModelSummary, build_capacity_report
from kvpure.report.text import SweepRow

__all__ = [
    "capacity_report",
    "looks_like_model_config",
    "plan_deployment",
    "sweep",
]

_GIB = 2**30


def plan_deployment(
    layout: ModelLayout, deployment: Deployment
) -> tuple[DerivedSpecs, KVCachePlan]:
    """The derived specs and the planner's plan for them."""
    derived = derive_kv_cache_specs(layout, deployment)
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, derived.available_memory)
    return derived, plan


def _summary(derived: DerivedSpecs) -> ModelSummary:
    layout = derived.layout
    return ModelSummary(
        architecture=layout.architecture,
        num_attention_layers=len(layout.attention_layers),
        num_mamba_layers=len(layout.mamba_layers),
        model_dtype=derived.model_dtype.value,
        kv_cache_dtype=derived.kv_cache_dtype.value,
        attention_backend=derived.attention_backend.value,
        tensor_parallel_size=derived.deployment.tensor_parallel_size,
        pipeline_parallel_size=derived.deployment.pipeline_parallel_size,
        requested_max_model_len=derived.settings.max_model_len,
        derived_max_model_len=layout.derived_max_model_len,
        requested_block_size=derived.requested_block_size,
        block_size=derived.settings.block_size,
    )


def _tokens(layout: ModelLayout, deployment: Deployment) -> tuple[int, float, int] | None:
    """(capacity tokens, concurrency, max_model_len) of a deployment, or None if it fails."""
    try:
        _, plan = plan_deployment(layout, deployment)
    except KVPureError:
        return None
    facts = plan.workers[0]
    return (
        facts.kv_cache_capacity_tokens or 0,
        facts.max_concurrency or 0.0,
        plan.final_max_model_len,
    )


def suggest(layout: ModelLayout, deployment: Deployment, report: CapacityReport) -> str:
    """One line saying what to change to fit more, with numbers from exact re-plans."""
    if deployment.num_gpu_blocks_override is not None:
        return (
            f"the block count is fixed at {deployment.num_gpu_blocks_override:,} by "
            "--num-gpu-blocks-override; raise it (or drop it to use the memory)"
        )
    if report.model is not None and report.model.kv_cache_dtype in ("bfloat16", "float16"):
        fp8 = _tokens(layout, replace(deployment, kv_cache_dtype="fp8"))
        if fp8 is not None and fp8[0] > report.kv_cache_capacity_tokens:
            return (
                f"--kv-cache-dtype fp8 would hold {fp8[0]:,} tokens "
                f"({fp8[1]:.2f}x requests of {fp8[2]:,} tokens) instead of "
                f"{report.kv_cache_capacity_tokens:,}"
            )
    more = _tokens(
        layout,
        replace(
            deployment,
            kv_cache_memory_bytes=deployment.kv_cache_memory_bytes + _GIB,
            kv_cache_memory_per_gpu=tuple(m + _GIB for m in deployment.kv_cache_memory_per_gpu),
        ),
    )
    if more is not None:
        return (
            f"each extra GiB of KV cache memory per GPU adds about "
            f"{more[0] - report.kv_cache_capacity_tokens:,} tokens (--kv-cache-memory)"
        )
    return "raise --kv-cache-memory or lower --max-model-len"


def capacity_report(
    layout: ModelLayout, deployment: Deployment, *, with_suggestion: bool = True
) -> CapacityReport:
    """The explained report of one deployment of a model."""
    if not isinstance(with_suggestion, bool):
        raise InvalidFieldError(
            field="with_suggestion", value=with_suggestion, reason="must be True or False"
        )
    derived, plan = plan_deployment(layout, deployment)
    report = build_capacity_report(plan, derived.available_memory, model=_summary(derived))
    if not with_suggestion:
        return report
    return replace(report, suggestion=suggest(layout, deployment, report))


def sweep(
    layout: ModelLayout, deployments: Sequence[tuple[str, Deployment]]
) -> tuple[SweepRow, ...]:
    """One report per ``(label, deployment)``, in order.

    A deployment that cannot be served (it does not fit the memory, exceeds
    the model's length, does not divide the heads) gives a row with the
    reason instead of a report.
    """
    rows: list[SweepRow] = []
    for value, deployment in deployments:
        try:
            report = capacity_report(layout, deployment, with_suggestion=False)
        except KVPureError as err:
            rows.append(SweepRow(value=value, report=None, error=_short(str(err))))
            continue
        rows.append(SweepRow(value=value, report=report))
    return tuple(rows)


def _short(message: str) -> str:
    first = message.split(". ")[0]
    return first if len(first) <= 160 else first[:157] + "..."


def looks_like_model_config(data: object) -> bool:
    """Whether parsed JSON is a Hugging Face config.json (not a vLLM planning case)."""
    if not isinstance(data, Mapping):
        return False
    case_keys = {"input", "kv_cache_specs", "vllm_config", "available_memory"}
    return not case_keys & set(data) and ("architectures" in data or "model_type" in data)
