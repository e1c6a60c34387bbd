"""vLLM releases as values: the names kvpure answers for, and how a name is read.

A release is chosen once, at the edge (``--vllm``, a JSON file's ``"vllm_version"``,
``PlannerSettings.vllm_version``, ``Deployment.vllm_version``), normalised here to
its ``X.Y`` form, and then looked up by each part in its own table of rules
(``kvpure.hashing.scheme.HASH_PROFILES``, the planner's and the cache manager's
rules records...). No module keeps a "current version"; :mod:`kvpure.release`
gathers one release's records into one value.

This module is the bottom of the package: it imports nothing of kvpure but its
errors, so every part can read a version name without an import circle.
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError

KNOWN_VLLM_VERSIONS: tuple[str, ...] = ("0.26", "0.33", "0.34")
"""The releases kvpure reproduces, oldest first, in their ``X.Y`` form."""

DEFAULT_VLLM_VERSION = "0.34"
"""The newest supported release: what every answer follows unless told otherwise."""

_FULL_FORMS: dict[str, str] = {f"{v}.0": v for v in KNOWN_VLLM_VERSIONS}


class UnknownVllmVersionError(InvalidFieldError):
    """A vLLM version kvpure does not reproduce (a ``ValueError``).

    ``value`` is what was given, ``known`` the accepted ``X.Y`` names.
    """

    def __init__(self, *, field: str, value: object) -> None:
        super().__init__(
            field=field,
            value=value,
            reason=f"unknown vLLM version {value!r} (known: {', '.join(KNOWN_VLLM_VERSIONS)})",
        )
        self.known = KNOWN_VLLM_VERSIONS

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


def normalize_vllm_version(value: object, *, field: str = "vllm_version") -> str:
    """``"0.34"`` for ``"0.34"``, ``"0.34.0"`` (and so on for every known release).

    Anything else, a non-string included, raises :class:`UnknownVllmVersionError`
    naming ``field`` and listing the known versions.
    """
    if type(value) is str:
        text = value.strip()
        if text in KNOWN_VLLM_VERSIONS:
            return text
        full = _FULL_FORMS.get(text)
        if full is not None:
            return full
    raise UnknownVllmVersionError(field=field, value=value)


def resolve_vllm_version(
    flag: str | None, file_value: object = None, *, file_field: str = "vllm_version"
) -> str:
    """The release an answer is for: ``--vllm`` > the input file's key > the default."""
    if flag is not None:
        return normalize_vllm_version(flag, field="--vllm")
    if file_value is not None:
        return normalize_vllm_version(file_value, field=file_field)
    return DEFAULT_VLLM_VERSION


def version_at_least(version: str, minimum: str) -> bool:
    """Whether the normalised ``version`` is ``minimum`` or newer (both ``X.Y``)."""
    return _key(normalize_vllm_version(version)) >= _key(minimum)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
