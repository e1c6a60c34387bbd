"""What ``kvpure plan CONFIG.json [options]`` prints: the verdict, the settings, the report.

The options arrive as text (by option name) and are read here into typed
:class:`~kvpure.serve.flags.ServeFlags`; :mod:`kvpure.serve` resolves vLLM
0.26's defaults from them and the report package only ever sees the
resulting :class:`~kvpure.models.deployment.Deployment`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kvpure.cli.plan_memory import (
    MemoryCase,
    memory_case,
    memory_json,
    memory_text,
    split_memory_options,
)
from kvpure.cli.plan_memory_sweep import memory_sweep
from kvpure.cli.plan_options import parse_sweep
from kvpure.cli.serve_options import VLLM_OPTION, serve_flags_from_options
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.interop.planning import render_error
from kvpure.models.architectures import model_layout
from kvpure.models.config import HFConfig, parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import capacity_report, sweep
from kvpure.report.text import render_report, render_sweep, report_to_json
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.memory import MemoryBand
from kvpure.serve.output import final_settings, release_line, render_serve_header, serve_json
from kvpure.serve.verdict import serve_verdict, starts
from kvpure.versions import resolve_vllm_version

#: Sweep names that only change the estimated memory (refused with --kv-cache-memory).
MEMORY_SWEEP_ONLY: Final = ("gpu_memory_utilization", "quantization")

__all__ = ["config_report", "config_report_output"]


def _sweep(layout: ModelLayout, options: Mapping[str, str], sweep_text: str, as_json: bool) -> str:
    name, values = parse_sweep(sweep_text)
    deployments = [
        (
            value,
            resolve_serve_settings(
                layout, serve_flags_from_options({**options, name: value})
            ).deployment,
        )
        for value in values
    ]
    rows = sweep(layout, deployments)
    version = resolve_vllm_version(options.get(VLLM_OPTION))
    if not as_json:
        return release_line(version) + "\n" + render_sweep(name, rows)
    data = {
        "vllm_version": version,
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
    return json.dumps(data, indent=2)


def _verdict_report(
    layout: ModelLayout,
    flags: ServeFlags,
    *,
    as_json: bool,
    memory: MemoryCase | None = None,
) -> tuple[str, int, KVPureError | None]:
    """The serve verdict and report for ``flags``, after the memory estimate when there is one."""
    serve, verdict, planned = serve_verdict(layout, flags)
    extra = {} if memory is None else memory_json(memory)
    prefix = release_line(serve.vllm_version) + "\n"
    prefix += "" if memory is None else memory_text(memory) + "\n\n"
    if planned is None:
        settings = final_settings(serve, None)
        if as_json:
            failure = verdict.error
            data: dict[str, object] = {} if failure is None else render_error(failure)
            data |= serve_json(serve, verdict, settings) | extra
            return json.dumps(data, indent=2), 2, None
        return prefix + render_serve_header(serve, verdict, settings), 2, verdict.error
    report = capacity_report(layout, serve.deployment)
    settings = final_settings(serve, report)
    if as_json:
        data = serve_json(serve, verdict, settings) | report_to_json(report) | extra
        return json.dumps(data, indent=2), 0, None
    header = render_serve_header(serve, verdict, settings)
    return prefix + header + "\n\n" + render_report(report), 0, None


def _memory_report(
    config: HFConfig,
    layout: ModelLayout,
    options: Mapping[str, str],
    *,
    as_json: bool,
    model_folder: Path | None,
) -> tuple[str, int, KVPureError | None]:
    case = memory_case(config, layout, options, model_folder=model_folder)
    # The report shows the central estimate; when only the band's high end starts, that end.
    flags = case.central_flags
    if case.outcome.verdict == MemoryBand.MAY_NOT_START and not starts(layout, flags):
        flags = case.high_flags
    return _verdict_report(layout, flags, as_json=as_json, memory=case)


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
    plans the model by a listed architecture's rule (``--architecture-as``).
    Without ``kv_cache_memory`` the KV memory is estimated from the GPU
    (:mod:`kvpure.cli.plan_memory`; weights exact from the safetensors files in
    ``model_folder`` when it has them).
    """
    hf_config = parse_model_config(config)
    layout = model_layout(hf_config, architecture_as=architecture_as)
    serve_options, memory_options = split_memory_options(options)
    estimated = "kv_cache_memory" not in options
    if sweep_text is not None:
        name, values = parse_sweep(sweep_text)
        if estimated and name != "kv_cache_memory":
            text = memory_sweep(
                hf_config,
                layout,
                options,
                name,
                values,
                model_folder=model_folder,
                as_json=as_json,
            )
            version = resolve_vllm_version(options.get(VLLM_OPTION))
            if as_json:
                data = {"vllm_version": version} | json.loads(text)
                return json.dumps(data, indent=2), 0, None
            return release_line(version) + "\n" + text, 0, None
        if name in memory_options or name in MEMORY_SWEEP_ONLY:
            raise InvalidFieldError(
                field="--sweep",
                value=sweep_text,
                reason=f"{name} changes the estimated KV memory; leave out --kv-cache-memory",
            )
        return _sweep(layout, serve_options, sweep_text, as_json), 0, None
    if estimated:
        return _memory_report(
            hf_config, layout, options, as_json=as_json, model_folder=model_folder
        )
    flags = serve_flags_from_options(serve_options)
    return _verdict_report(layout, flags, as_json=as_json)


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
