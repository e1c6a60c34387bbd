"""Errors of the command line: a required option left out."""

from __future__ import annotations

from kvpure.models.errors import ModelConfigError

__all__ = ["MissingOptionError"]


class MissingOptionError(ModelConfigError):
    """A deployment option that has no default was not given (``option`` names it)."""

    def __init__(self, *, option: str, reason: str) -> None:
        super().__init__(f"{option} is required {reason}")
        self.option = option
        self.reason = reason
