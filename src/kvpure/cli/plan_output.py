"""What ``kvpure plan CONFIG.json [options]`` prints: the report as text or JSON.

The deployment options arrive as text (by option name) and are read here
into typed :class:`~kvpure.models.deployment.Deployment` values; the report
package only ever sees those.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kvpure.cli.plan_options import deployment_from_options, parse_sweep
from kvpure.errors import InvalidFieldError, KVPureError
from kvpure.interop.planning import render_error
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.errors import ModelConfigError
from kvpure.report.model_plan import capacity_report, sweep
from kvpure.report.text import render_report, render_sweep, report_to_json

__all__ = ["config_report_output"]


def config_report_output(
    config: object,
    options: Mapping[str, str],
    *,
    sweep_text: str | None,
    as_json: bool,
    architecture_as: str | None = None,
) -> tuple[str, int]:
    """What ``kvpure plan CONFIG.json [options]`` prints, and its exit code.

    Bad input (the config, an option) raises. A deployment the planner
    refuses (not enough memory, ...) raises too, except with ``as_json``,
    which prints ``{"error": {"type", "vllm_type", "message"}}`` and exits 2,
    as for planning cases.
    """
    layout = model_layout(parse_model_config(config), architecture_as=architecture_as)
    if sweep_text is not None:
        name, values = parse_sweep(sweep_text)
        deployments = [
            (value, deployment_from_options({**options, name: value})) for value in values
        ]
        rows = sweep(layout, deployments)
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
