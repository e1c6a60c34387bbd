"""Errors of text prompts: a missing optional package, a tokenizer or chat template that fails."""

from __future__ import annotations

from kvpure.errors import KVPureError, KVPureValueError

__all__ = ["ChatTemplateError", "MissingExtraError"]


class MissingExtraError(KVPureError, ImportError):
    """A feature needs an optional package that is not installed.

    ``feature`` names what was asked for (``--tokenizer``), ``package`` the
    missing import and ``extra`` the kvpure extra that installs it.
    """

    def __init__(self, *, feature: str, package: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs the {package} package, which is not installed: "
            f"pip install 'kvpure[{extra}]'"
        )
        self.feature = feature
        self.package = package
        self.extra = extra


class ChatTemplateError(KVPureValueError):
    """A chat template is missing, does not parse, or failed on some messages.

    ``where`` names the input (a workload line or the tokenizer folder) and
    ``reason`` what went wrong, with the template's own message where it
    raised one (``raise_exception``).
    """

    def __init__(self, *, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason
