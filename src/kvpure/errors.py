"""The kvpure exception tree.

Every error kvpure raises derives from :class:`KVPureError`. Each leaf also
derives from the stdlib exception vLLM raises in the same situation, so code
written against vLLM keeps catching what it caught before. Where vLLM raises
``AssertionError`` for a user mistake, kvpure raises a ``ValueError`` subclass.

The inputs that caused an error are attributes of it (callers never parse the
message), and every error pickles with those attributes intact.

::

    KVPureError
    ├── KVPureValueError (ValueError)
    │   ├── InvalidFieldError            a field of an input value is out of range
    │   └── ... (the areas below add their leaves)
    ├── KVPureNotImplementedError (NotImplementedError)
    └── KVPureRuntimeError (RuntimeError)

Each area of the library keeps its leaves in its own section below.
"""

from __future__ import annotations

from typing import Any


def _rebuild(cls: type[KVPureError], args: tuple[Any, ...], state: dict[str, Any]) -> KVPureError:
    """Recreate an error without calling its keyword-only ``__init__``."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class KVPureError(Exception):
    """Root of every error raised by kvpure."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))

    @property
    def message(self) -> str:
        """The human-readable message (the first argument)."""
        return str(self.args[0]) if self.args else ""


class KVPureValueError(KVPureError, ValueError):
    """A value is wrong (vLLM raises ValueError or AssertionError here)."""


class KVPureNotImplementedError(KVPureError, NotImplementedError):
    """vLLM does not support this combination (vLLM raises NotImplementedError)."""


class KVPureRuntimeError(KVPureError, RuntimeError):
    """A state-dependent operation failed (vLLM raises RuntimeError)."""


class InvalidFieldError(KVPureValueError):
    """A field of an input value is missing, of the wrong kind, or out of range.

    ``field`` names it (dotted for nested values), ``value`` is what was given
    and ``reason`` says what was expected.
    """

    def __init__(self, *, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}: {reason} (got {value!r})")
        self.field = field
        self.value = value
        self.reason = reason


# ---------------------------------------------------------------------------
# Hashing errors
# ---------------------------------------------------------------------------
# (owned by the hashing area)


# ---------------------------------------------------------------------------
# Spec and planning errors
# ---------------------------------------------------------------------------
# (owned by the planning area)


# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------
# (owned by the free-queue area)


# ---------------------------------------------------------------------------
# GPU adapter errors
# ---------------------------------------------------------------------------
# (owned by kvpure_gpu; errors that need no torch live here)


# ---------------------------------------------------------------------------
# Interop and model-config errors
# ---------------------------------------------------------------------------
# (owned by interop and the model-config reader)

# --- model-config reader (kvpure.models) -----------------------------------


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
