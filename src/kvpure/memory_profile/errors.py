"""Errors of the memory profile: unreadable weight files and unsupported settings."""

from __future__ import annotations

from kvpure.errors import KVPureValueError

__all__ = ["WeightFileError"]


class WeightFileError(KVPureValueError):
    """A safetensors file or index cannot be read as vLLM would read it.

    ``path`` names the file, ``reason`` what is wrong and how to fix it.
    """

    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
