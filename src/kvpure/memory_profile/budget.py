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

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.memory_profile.checkpoint_tensors import language_config
from kvpure.memory_profile.estimate import (
    COEFFICIENTS,
    FITTED_VERSIONS,
    Coefficients,
    activation_gib,
    cuda_graph_gib,
    non_torch_band_gib,
    non_torch_gib,
)
from kvpure.memory_profile.extensible import extensible_kv_cache_bytes
from kvpure.memory_profile.mm_profile import encoder_outputs_bytes
from kvpure.memory_profile.model_traits import dense_mlp_width
from kvpure.memory_profile.profile_logs import GIB, ModelShape
from kvpure.memory_profile.releases import (
    MemoryProfileRules,
    memory_profile_rules,
    parse_version,
)
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.terms import MemoryTerm
from kvpure.memory_profile.unmodelled import refuse_unmodelled_memory
from kvpure.memory_profile.weights import (
    checkpoint_quantization,
    served_dtype_bytes,
    worker_weights,
)
from kvpure.models.config import HFConfig
from kvpure.versions import DEFAULT_VLLM_VERSION

__all__ = [
    "MemoryBudget",
    "MemoryTerm",
    "ServeSettings",
    "estimate_memory_budget",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """The ``vllm serve`` settings the memory profile depends on.

    ``gpu_memory_utilization=None`` is vLLM's unset value: 0.9, 0.92 from 0.20,
    1.0 under 0.34's extensible KV cache (``MemoryProfileRules``).
    ``enforce_eager`` captures no CUDA graphs, so none are charged; ``rocm``
    selects ROCm's 3 GiB margin floor of the extensible KV cache, and before 0.26
    leaves the CUDA-graph estimate unsubtracted (vLLM made it on CUDA only).
    """

    total_gpu_bytes: int
    gpu_memory_utilization: float | None = 0.9
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    dtype: str = "auto"
    quantization: str | None = None
    vllm_version: str = DEFAULT_VLLM_VERSION
    enforce_eager: bool = False
    rocm: bool = False
    flashinfer_sampler: bool = False
    """Top-k/top-p ran in FlashInfer ("Using FlashInfer for top-p & top-k sampling."
    in the log: vLLM 0.10.x/0.11.0 with FlashInfer installed, or later with
    ``VLLM_USE_FLASHINFER_SAMPLER=1``): no larger sampler peak before 0.17."""
    encoder_budget_tokens: int | None = None
    """A multimodal model's encoder budget as vLLM logs it ("Encoder cache will be
    initialized with a budget of N tokens"): fixes Qwen3-VL's dummy video, whose size
    comes from the processor, not config.json (:mod:`~kvpure.memory_profile.mm_profile`)."""
    gpu_capability: tuple[int, int] = (9, 0)
    """The GPU's compute capability (the H100's 9.0 by default): with TP > 1 the
    fused all-reduce workspace is charged on 9.0 and 10.x only."""

    def __post_init__(self) -> None:
        check_int("total_gpu_bytes", self.total_gpu_bytes, minimum=1)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, minimum=1)
        check_int("max_num_seqs", self.max_num_seqs, minimum=1)
        if self.encoder_budget_tokens is not None:
            check_int("encoder_budget_tokens", self.encoder_budget_tokens, minimum=1)
        util = self.gpu_memory_utilization
        if util is not None and (
            isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1
        ):
            raise InvalidFieldError(
                field="gpu_memory_utilization", value=util, reason="must be in (0, 1]"
            )
        for name in ("enforce_eager", "rocm", "flashinfer_sampler"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidFieldError(
                    field=name, value=getattr(self, name), reason="must be true or false"
                )
        cap = self.gpu_capability
        if (
            not isinstance(cap, tuple)
            or len(cap) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in cap)
        ):
            raise InvalidFieldError(
                field="gpu_capability", value=cap, reason="must be (major, minor), e.g. (9, 0)"
            )
        memory_profile_rules(self.vllm_version)

    @property
    def rules(self) -> MemoryProfileRules:
        """The memory-profile rules of ``vllm_version``."""
        return memory_profile_rules(self.vllm_version)

    @property
    def resolved_gpu_memory_utilization(self) -> float:
        """The utilization vLLM uses: the given one, else the release's unset value."""
        util = self.gpu_memory_utilization
        return self.rules.unset_gpu_memory_utilization if util is None else float(util)


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
    memory_profile: str = "0.26"
    """The range of releases whose formula applies (``MemoryProfileRules.releases``)."""
    enforce_eager: bool = False
    non_kv_from_consumed: bool = False
    extensible_kv_cache: bool = False
    margin_bytes: int = 0
    """0.34's extensible KV cache: ``max(floor, 0.75 x transient peak)`` kept free."""
    model_runner_v2: bool = False
    """GPU Model Runner V2 runs the model (``MemoryProfileRules.runs_model_runner_v2``)."""

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
        out["memory_profile"] = self.memory_profile
        out["enforce_eager"] = self.enforce_eager
        out["extensible_kv_cache"] = self.extensible_kv_cache
        out["margin_bytes"] = self.margin_bytes
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
        dense_intermediate_size=dense_mlp_width(cfg) if experts else None,
    )


_ONE_GPU = Parallelism()


def _gib_term(gib: float, band_gib: float) -> MemoryTerm:
    return MemoryTerm(bytes=round(gib * GIB), exact=False, error_bytes=round(band_gib * GIB))


def _band_bytes(terms: tuple[MemoryTerm, ...], extra_gib: float) -> int:
    """Half-width of the KV band: the terms' bands added in quadrature, plus ``extra_gib``.

    The terms' errors come from independent sources (the checkpoint, the
    sampler and MLP peaks, NCCL, the graph pool), so their bands add as a
    root sum of squares; ``extra_gib`` (releases with thin data) adds linearly.
    """
    return math.ceil(math.sqrt(sum(t.error_bytes**2 for t in terms))) + round(extra_gib * GIB)


def estimate_memory_budget(
    config: HFConfig,
    settings: ServeSettings,
    parallel: Parallelism = _ONE_GPU,
    *,
    tensors: tuple[TensorInfo, ...] | None = None,
    coefficients: Coefficients = COEFFICIENTS,
) -> tuple[MemoryBudget, ...]:
    """Every worker's budget (rank order: pipeline-major, as vLLM numbers ranks).

    The formula is that of ``settings.vllm_version``'s release
    (:mod:`kvpure.memory_profile.releases`).
    """
    refuse_unmodelled_memory(config)
    rules = settings.rules
    utilization = settings.resolved_gpu_memory_utilization
    weights = worker_weights(
        config, parallel, dtype=settings.dtype, quantization=settings.quantization, tensors=tensors
    )
    shape = model_shape(config)
    layout = checkpoint_quantization(config, settings.quantization)
    requested = math.ceil(settings.total_gpu_bytes * utilization)
    if settings.enforce_eager:
        graph = MemoryTerm(bytes=0, exact=True)
    else:
        graph = _gib_term(
            cuda_graph_gib(
                coefficients,
                shape,
                pp=parallel.pp,
                max_num_seqs=settings.max_num_seqs,
                max_num_batched_tokens=settings.max_num_batched_tokens,
            ),
            coefficients.cuda_graph_band,
        )
    v2 = rules.runs_model_runner_v2(
        architectures=config.architectures() if config.has("architectures") else (),
        moe=shape.num_experts > 0,
        quantized=layout != "none",
    )
    subtract = (
        rules.subtracts_cuda_graphs(rocm=settings.rocm, model_runner_v2=v2)
        or rules.extensible_kv_cache
    )
    non_torch = _gib_term(
        non_torch_gib(
            coefficients,
            tp=parallel.tp,
            pp=parallel.pp,
            rules=rules,
            capability=settings.gpu_capability,
        ),
        non_torch_band_gib(
            coefficients,
            tp=parallel.tp,
            pp=parallel.pp,
            rules=rules,
            capability=settings.gpu_capability,
        ),
    )
    dtype_bytes = served_dtype_bytes(config, settings.dtype)
    outputs, outputs_below = encoder_outputs_bytes(
        config,
        version=parse_version(settings.vllm_version),
        max_num_batched_tokens=settings.max_num_batched_tokens,
        dtype_bytes=dtype_bytes,
        budget_tokens=settings.encoder_budget_tokens,
    )
    budgets = []
    for worker, weight_bytes in enumerate(weights.bytes_per_worker):
        last_stage = worker // parallel.tp == parallel.pp - 1
        first_stage = worker < parallel.tp  # the encoder runs on the first stage
        activation = _gib_term(
            activation_gib(
                coefficients,
                shape,
                max_num_batched_tokens=settings.max_num_batched_tokens,
                max_num_seqs=settings.max_num_seqs,
                tp=parallel.tp,
                last_stage=last_stage,
                rules=rules,
                dtype_bytes=dtype_bytes,
                quantization=layout,
                flashinfer_sampler=settings.flashinfer_sampler,
                model_runner_v2=v2,
            ),
            coefficients.activation_band,
        )
        if first_stage and outputs:
            activation = MemoryTerm(
                bytes=activation.bytes + outputs, exact=False, error_bytes=activation.error_bytes
            )
        below = outputs_below if first_stage else 0
        weight = MemoryTerm(
            bytes=weight_bytes, exact=weights.exact, error_bytes=weights.error_bytes(worker)
        )
        used = (weight, activation, non_torch) + ((graph,) if subtract else ())
        margin = 0
        if rules.extensible_kv_cache:
            sized = extensible_kv_cache_bytes(
                rules,
                total_bytes=settings.total_gpu_bytes,
                requested_bytes=requested,
                weights=weight,
                activation=activation,
                non_torch=non_torch,
                cuda_graph=graph,
                rocm=settings.rocm,
                tp=parallel.tp,
            )
            kv, margin, used = sized.kv_cache_bytes, sized.margin_bytes, sized.terms
        else:
            kv = requested - sum(t.bytes for t in used)
        band = _band_bytes(used, rules.thin_data_band_gib)
        budgets.append(
            MemoryBudget(
                worker=worker,
                total_bytes=settings.total_gpu_bytes,
                gpu_memory_utilization=utilization,
                requested_bytes=requested,
                weights=weight,
                activation=activation,
                non_torch=non_torch,
                cuda_graph=graph,
                cuda_graph_subtracted=subtract,
                kv_cache_bytes=kv,
                kv_cache_bytes_low=kv - band - below,
                kv_cache_bytes_high=kv + band,
                vllm_version=settings.vllm_version,
                fitted_versions=FITTED_VERSIONS,
                memory_profile=rules.releases,
                enforce_eager=settings.enforce_eager,
                non_kv_from_consumed=rules.non_kv_from_consumed,
                extensible_kv_cache=rules.extensible_kv_cache,
                margin_bytes=margin,
                model_runner_v2=v2,
            )
        )
    return tuple(budgets)
