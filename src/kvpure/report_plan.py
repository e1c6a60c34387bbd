"""From a config.json and deployment options to a capacity report (or a sweep of them).

:func:`plan_deployment` derives the specs (``kvpure.models.derive``) and runs
the planner on them; :func:`capacity_report` explains the plan, with one
suggestion found by planning the alternatives exactly; :func:`sweep` plans
once per value of one option; :func:`config_report_output` is what
``kvpure plan CONFIG.json`` prints (text or JSON), as a string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from kvpure.errors import InvalidFieldError, KVPureError, ModelConfigError
from kvpure.interop.planning import render_error
from kvpure.models.architectures import model_layout
from kvpure.models.cli_options import deployment_from_options, parse_sweep
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs
from kvpure.models.layout import ModelLayout
from kvpure.planning import KVCachePlan, get_kv_cache_configs
from kvpure.report import CapacityReport, ModelSummary, build_capacity_report
from kvpure.report_text import SweepRow, render_report, render_sweep, report_to_json

__all__ = [
    "capacity_report",
    "config_report_output",
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
        layout, replace(deployment, kv_cache_memory_bytes=deployment.kv_cache_memory_bytes + _GIB)
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
    derived, plan = plan_deployment(layout, deployment)
    report = build_capacity_report(plan, derived.available_memory, model=_summary(derived))
    if not with_suggestion:
        return report
    return replace(report, suggestion=suggest(layout, deployment, report))


def sweep(
    layout: ModelLayout, options: Mapping[str, str], name: str, values: tuple[str, ...]
) -> tuple[SweepRow, ...]:
    """One report per value of option ``name`` (the others as given).

    A value that cannot be read (``--block-size 0``) raises: it is a bad
    input. A value that reads but cannot be served (it does not fit the
    memory, exceeds the model's length, does not divide the heads) gives a
    row with the reason.
    """
    rows: list[SweepRow] = []
    for value in values:
        deployment = deployment_from_options({**options, name: value})
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


def config_report_output(
    config: object, options: Mapping[str, str], *, sweep_text: str | None, as_json: bool
) -> tuple[str, int]:
    """What ``kvpure plan CONFIG.json [options]`` prints, and its exit code.

    Bad input (the config, an option) raises. A deployment the planner
    refuses (not enough memory, ...) raises too, except with ``as_json``,
    which prints ``{"error": {"type", "vllm_type", "message"}}`` and exits 2,
    as for planning cases.
    """
    layout = model_layout(parse_model_config(config))
    if sweep_text is not None:
        name, values = parse_sweep(sweep_text)
        rows = sweep(layout, options, name, values)
        if not as_json:
            return render_sweep(name, rows), 0
        data = {
            "sweep": name,
            "rows": [
                {
                    "value": row.value,
                    "report": None if row.report is None else report_to_json(row.report),
                    "error": row.error,
                }
                for row in rows
            ],
        }
        return json.dumps(data, indent=2), 0
    deployment = deployment_from_options(options)
    try:
        report = capacity_report(layout, deployment)
    except KVPureError as err:
        if not as_json or isinstance(err, InvalidFieldError | ModelConfigError):
            raise
        return json.dumps(render_error(err), indent=2), 2
    if as_json:
        return json.dumps(report_to_json(report), indent=2), 0
    return render_report(report), 0
