"""A worker's memory budget as vLLM's start-up profile would log it.

:func:`estimate_memory_budget` takes a model's config.json (and optionally
its safetensors headers), the GPU's total memory as vLLM reports it
(``torch.cuda.mem_get_info``: 79.19 GiB on an H100 80GB), the serve settings
and the parallel layout, and returns one frozen :class:`MemoryBudget` per
worker (rank order). Each term says whether it is exact and, if not, its
error band; the KV cache carries the sum of the bands as its range.
:func:`render_vllm_log` prints a budget with vLLM's wording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvpure.errors import InvalidFieldError, format_gib
from kvpure.field_checks import check_int
from kvpure.memory_profile.checkpoint_tensors import language_config
from kvpure.memory_profile.estimate import (
    COEFFICIENTS,
    FITTED_VERSIONS,
    Coefficients,
    activation_gib,
    cuda_graph_subtracted,
    non_torch_gib,
    parse_version,
)
from kvpure.memory_profile.profile_logs import GIB, ModelShape
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import worker_weights
from kvpure.models.config import HFConfig

__all__ = [
    "MemoryBudget",
    "MemoryTerm",
    "ServeSettings",
    "estimate_memory_budget",
    "render_vllm_log",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTerm:
    """One term of the budget: its bytes, whether exact, and the half-width of its band."""

    bytes: int
    exact: bool
    error_bytes: int = 0

    def to_json(self) -> dict[str, object]:
        """``{"bytes", "exact", "error_bytes"}``."""
        return {"bytes": self.bytes, "exact": self.exact, "error_bytes": self.error_bytes}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """The ``vllm serve`` settings the memory profile depends on."""

    total_gpu_bytes: int
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    dtype: str = "auto"
    quantization: str | None = None
    vllm_version: str = "0.26.0"

    def __post_init__(self) -> None:
        check_int("total_gpu_bytes", self.total_gpu_bytes, minimum=1)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, minimum=1)
        check_int("max_num_seqs", self.max_num_seqs, minimum=1)
        util = self.gpu_memory_utilization
        if isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1:
            raise InvalidFieldError(
                field="gpu_memory_utilization", value=util, reason="must be in (0, 1]"
            )
        parse_version(self.vllm_version)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBudget:
    """One worker's start-up memory profile.

    ``kv_cache_bytes`` is vLLM's "Available KV cache memory".
    """

    worker: int
    total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights: MemoryTerm
    activation: MemoryTerm
    non_torch: MemoryTerm
    cuda_graph: MemoryTerm
    cuda_graph_subtracted: bool
    kv_cache_bytes: int
    kv_cache_bytes_low: int
    kv_cache_bytes_high: int
    vllm_version: str
    fitted_versions: str

    @property
    def weights_bytes(self) -> int:
        """``Model loading took ... GiB``."""
        return self.weights.bytes

    @property
    def activation_bytes(self) -> int:
        """``torch peak memory increase``."""
        return self.activation.bytes

    @property
    def non_torch_bytes(self) -> int:
        """``non-torch forward increase memory``."""
        return self.non_torch.bytes

    @property
    def cuda_graph_bytes(self) -> int:
        """``Estimated CUDA graph memory`` (subtracted only where ``cuda_graph_subtracted``)."""
        return self.cuda_graph.bytes

    def to_json(self) -> dict[str, object]:
        """The ``memory`` object of ``kvpure plan --json`` for this worker."""
        terms = {
            "weights": self.weights,
            "activation": self.activation,
            "non_torch": self.non_torch,
            "cuda_graph": self.cuda_graph,
        }
        out: dict[str, object] = {
            "worker": self.worker,
            "total_bytes": self.total_bytes,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "requested_bytes": self.requested_bytes,
        }
        for name, term in terms.items():
            out[f"{name}_bytes"] = term.bytes
        out["cuda_graph_subtracted"] = self.cuda_graph_subtracted
        out["kv_cache_bytes"] = self.kv_cache_bytes
        out["kv_cache_bytes_low"] = self.kv_cache_bytes_low
        out["kv_cache_bytes_high"] = self.kv_cache_bytes_high
        out["terms"] = {
            name: {"exact": t.exact, "error_bytes": t.error_bytes} for name, t in terms.items()
        }
        out["vllm_version"] = self.vllm_version
        out["fitted_versions"] = self.fitted_versions
        return out


def model_shape(config: HFConfig) -> ModelShape:
    """The config.json sizes the fitted terms read (MoE: the routed experts' size)."""
    cfg = language_config(config)
    inter = cfg.int_("intermediate_size", 0)
    experts = next(
        (
            cfg.int_(k)
            for k in ("n_routed_experts", "num_local_experts", "num_experts")
            if cfg.has(k)
        ),
        0,
    )
    if cfg.has("moe_intermediate_size") and not inter:
        inter = cfg.int_("moe_intermediate_size")
    return ModelShape(
        vocab_size=cfg.int_("vocab_size", minimum=1),
        hidden_size=cfg.int_("hidden_size", minimum=1),
        intermediate_size=inter or cfg.int_("hidden_size", minimum=1) * 4,
        num_hidden_layers=cfg.int_("num_hidden_layers", minimum=1),
        num_experts=experts,
        num_experts_per_tok=cfg.int_("num_experts_per_tok", 0) if experts else 0,
        moe_intermediate_size=cfg.int_("moe_intermediate_size", inter) if experts else 0,
    )


_ONE_GPU = Parallelism()


def _gib_term(gib: float, band_gib: float) -> MemoryTerm:
    return MemoryTerm(bytes=round(gib * GIB), exact=False, error_bytes=round(band_gib * GIB))


def estimate_memory_budget(
    config: HFConfig,
    settings: ServeSettings,
    parallel: Parallelism = _ONE_GPU,
    *,
    tensors: tuple[TensorInfo, ...] | None = None,
    coefficients: Coefficients = COEFFICIENTS,
) -> tuple[MemoryBudget, ...]:
    """Every worker's budget (rank order: pipeline-major, as vLLM numbers ranks)."""
    version = parse_version(settings.vllm_version)
    weights = worker_weights(
        config, parallel, dtype=settings.dtype, quantization=settings.quantization, tensors=tensors
    )
    shape = model_shape(config)
    requested = math.ceil(settings.total_gpu_bytes * settings.gpu_memory_utilization)
    subtract = cuda_graph_subtracted(version)
    graph = _gib_term(coefficients.cuda_graph, coefficients.cuda_graph_band)
    non_torch = _gib_term(
        non_torch_gib(coefficients, tp=parallel.tp, pp=parallel.pp), coefficients.non_torch_band
    )
    budgets = []
    for worker, weight_bytes in enumerate(weights.bytes_per_worker):
        last_stage = worker // parallel.tp == parallel.pp - 1
        activation = _gib_term(
            activation_gib(
                coefficients,
                shape,
                max_num_batched_tokens=settings.max_num_batched_tokens,
                max_num_seqs=settings.max_num_seqs,
                tp=parallel.tp,
                last_stage=last_stage,
                version=version,
            ),
            coefficients.activation_band,
        )
        weight = MemoryTerm(
            bytes=weight_bytes, exact=weights.exact, error_bytes=weights.error_bytes(worker)
        )
        used = (weight, activation, non_torch) + ((graph,) if subtract else ())
        kv = requested - sum(t.bytes for t in used)
        band = sum(t.error_bytes for t in used)
        budgets.append(
            MemoryBudget(
                worker=worker,
                total_bytes=settings.total_gpu_bytes,
                gpu_memory_utilization=settings.gpu_memory_utilization,
                requested_bytes=requested,
                weights=weight,
                activation=activation,
                non_torch=non_torch,
                cuda_graph=graph,
                cuda_graph_subtracted=subtract,
                kv_cache_bytes=kv,
                kv_cache_bytes_low=kv - band,
                kv_cache_bytes_high=kv + band,
                vllm_version=settings.vllm_version,
                fitted_versions=FITTED_VERSIONS,
            )
        )
    return tuple(budgets)


def _mark(term: MemoryTerm) -> str:
    return "exact" if term.exact else f"estimated, +/- {format_gib(term.error_bytes)} GiB"


def render_vllm_log(budget: MemoryBudget) -> str:
    """The budget in the words vLLM's start-up log uses, each term marked exact or estimated."""
    graph_note = "subtracted" if budget.cuda_graph_subtracted else "not subtracted before vLLM 0.21"
    lines = [
        f"worker {budget.worker}: total_gpu_memory ({format_gib(budget.total_bytes)}GiB) x "
        f"gpu_memory_utilization ({budget.gpu_memory_utilization:.2f}) = "
        f"{format_gib(budget.requested_bytes)}GiB",
        f"Model loading took {format_gib(budget.weights_bytes)} GiB memory "
        f"({_mark(budget.weights)})",
        f"torch peak memory increase: {format_gib(budget.activation_bytes)}GiB "
        f"({_mark(budget.activation)})",
        f"non-torch forward increase memory: {format_gib(budget.non_torch_bytes)}GiB "
        f"({_mark(budget.non_torch)})",
        f"Estimated CUDA graph memory: {format_gib(budget.cuda_graph_bytes)} GiB total "
        f"({_mark(budget.cuda_graph)}; {graph_note})",
        f"Available KV cache memory: {format_gib(budget.kv_cache_bytes)} GiB "
        f"(range {format_gib(budget.kv_cache_bytes_low)} to "
        f"{format_gib(budget.kv_cache_bytes_high)} GiB; fitted for vLLM {budget.fitted_versions})",
    ]
    return "\n".join(lines)
