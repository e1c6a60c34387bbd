"""What ``kvpure plan CONFIG.json [options]`` prints: the verdict, the settings, the report.

The options arrive as text (by option name); :func:`config_report` plans them
once (:func:`~kvpure.cli.deployment_plan.build_deployment_plan`, the same
computation as ``kvpure.plan_deployment``) and renders the text or the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kvpure.cli.deployment_plan import MEMORY_SWEEP_ONLY, build_deployment_plan
from kvpure.errors import KVPureError

__all__ = ["MEMORY_SWEEP_ONLY", "config_report", "config_report_output"]


def config_report(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None,
    as_json: bool,
    architecture_as: str | None = None,
    model_folder: Path | None = None,
) -> tuple[str, int, KVPureError | None]:
    """What ``kvpure plan CONFIG.json [options]`` prints, its exit code, and the failure.

    Bad input (the config, an option) raises. When vLLM would not start, the
    text is the verdict with the flags that would make it start, the code
    is 2, and the planner's error (vLLM's message) is returned for the caller
    to print as the one error line; with ``as_json`` the error is inside the
    JSON (``{"error", "verdict", "settings", ...}``). ``architecture_as``
    plans the model by a listed architecture's rule (``--architecture-as``;
    the report says so). Without ``kv_cache_memory`` the KV memory is
    estimated from the GPU (:mod:`kvpure.cli.plan_memory`; weights exact from
    the safetensors files in ``model_folder`` when it has them).
    """
    plan = build_deployment_plan(
        config,
        options,
        sweep_text=sweep_text,
        architecture_as=architecture_as,
        model_folder=model_folder,
    )
    if as_json:
        return plan.to_json(), plan.exit_code, None
    return plan.to_text(), plan.exit_code, plan.error


def config_report_output(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None,
    as_json: bool,
    architecture_as: str | None = None,
    model_folder: Path | None = None,
) -> tuple[str, int]:
    """:func:`config_report` for callers that want the failure raised."""
    text, code, failure = config_report(
        config,
        options,
        sweep_text=sweep_text,
        as_json=as_json,
        architecture_as=architecture_as,
        model_folder=model_folder,
    )
    if failure is not None:
        raise failure
    return text, code
