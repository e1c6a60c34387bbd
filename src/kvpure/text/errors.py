"""Errors of text prompts: a missing optional package, a tokenizer or chat template that fails."""

from __future__ import annotations

from kvpure.errors import KVPureError, KVPureValueError

__all__ = ["ChatTemplateError", "MissingExtraError", "PromptTooLongError", "TokenizerError"]


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


class TokenizerError(KVPureValueError):
    """The tokenizers library failed (or panicked) on a tokenizer file or a text.

    ``where`` names the tokenizer, ``reason`` what was being done and the
    library's own message.
    """

    def __init__(self, *, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class PromptTooLongError(KVPureValueError):
    """A prompt or rendered chat is longer than kvpure tokenizes (``limit`` characters)."""

    def __init__(self, *, where: str, length: int, limit: int) -> None:
        super().__init__(
            f"{where}: the text has {length:,} characters; at most {limit:,} (4 Mi) are "
            "tokenized per prompt"
        )
        self.where = where
        self.length = length
        self.limit = limit
