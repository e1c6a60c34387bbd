"""``kvpure cache ... --gpu NAME`` without ``--kv-cache-memory``: the memory estimated.

The KV cache memory is estimated from the GPU exactly as ``kvpure plan MODEL
--gpu NAME`` estimates it (:func:`kvpure.cli.plan_api.kv_memory_band_from_options`),
and the workload is replayed once per end of the estimate's band: the report
is the central figure's, with the hit rates at the low and high ends beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kvpure.cache.workload import WorkloadReport
from kvpure.cli.errors import MissingOptionError
from kvpure.cli.plan_api import KVMemoryBand, kv_memory_band_from_options
from kvpure.cli.plan_memory import MEMORY_OPTIONS, split_memory_options
from kvpure.cli.serve_options import VLLM_OPTION
from kvpure.errors import InvalidFieldError

__all__ = [
    "BAND_ENDS",
    "BandReport",
    "band_to_json",
    "check_memory_source",
    "estimate_band",
    "format_band",
]

#: The ends of the band, in the order they are replayed (the central figure first).
BAND_ENDS: Final = ("central", "low", "high")
_GIB: Final = 1024**3


def check_memory_source(options: Mapping[str, str], *, sweep: bool) -> bool:
    """Whether the KV memory is to be estimated from the GPU; a missing source is an error.

    ``options`` are the command's option texts (memory-estimate options
    included); ``sweep``: --sweep-memory names the figures itself.
    """
    _, memory = split_memory_options(options)
    given = "kv_cache_memory" in options or sweep
    if given:
        if memory:
            name = sorted(memory)[0]
            flag = next(o.flags[0] for o in MEMORY_OPTIONS if o.name == name)
            raise InvalidFieldError(
                field=flag,
                value=memory[name],
                reason="shapes the memory estimate only: leave out --kv-cache-memory and "
                "--sweep-memory to estimate it from --gpu",
            )
        return False
    if "gpu" not in options and "gpu_memory" not in options:
        raise MissingOptionError(
            option="--kv-cache-memory",
            reason="(or a GPU to estimate it from): give vLLM's 'Available KV cache memory' "
            "(--kv-cache-memory 24GiB) or the GPU (--gpu H100-80GB, or --gpu-memory 79.19GiB)",
        )
    return True


def estimate_band(
    config: object,
    options: Mapping[str, str],
    vllm: str | None,
    *,
    model_folder: Path | None,
) -> KVMemoryBand:
    """The band ``kvpure plan CONFIG [options] --vllm VLLM --json`` plans at (per worker)."""
    return kv_memory_band_from_options(
        config, {**options, VLLM_OPTION: vllm} if vllm else dict(options), model_folder=model_folder
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BandReport:
    """The hit rate at each end of the memory band (None: that end cannot be served)."""

    band: KVMemoryBand
    low: WorkloadReport | str
    high: WorkloadReport | str


def _rate(report: WorkloadReport | str) -> float | None:
    return None if isinstance(report, str) else round(report.actual.hit_rate, 6)


def band_to_json(result: BandReport) -> dict[str, Any]:
    """``kv_cache_memory_estimate`` (bytes per worker) and ``hit_rate_band`` [low, high]."""
    band = result.band
    data: dict[str, Any] = {
        "kv_cache_memory_estimate": {
            "low": list(band.low),
            "central": list(band.central),
            "high": list(band.high),
            "gpu_memory_utilization": band.gpu_memory_utilization,
            "estimated": True,
        },
        "hit_rate_band": [_rate(result.low), _rate(result.high)],
    }
    unserved = {
        end: r for end, r in (("low", result.low), ("high", result.high)) if isinstance(r, str)
    }
    if unserved:
        data["hit_rate_band_unserved"] = unserved
    return data


def _gib(figures: tuple[int, ...]) -> str:
    return ",".join(f"{f / _GIB:.2f}" for f in figures)


def _end(report: WorkloadReport | str) -> str:
    return (
        f"cannot be served ({report})"
        if isinstance(report, str)
        else (f"{report.actual.hit_rate:.1%}")
    )


def format_band(result: BandReport, central: WorkloadReport) -> str:
    """Two lines: the memory estimate's band and the hit rate's."""
    band = result.band
    return "\n".join(
        [
            f"KV cache memory:      {_gib(band.central)} GiB per GPU, estimated from the GPU "
            f"(band {_gib(band.low)} to {_gib(band.high)} GiB)",
            f"hit rate band:        {central.actual.hit_rate:.1%} (low end {_end(result.low)}, "
            f"high end {_end(result.high)})",
        ]
    )
