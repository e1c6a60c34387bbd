"""What ``kvpure plan CONFIG.json [options]`` prints: the verdict, the settings, the report.

The options arrive as text (by option name) and are read here into typed
:class:`~kvpure.serve.flags.ServeFlags`; :mod:`kvpure.serve` resolves vLLM
0.26's defaults from them and the report package only ever sees the
resulting :class:`~kvpure.models.deployment.Deployment`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kvpure.cli.plan_options import parse_sweep
from kvpure.cli.serve_options import serve_flags_from_options
from kvpure.errors import KVPureError
from kvpure.interop.planning import render_error
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import capacity_report, sweep
from kvpure.report.text import render_report, render_sweep, report_to_json
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.serve.output import final_settings, render_serve_header, serve_json
from kvpure.serve.verdict import serve_verdict

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
    if not as_json:
        return render_sweep(name, rows)
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
    return json.dumps(data, indent=2)


def config_report(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None,
    as_json: bool,
    architecture_as: str | None = None,
) -> tuple[str, int, KVPureError | None]:
    """What ``kvpure plan CONFIG.json [options]`` prints, its exit code, and the failure.

    Bad input (the config, an option) raises. When vLLM would not start, the
    text is the verdict with the flags that would make it start, the code
    is 2, and the planner's error (vLLM's message) is returned for the caller
    to print as the one error line; with ``as_json`` the error is inside the
    JSON (``{"error", "verdict", "settings", ...}``). ``architecture_as``
    plans the model by a listed architecture's rule (``--architecture-as``).
    """
    layout = model_layout(parse_model_config(config), architecture_as=architecture_as)
    if sweep_text is not None:
        return _sweep(layout, options, sweep_text, as_json), 0, None
    serve, verdict, planned = serve_verdict(layout, serve_flags_from_options(options))
    if planned is None:
        settings = final_settings(serve, None)
        if as_json:
            failure = verdict.error
            data: dict[str, object] = {} if failure is None else {"error": render_error(failure)}
            data |= serve_json(serve, verdict, settings)
            return json.dumps(data, indent=2), 2, None
        return render_serve_header(serve, verdict, settings), 2, verdict.error
    report = capacity_report(layout, serve.deployment)
    settings = final_settings(serve, report)
    if as_json:
        data = serve_json(serve, verdict, settings) | report_to_json(report)
        return json.dumps(data, indent=2), 0, None
    header = render_serve_header(serve, verdict, settings)
    return header + "\n\n" + render_report(report), 0, None


def config_report_output(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None,
    as_json: bool,
    architecture_as: str | None = None,
) -> tuple[str, int]:
    """:func:`config_report` for callers that want the failure raised."""
    text, code, failure = config_report(
        config, options, sweep_text=sweep_text, as_json=as_json, architecture_as=architecture_as
    )
    if failure is not None:
        raise failure
    return text, code
