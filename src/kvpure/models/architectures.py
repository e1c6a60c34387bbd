"""config.json -> :class:`~kvpure.models.layout.ModelLayout`, by architecture.

The rules live in :mod:`kvpure.models.families` (one module per family
group); this module keeps the public names where they always were.
"""

from __future__ import annotations

from kvpure.models.families import FAMILY_RULES, SUPPORTED_ARCHITECTURES, model_layout

__all__ = ["FAMILY_RULES", "SUPPORTED_ARCHITECTURES", "model_layout"]
