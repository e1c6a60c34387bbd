"""``kvpure plan MODEL [flags]`` as a value: :class:`DeploymentPlan`, built once, rendered twice.

:func:`build_deployment_plan` reads the option texts (by option name, as the
command line gives them) and plans: the serve settings of the release, the
verdict (with the fixes when vLLM would not start), the capacity report, the
memory estimate when no ``kv_cache_memory`` is given, or a sweep. The result
renders as the command's text (:meth:`DeploymentPlan.to_text`) or JSON
(:meth:`DeploymentPlan.to_json`) from the same values, so ``kvpure plan X
--json`` and ``kvpure.plan_deployment(X).to_json()`` are one computation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kvpure.cli.memory_release import split_release_options
from kvpure.cli.plan_memory import MemoryCase, memory_json, memory_text, split_memory_options
from kvpure.cli.plan_options import parse_sweep
from kvpure.cli.serve_options import VLLM_OPTION, serve_flags_from_options
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.models.planned_as import planned_as_note
from kvpure.models.sentence_transformers import with_folder_modules
from kvpure.report.capacity import CapacityReport
from kvpure.report.model_plan import capacity_report, sweep
from kvpure.report.text import SweepRow, render_report, render_sweep, report_to_json
from kvpure.serve.defaults import ServeSettings, resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.output import final_settings, release_line, render_serve_header, serve_json
from kvpure.serve.setting import Setting
from kvpure.serve.verdict import Verdict, serve_verdict, starts
from kvpure.versions import resolve_vllm_version

# The memory estimate (its sweep, the weights' fixes) is imported where it runs, without
# --kv-cache-memory: with the memory given, `kvpure plan` never imports it. Its types
# resolve on first use (module __getattr__ below), for a run-time checker that reads this
# module's annotations.
if TYPE_CHECKING:
    from kvpure.cli.plan_memory_sweep import MemorySweepRow
    from kvpure.cli.plan_weights import WeightsVerdict

_ESTIMATE_TYPES: Final = {
    "MemorySweepRow": "kvpure.cli.plan_memory_sweep",
    "WeightsVerdict": "kvpure.cli.plan_weights",
}


def __getattr__(name: str) -> object:
    """The memory sweep's and the weights' types, imported on first use."""
    module = _ESTIMATE_TYPES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["MEMORY_SWEEP_ONLY", "DeploymentPlan", "build_deployment_plan"]

#: Sweep names that only change the estimated memory (refused with --kv-cache-memory).
MEMORY_SWEEP_ONLY: Final = ("gpu_memory_utilization", "quantization")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentPlan:
    """What ``kvpure plan MODEL [flags]`` answers, as values.

    - ``vllm_version``: the release planned as (a ``--vllm`` kvpure does not
      reproduce is planned by the nearest reproduced release);
    - ``memory_profile_version``: the release whose start-up memory profile the
      estimate follows, when that is another release (``--vllm 0.13``,
      ``--memory-profile-version``); None otherwise or without an estimate;
    - ``serve``, ``verdict``, ``settings``: the resolved ``vllm serve`` settings,
      starts or not (with the fixes), and the settings as the report lists them
      (None/empty for a sweep);
    - ``report``: the capacity report when vLLM starts;
    - ``memory``: the estimated memory and its band (no ``kv_cache_memory`` given);
    - ``sweep_name`` and ``sweep_rows``: one row per value of ``--sweep``;
    - ``exit_code``: 0, or 2 when vLLM would not start; ``error`` its message.

    :meth:`to_text` and :meth:`to_json` are what the command prints.
    """

    vllm_version: str
    memory_profile_version: str | None = None
    serve: ServeSettings | None = None
    verdict: Verdict | None = None
    settings: tuple[tuple[str, Setting], ...] = ()
    report: CapacityReport | None = None
    memory: MemoryCase | None = None
    sweep_name: str | None = None
    sweep_rows: tuple[SweepRow, ...] | tuple[MemorySweepRow, ...] = ()
    exit_code: int = 0
    error: KVPureError | None = field(default=None, compare=False)
    _render: Callable[[bool], str] = field(repr=False, compare=False)

    @property
    def starts(self) -> bool:
        """Whether vLLM would start (a sweep: whether every row was planned)."""
        return self.exit_code == 0

    def to_text(self) -> str:
        """The readable report, as ``kvpure plan`` prints it."""
        return self._render(False)

    def to_json(self) -> str:
        """The JSON, as ``kvpure plan --json`` prints it."""
        return self._render(True)

    def to_dict(self) -> dict[str, object]:
        """:meth:`to_json` as a dict."""
        data: dict[str, object] = json.loads(self.to_json())
        return data


def _with_note(
    config: object, architecture_as: str | None, render: Callable[[bool], str]
) -> Callable[[bool], str]:
    def rendered(as_json: bool) -> str:
        return planned_as_note(config, architecture_as, render(as_json), as_json=as_json)

    return rendered


def _sweep_plan(
    layout: ModelLayout,
    options: Mapping[str, str],
    name: str,
    values: tuple[str, ...],
    header: str,
) -> tuple[tuple[SweepRow, ...], Callable[[bool], str]]:
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

    def render(as_json: bool) -> str:
        if not as_json:
            return header + "\n" + render_sweep(name, rows)
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

    return rows, render


def _verdict_plan(
    layout: ModelLayout,
    flags: ServeFlags,
    header: str,
    memory: MemoryCase | None = None,
    weights: WeightsVerdict | None = None,
    profile: str | None = None,
) -> DeploymentPlan:
    """The serve verdict and report for ``flags``, after the memory estimate when there is one.

    ``header``: the release line; ``weights``: the weights leave no KV memory, its
    fixes replace the KV ones; ``profile``: another release's memory profile.
    """
    serve, verdict, planned = serve_verdict(layout, flags, find_fixes=weights is None)
    if memory is not None and profile is not None and flags.gpu_memory_utilization is None:
        from kvpure.cli.plan_memory import profile_utilization  # the estimate only

        serve = profile_utilization(serve, profile)
    if weights is not None and planned is None:
        verdict = replace(
            verdict, fixes=weights.fixes, weights_do_not_fit=weights.reason, error=weights.error
        )
    report = None if planned is None else capacity_report(layout, serve.deployment)
    settings = final_settings(serve, report)
    code = 2 if planned is None else 0
    extra = {} if memory is None else memory_json(memory)
    # the releases first: vLLM's planning release, then another release's memory profile
    releases: dict[str, object] = {"vllm_version": serve.vllm_version}
    if profile is not None:
        releases["memory_profile_version"] = profile
    prefix = header + "\n"
    prefix += "" if memory is None else memory_text(memory) + "\n\n"

    def render(as_json: bool) -> str:
        if report is None:
            if as_json:
                failure = verdict.error
                from kvpure.interop.planning import render_error  # a failed sweep row only

                data: dict[str, object] = {} if failure is None else render_error(failure)
                data |= releases | serve_json(serve, verdict, settings) | extra
                return json.dumps(data, indent=2)
            return prefix + render_serve_header(serve, verdict, settings)
        if as_json:
            data = releases | serve_json(serve, verdict, settings) | report_to_json(report) | extra
            return json.dumps(data, indent=2)
        serve_header = render_serve_header(serve, verdict, settings)
        return prefix + serve_header + "\n\n" + render_report(report)

    return DeploymentPlan(
        vllm_version=serve.vllm_version,
        memory_profile_version=profile,
        serve=serve,
        verdict=verdict,
        settings=settings,
        report=report,
        memory=memory,
        exit_code=code,
        error=verdict.error if report is None else None,
        _render=render,
    )


def build_deployment_plan(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None = None,
    architecture_as: str | None = None,
    model_folder: Path | None = None,
) -> DeploymentPlan:
    """Plan a config.json with option texts (by option name), as ``kvpure plan`` does.

    Bad input (the config, an option) raises. Without ``kv_cache_memory`` the
    KV memory is estimated from the GPU (:mod:`kvpure.cli.plan_memory`;
    weights exact from the safetensors files in ``model_folder`` when it has
    them). ``architecture_as`` plans the model by a listed architecture's rule.
    """
    named = options.get(VLLM_OPTION)
    options = split_release_options(options)
    hf_config = parse_model_config(config)
    layout = with_folder_modules(
        model_layout(hf_config, architecture_as=architecture_as), model_folder
    )
    serve_options, memory_options = split_memory_options(options)
    estimated = "kv_cache_memory" not in options
    version = resolve_vllm_version(options.get(VLLM_OPTION))
    if not estimated:
        from kvpure.cli.plan_memory import check_memory_options

        check_memory_options(hf_config, memory_options, version)
    # the memory profile's release counts only where the memory is estimated
    profile = _other_profile(options, version) if estimated else None
    header = release_line(version, memory_profile=profile, named=named)
    given_header = release_line(version, named=named)
    if sweep_text is not None:
        name, values = parse_sweep(sweep_text)
        if estimated and name != "kv_cache_memory":
            from kvpure.cli.plan_memory_sweep import memory_sweep_rows, render_memory_sweep

            memory_rows = memory_sweep_rows(
                hf_config, layout, options, name, values, model_folder=model_folder
            )

            def render_rows(as_json: bool) -> str:
                text = render_memory_sweep(name, memory_rows, as_json=as_json)
                if as_json:
                    releases = {"vllm_version": version}
                    if profile is not None:
                        releases["memory_profile_version"] = profile
                    return json.dumps(releases | json.loads(text), indent=2)
                return header + "\n" + text

            return DeploymentPlan(
                vllm_version=version,
                memory_profile_version=profile,
                sweep_name=name,
                sweep_rows=memory_rows,
                _render=_with_note(config, architecture_as, render_rows),
            )
        if name in memory_options or name in MEMORY_SWEEP_ONLY:
            raise InvalidFieldError(
                field="--sweep",
                value=sweep_text,
                reason=f"{name} changes the estimated KV memory; leave out --kv-cache-memory",
            )
        rows, render = _sweep_plan(layout, serve_options, name, values, given_header)
        return DeploymentPlan(
            vllm_version=version,
            sweep_name=name,
            sweep_rows=rows,
            _render=_with_note(config, architecture_as, render),
        )
    if estimated:
        from kvpure.cli.plan_memory import memory_case
        from kvpure.cli.plan_weights import weight_fixes, weights_do_not_fit
        from kvpure.serve.memory import MemoryBand

        case = memory_case(hf_config, layout, options, model_folder=model_folder)
        # The report shows the central estimate; when only the band's high end starts, that end.
        flags = case.central_flags
        if case.outcome.verdict == MemoryBand.MAY_NOT_START and not starts(layout, flags):
            flags = case.high_flags
        weights = (
            weight_fixes(hf_config, layout, options, case, model_folder=model_folder)
            if weights_do_not_fit(case)
            else None
        )
        plan = _verdict_plan(layout, flags, header, memory=case, weights=weights, profile=profile)
    else:
        plan = _verdict_plan(layout, serve_flags_from_options(serve_options), given_header)
    return _noted(plan, config, architecture_as)


def _other_profile(options: Mapping[str, str], version: str) -> str | None:
    """The release whose memory profile is estimated, when it is not ``version``."""
    from kvpure.cli.plan_memory import profile_version

    profile = profile_version(options.get("memory_profile_version"), version)
    same = profile.lstrip("v").split(".")[:2] == version.split(".")[:2]
    return None if same else profile


def _noted(plan: DeploymentPlan, config: object, architecture_as: str | None) -> DeploymentPlan:
    return DeploymentPlan(
        vllm_version=plan.vllm_version,
        memory_profile_version=plan.memory_profile_version,
        serve=plan.serve,
        verdict=plan.verdict,
        settings=plan.settings,
        report=plan.report,
        memory=plan.memory,
        exit_code=plan.exit_code,
        error=plan.error,
        _render=_with_note(config, architecture_as, plan._render),
    )
