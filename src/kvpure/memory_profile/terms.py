"""One term of a memory budget: its bytes, whether exact, and its error band."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemoryTerm"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTerm:
    """One term of the budget: its bytes, whether exact, and the half-width of its band."""

    bytes: int
    exact: bool
    error_bytes: int = 0

    def to_json(self) -> dict[str, object]:
        """``{"bytes", "exact", "error_bytes"}``."""
        return {"bytes": self.bytes, "exact": self.exact, "error_bytes": self.error_bytes}
