"""Saying in a report that a model was planned by another architecture's rule."""

from __future__ import annotations

import json

from kvpure.models.layout import ModelLayout

__all__ = ["planned_as_note"]


def planned_as_note(layout: ModelLayout, text: str, *, as_json: bool) -> str:
    """``text`` (a report, or its JSON) stating ``--architecture-as`` when it was used.

    The text report gets a first line; the JSON object a ``planned_as`` member
    ``{"architecture": <config.json's>, "rule_of": <the named one>}``.
    """
    if layout.planned_as is None:
        return text
    if as_json:
        data = json.loads(text)
        if isinstance(data, dict):
            data["planned_as"] = {"architecture": layout.architecture, "rule_of": layout.planned_as}
            return json.dumps(data, indent=2)
        return text
    return (
        f"note: {layout.architecture} planned by the rule of {layout.planned_as} "
        "(--architecture-as); check that its layers match\n" + text
    )
