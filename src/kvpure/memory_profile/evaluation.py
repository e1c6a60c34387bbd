"""The estimate's error on logs: predicted against logged KV cache memory.

For each log with weights and KV memory (logged, or rebuilt from the logged
terms where the source prints the terms only: ``total x utilization -
weights - activation - non-torch``), the KV memory is predicted from the
logged weights (the term kvpure computes exactly from the checkpoint's
headers) and the fitted terms, so the error measured is the estimate's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from kvpure.memory_profile.estimate import (
    Coefficients,
    activation_gib,
    cuda_graph_gib,
    non_torch_band_gib,
    non_torch_gib,
)
from kvpure.memory_profile.mm_profile import uncharged_outputs_bytes
from kvpure.memory_profile.profile_logs import GIB, ProfileLog
from kvpure.memory_profile.releases import memory_profile_rules, parse_version

__all__ = [
    "ErrorSummary",
    "KVError",
    "cuda_graph_errors",
    "error_table",
    "kv_errors",
    "render_error_table",
    "summarize",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KVError:
    """One log's predicted and logged KV memory (GiB) and the predicted band's half-width."""

    name: str
    predicted_gib: float
    logged_gib: float
    band_gib: float
    band_below_gib: float = 0.0
    """How much further the logged figure may fall below the prediction: the encoder
    outputs a multimodal start-up keeps that are not charged (``mm_profile``)."""
    release: str = ""
    """The rules range of the log's vLLM version (``0.24-0.25``...)."""
    gpu: str = ""

    @property
    def error_gib(self) -> float:
        """Predicted minus logged."""
        return self.predicted_gib - self.logged_gib

    @property
    def within_band(self) -> bool:
        """Whether the logged figure lies in the predicted range (0.005 GiB of print rounding)."""
        error = self.error_gib
        return -self.band_gib - 0.005 <= error <= self.band_gib + self.band_below_gib + 0.005


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Absolute KV errors over a set of logs (GiB)."""

    count: int
    median: float
    p90: float
    max: float
    within_band: int
    median_band: float = 0.0
    """The median half-width of the predicted bands (GiB)."""


def _logged_kv(log: ProfileLog) -> float | None:
    if log.kv_cache_gib is not None:
        return log.kv_cache_gib
    terms = (log.weights_gib, log.activation_gib, log.non_torch_gib)
    if any(t is None for t in terms):
        return None
    requested = math.ceil(log.total_gpu_memory_gib * GIB * log.gpu_memory_utilization) / GIB
    return round(requested - sum(t for t in terms if t is not None), 2)


def kv_errors(logs: Iterable[ProfileLog], coef: Coefficients) -> tuple[KVError, ...]:
    """Predicted against logged KV memory for every log that states both."""
    out = []
    for log in logs:
        logged = _logged_kv(log)
        if logged is None or log.weights_gib is None:
            continue
        rules = memory_profile_rules(log.vllm_version)
        tp, pp = log.tensor_parallel_size, log.pipeline_parallel_size
        v2 = rules.runs_model_runner_v2(
            architectures=(log.architecture,) if log.architecture else (),
            moe=log.shape.num_experts > 0,
            quantized=log.quantization != "none",
        )
        activation = activation_gib(
            coef,
            log.shape,
            max_num_batched_tokens=log.max_num_batched_tokens,
            max_num_seqs=log.max_num_seqs,
            tp=tp,
            last_stage=pp == 1,
            rules=rules,
            dtype_bytes=log.dtype_bytes,
            quantization=log.quantization,
            flashinfer_sampler=log.flashinfer_sampler,
            model_runner_v2=v2,
        )
        subtract = rules.subtracts_cuda_graphs(rocm=False, model_runner_v2=v2)
        subtract = subtract and not log.enforce_eager
        graph = (
            cuda_graph_gib(
                coef,
                log.shape,
                pp=pp,
                max_num_seqs=log.max_num_seqs,
                max_num_batched_tokens=log.max_num_batched_tokens,
            )
            if subtract
            else 0.0
        )
        cap = log.compute_capability
        nt_band = non_torch_band_gib(coef, tp=tp, pp=pp, rules=rules, capability=cap)
        bands = [coef.activation_band, nt_band]
        bands += [coef.cuda_graph_band] if subtract else []
        band = math.sqrt(sum(b * b for b in bands)) + rules.thin_data_band_gib
        requested = math.ceil(log.total_gpu_memory_gib * GIB * log.gpu_memory_utilization) / GIB
        non_torch = non_torch_gib(coef, tp=tp, pp=pp, rules=rules, capability=cap)
        outputs, below = _encoder_outputs_gib(log, parse_version(log.vllm_version))
        predicted = requested - log.weights_gib - activation - outputs - non_torch
        out.append(
            KVError(
                name=log.name,
                predicted_gib=predicted - graph,
                logged_gib=logged,
                band_gib=band,
                band_below_gib=below,
                release=rules.releases,
                gpu=log.gpu,
            )
        )
    return tuple(out)


def _encoder_outputs_gib(log: ProfileLog, version: tuple[int, int]) -> tuple[float, float]:
    """``(charged, band_below)`` GiB of encoder output the log's profile keeps."""
    width = log.encoder_output_width
    if not width:
        return 0.0, 0.0
    if log.encoder_batch is not None:
        return log.encoder_batch.kept_rows(version) * width * log.dtype_bytes / GIB, 0.0
    below = uncharged_outputs_bytes(
        width,
        deepstack=log.encoder_deepstack,
        version=version,
        max_num_batched_tokens=log.max_num_batched_tokens,
        dtype_bytes=log.dtype_bytes,
    )
    return 0.0, below / GIB


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def summarize(errors: Iterable[KVError]) -> ErrorSummary:
    """Median, 90th percentile (nearest rank) and maximum of the absolute errors."""
    errors = tuple(errors)
    absolute = [abs(e.error_gib) for e in errors]
    return ErrorSummary(
        count=len(errors),
        median=statistics.median(absolute),
        p90=_p90(absolute),
        max=max(absolute),
        within_band=sum(e.within_band for e in errors),
        median_band=statistics.median(e.band_gib for e in errors),
    )


def cuda_graph_errors(logs: Iterable[ProfileLog], coef: Coefficients) -> tuple[float, ...]:
    """Estimated minus logged ``Estimated CUDA graph memory`` for every log that prints it."""
    return tuple(
        cuda_graph_gib(
            coef,
            log.shape,
            pp=log.pipeline_parallel_size,
            max_num_seqs=log.max_num_seqs,
            max_num_batched_tokens=log.max_num_batched_tokens,
        )
        - log.cuda_graph_gib
        for log in logs
        if log.cuda_graph_gib is not None
    )


def error_table(errors: Iterable[KVError]) -> tuple[tuple[str, str, ErrorSummary], ...]:
    """One summary per (vLLM release range, GPU), then per release range, then per GPU.

    Rows are ``(release, gpu, summary)``; ``"all"`` marks the dimension summed over.
    """
    errors = tuple(errors)
    keys = sorted({(e.release, e.gpu) for e in errors})
    rows = [(r, g, summarize(e for e in errors if (e.release, e.gpu) == (r, g))) for r, g in keys]
    releases = sorted({e.release for e in errors})
    gpus = sorted({e.gpu for e in errors})
    if len(keys) > 1:
        rows += [(r, "all", summarize(e for e in errors if e.release == r)) for r in releases]
        rows += [("all", g, summarize(e for e in errors if e.gpu == g)) for g in gpus]
    rows.append(("all", "all", summarize(errors)))
    return tuple(rows)


def render_error_table(errors: Iterable[KVError]) -> str:
    """:func:`error_table` as the Markdown table docs/memory-profile.md prints."""
    lines = [
        "| vLLM | GPU | logs | median abs error (GiB) | p90 | max | inside the band "
        "| median band half-width |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for release, gpu, s in error_table(errors):
        lines.append(
            f"| {release} | {gpu} | {s.count} | {s.median:.2f} | {s.p90:.2f} | {s.max:.2f} | "
            f"{s.within_band} of {s.count} | {s.median_band:.2f} |"
        )
    return "\n".join(lines)
