"""Saying in a report that a model was planned by another architecture's rule."""

from __future__ import annotations

import json

__all__ = ["planned_as_note"]


def planned_as_note(config: object, rule_of: str | None, text: str, *, as_json: bool) -> str:
    """``text`` (a report, or its JSON) stating ``--architecture-as`` when it was used.

    ``config`` is the parsed config.json (its first ``architectures`` entry is
    the model's own name). The text report gets a first line; the JSON object
    a ``planned_as`` member ``{"architecture": <config.json's>, "rule_of": <the
    named one>}``.
    """
    if rule_of is None:
        return text
    names = config.get("architectures") if isinstance(config, dict) else None
    own = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else "?"
    if as_json:
        data = json.loads(text)
        if isinstance(data, dict):
            data["planned_as"] = {"architecture": own, "rule_of": rule_of}
            return json.dumps(data, indent=2)
        return text
    return (
        f"note: {own} planned by the rule of {rule_of} (--architecture-as); "
        "check that its layers match\n" + text
    )
