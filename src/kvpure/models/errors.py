"""Errors of the model-config reader: a config.json that cannot become specs."""

from __future__ import annotations

from kvpure.errors import KVPureValueError

__all__ = ["MissingConfigFieldError", "ModelConfigError", "UnknownArchitectureError"]


class ModelConfigError(KVPureValueError):
    """A model's config.json cannot be turned into per-layer KV cache specs."""


class UnknownArchitectureError(ModelConfigError):
    """config.json names an architecture kvpure has no layer rules for.

    ``architecture`` is what config.json gave (its ``architectures`` list,
    joined) and ``supported`` lists every architecture kvpure knows.
    """

    def __init__(self, *, architecture: str, supported: tuple[str, ...]) -> None:
        super().__init__(
            f"config.json: unknown architecture {architecture!r}; supported: "
            + ", ".join(supported)
        )
        self.architecture = architecture
        self.supported = supported


class MissingConfigFieldError(ModelConfigError):
    """config.json lacks a field the architecture's layer rules need.

    ``field`` names it (dotted for nested configs, e.g. ``text_config.head_dim``)
    and ``architecture`` is the architecture that needs it.
    """

    def __init__(self, *, field: str, architecture: str) -> None:
        super().__init__(
            f"config.json: missing field {field!r}, which {architecture} needs; "
            "add it to the config"
        )
        self.field = field
        self.architecture = architecture
