"""The least-squares fit of :class:`~kvpure.memory_profile.estimate.Coefficients` on logs.

:func:`fit_coefficients` reads the public start-up logs of
:mod:`kvpure.memory_profile.profile_logs` (their ``split`` is not read: pass the
``fit`` records) and returns every coefficient with its error band, the
largest absolute residual on the logs fitted on, rounded up to 0.01 GiB. The
shipped :data:`~kvpure.memory_profile.estimate.COEFFICIENTS` is this fit over
the ``fit`` records of tests/data/memory_logs (a test recomputes it).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.estimate import (
    FIT_TOKENS,
    REFERENCE_GRAPHS,
    Coefficients,
    cudagraph_count,
    ffn_gib,
    logits_gib,
    moe_workspace_gib,
    non_torch_class,
    stage_layers,
)
from kvpure.memory_profile.profile_logs import ProfileLog
from kvpure.memory_profile.releases import memory_profile_rules

__all__ = ["fit_coefficients"]


def _band(residuals: Iterable[float]) -> float:
    worst = max((abs(r) for r in residuals), default=0.0)
    return round(worst + 0.005 + 0.0049, 2)  # the logs' rounding, then up to 0.01 GiB


def _least_squares(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0
    return mean_y - slope * mean_x, slope


@dataclass(frozen=True, slots=True)
class _Row:
    logits: float
    ffn: float
    moe: float
    last_stage: bool
    new_sampler: bool
    activation: float
    tokens: float = 1.0
    moe_persists: bool = True


def _rows(logs: Iterable[ProfileLog]) -> list[_Row]:
    rows = []
    for log in logs:
        if log.activation_gib is None:
            continue
        rows.append(
            _Row(
                logits=logits_gib(log.max_num_seqs, log.shape.vocab_size),
                ffn=ffn_gib(
                    log.max_num_batched_tokens,
                    log.shape.dense_mlp_width,
                    log.tensor_parallel_size,
                ),
                moe=0.0
                if log.quantization == "mxfp4"
                else moe_workspace_gib(
                    log.max_num_batched_tokens, log.shape, log.tensor_parallel_size
                ),
                last_stage=log.pipeline_parallel_size == 1,
                new_sampler=log.flashinfer_sampler
                or not memory_profile_rules(log.vllm_version).large_sampler_peak,
                activation=log.activation_gib,
                tokens=log.max_num_batched_tokens / FIT_TOKENS,
                moe_persists=memory_profile_rules(log.vllm_version).moe_workspace_persists,
            )
        )
    return rows


def _fit_activation(rows: list[_Row]) -> tuple[float, ...]:
    new = [r for r in rows if r.new_sampler and not r.moe]
    best: tuple[float, float, float, float, float] | None = None
    for base_step, step in itertools.product(range(0, 61), range(0, 401)):
        ffn_base, ffn_factor = base_step / 100, step / 100
        sampler_rows = [
            (r.logits if r.last_stage else 0.0, r.activation)
            for r in new
            if r.activation > ffn_base * r.tokens + ffn_factor * r.ffn
        ]
        if len(sampler_rows) < 2:
            continue
        base, factor = _least_squares(sampler_rows)
        error = sum(
            (
                max(
                    base + factor * (r.logits if r.last_stage else 0.0),
                    ffn_base * r.tokens + ffn_factor * r.ffn,
                )
                - r.activation
            )
            ** 2
            for r in new
        )
        if best is None or error < best[0] - 1e-12:
            best = (error, base, factor, ffn_factor, ffn_base)
    if best is None:
        raise InvalidFieldError(
            field="profile logs", value=len(new), reason="need two logs of vLLM >= 0.17 to fit"
        )
    _, base, factor, ffn_factor, ffn_base = best
    old = [(r.activation - base) / r.logits for r in rows if not r.new_sampler and r.last_stage]
    old_factor = statistics.mean(old) if old else factor

    def sampler(r: _Row) -> float:
        return base + (factor if r.new_sampler else old_factor) * (
            r.logits if r.last_stage else 0.0
        )

    def dense(r: _Row) -> float:
        return max(sampler(r), ffn_base * r.tokens + ffn_factor * r.ffn)

    moe_rows = [r for r in rows if r.moe and r.moe_persists]
    # Least squares through the origin of what the dense terms leave unexplained
    # (releases whose fused-MoE workspace persists; before 0.14 it is a temporary).
    moe_factor = (
        sum((r.activation - dense(r)) * r.moe for r in moe_rows) / sum(r.moe**2 for r in moe_rows)
        if moe_rows
        else 0.0
    )

    def predicted(r: _Row) -> float:
        if r.moe_persists:
            return dense(r) + moe_factor * r.moe
        forward = ffn_base * r.tokens + ffn_factor * r.ffn + moe_factor * r.moe
        return max(sampler(r), forward)

    residuals = [predicted(r) - r.activation for r in rows]
    return base, factor, old_factor, ffn_factor, ffn_base, round(moe_factor, 4), _band(residuals)


def fit_coefficients(logs: Iterable[ProfileLog]) -> Coefficients:
    """Least-squares fit of every coefficient on ``logs`` (their ``split`` is not read)."""
    logs = tuple(logs)
    base, factor, old_factor, ffn_factor, ffn_base, moe_factor, activation_band = _fit_activation(
        _rows(logs)
    )
    classes: dict[str, list[float]] = {
        "single": [],
        "single_old": [],
        "fused": [],
        "nccl": [],
        "pp": [],
    }
    for log in logs:
        if log.non_torch_gib is None:
            continue
        rules = memory_profile_rules(log.vllm_version)
        key = non_torch_class(
            log.tensor_parallel_size, log.pipeline_parallel_size, rules, log.compute_capability
        )
        classes[key].append(log.non_torch_gib)
    medians = {k: round(statistics.median(v), 4) if v else 0.0 for k, v in classes.items()}
    nt_band = _band(v - medians[k] for k, values in classes.items() for v in values)
    graph_logs = [log for log in logs if log.cuda_graph_gib is not None]
    per_layer = [
        (log.cuda_graph_gib or 0.0)
        / stage_layers(log.shape, log.pipeline_parallel_size)
        / (cudagraph_count(log.max_num_seqs, log.max_num_batched_tokens) / REFERENCE_GRAPHS)
        for log in graph_logs
    ]
    graph = round(statistics.median(per_layer), 5) if per_layer else 0.0
    graphs = [
        (log.cuda_graph_gib or 0.0)
        - graph * stage_layers(log.shape, log.pipeline_parallel_size)
        + graph
        for log in graph_logs
    ]
    return Coefficients(
        activation_base=round(base, 4),
        logits_factor=round(factor, 4),
        logits_factor_before_0_17=round(old_factor, 4),
        ffn_factor=ffn_factor,
        ffn_base=ffn_base,
        moe_factor=moe_factor,
        activation_band=activation_band,
        non_torch_single=medians["single"],
        non_torch_single_before_0_18=medians["single_old"],
        non_torch_tensor_parallel=medians["fused"],
        non_torch_tensor_parallel_nccl_only=medians["nccl"],
        non_torch_pipeline=medians["pp"],
        non_torch_band=nt_band,
        cuda_graph_per_layer=graph,
        cuda_graph_band=_band(g - graph for g in graphs),
    )
