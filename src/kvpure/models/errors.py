"""Errors of the model-config reader: a config.json that cannot become specs."""

from __future__ import annotations

from kvpure.errors import KVPureValueError

__all__ = [
    "MissingConfigFieldError",
    "ModelConfigError",
    "ModelNotCachedError",
    "UnknownArchitectureError",
]


class ModelConfigError(KVPureValueError):
    """A model's config.json cannot be turned into per-layer KV cache specs."""


class UnknownArchitectureError(ModelConfigError):
    """config.json names an architecture kvpure has no layer rules for.

    ``architecture`` is what config.json gave (its ``architectures`` list,
    joined) or what ``--architecture-as`` named (``field``), and ``supported``
    lists every architecture kvpure knows.
    """

    def __init__(
        self, *, architecture: str, supported: tuple[str, ...], field: str = "config.json"
    ) -> None:
        hint = (
            "; name one of these"
            if field != "config.json"
            else "; to plan a close relative by a known architecture's rule, pass "
            "--architecture-as ARCH (e.g. --architecture-as LlamaForCausalLM)"
        )
        super().__init__(
            f"{field}: unknown architecture {architecture!r}; supported: "
            + ", ".join(supported)
            + hint
        )
        self.architecture = architecture
        self.supported = supported
        self.field = field


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


class ModelNotCachedError(ModelConfigError):
    """A model named by its hub id is not in the local Hugging Face cache.

    kvpure never downloads: ``looked`` lists every path it tried, and the
    message says how to get the model there (or to pass its config.json).
    """

    def __init__(self, *, model: str, looked: tuple[str, ...], hint: str = "") -> None:
        advice = hint or (
            "download it first (hf download "
            f"{model.split('@', 1)[0]} config.json) or pass its config.json"
        )
        super().__init__(
            f"{model}: not in the local Hugging Face cache (looked at "
            + ", ".join(looked)
            + f"); {advice}; kvpure never downloads"
        )
        self.model = model
        self.looked = looked
