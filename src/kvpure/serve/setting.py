"""One resolved ``vllm serve`` setting: its value and where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Setting", "Source"]


class Source(StrEnum):
    """Where a setting's value came from."""

    FLAG = "flag"
    GPU_DEFAULT = "gpu default"
    MODEL_CONFIG = "model config"
    VLLM_DEFAULT = "vllm default"
    ASSUMED = "assumed (no --gpu: H100-80GB)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One resolved setting: its value (as vLLM's config holds it) and source."""

    value: int | str | bool | float
    source: Source
    note: str = ""
