"""The KV cache memory of a ``vllm serve`` run estimated from the GPU, its band carried through.

Without ``--kv-cache-memory`` the KV memory per worker comes from
:func:`~kvpure.memory_profile.budget.estimate_memory_budget`: the GPU's total
memory times ``gpu_memory_utilization`` less the weights, the activation peak,
non-torch memory and CUDA graphs. This module

- gives the GPU's total memory as vLLM reads it (``torch.cuda.mem_get_info``),
  which is less than the driver's figure in the catalogue
  (:mod:`kvpure.serve.gpus`): :func:`vllm_total_memory`, from vLLM's own logs
  (H100 80GB), else from the torch totals quoted in
  :mod:`kvpure.serve.gpu_totals`, else the driver's figure less a reserve;
- builds every worker's budget from the resolved serve settings
  (:func:`worker_memory`), widening the KV band by the total's own band;
- plans at the low and the high end of the band (:func:`band_outcome`) and
  names the verdict: ``starts`` (the low end starts), ``may not start`` (only
  the high end does) or ``does not start`` (neither).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import MemoryBudget, MemoryTerm, estimate_memory_budget
from kvpure.memory_profile.budget import ServeSettings as ProfileSettings
from kvpure.memory_profile.safetensors_header import TensorInfo, read_model_folder
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import checkpoint_quantization
from kvpure.models.config import HFConfig
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import plan_deployment
from kvpure.serve.defaults import ServeSettings, resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.gpu_totals import torch_total
from kvpure.serve.gpus import GPU
from kvpure.serve.verdict import NOT_STARTING, largest_fitting_max_model_len
from kvpure.versions import DEFAULT_VLLM_VERSION

__all__ = [
    "check_quantization",
    "BandOutcome",
    "GPUTotal",
    "MemoryBand",
    "WorkerMemory",
    "band_outcome",
    "model_folder_tensors",
    "vllm_total_memory",
    "worker_memory",
]

_GIB: Final = 2**30
_MIB: Final = 2**20

#: Total memory as vLLM logs it (``torch.cuda.mem_get_info``), by catalogue name.
#: H100-80GB: 79.19 GiB in every bundled H100 log (tests/data/memory_logs/*.json,
#: ``total_gpu_memory_gib``), printed to two decimals, hence a 0.005 GiB band.
VLLM_LOGGED_TOTALS: Final[dict[str, int]] = {"H100-80GB": round(79.19 * _GIB)}
LOGGED_TOTAL_BAND: Final = round(0.005 * _GIB)
#: The driver's total (81,559 MiB on an H100 80GB) less what torch reports there
#: (79.19 GiB): memory the driver keeps. GPUs with no recorded torch total
#: (:mod:`kvpure.serve.gpu_totals`) are assumed to keep about the same, with a
#: band as wide as the reserve itself.
DRIVER_RESERVE: Final = 81559 * _MIB - round(79.19 * _GIB)


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUTotal:
    """The total memory the budget starts from, and where it came from."""

    term: MemoryTerm
    source: str


def vllm_total_memory(gpu: GPU, *, given: bool) -> GPUTotal:
    """The GPU's total memory as vLLM reads it.

    ``given``: the GPU was described by ``--gpu-memory`` (vLLM's own figure, exact).
    """
    if given:
        term = MemoryTerm(bytes=gpu.total_memory_bytes, exact=True)
        return GPUTotal(term=term, source="--gpu-memory")
    logged = VLLM_LOGGED_TOTALS.get(gpu.name)
    if logged is not None:
        term = MemoryTerm(bytes=logged, exact=False, error_bytes=LOGGED_TOTAL_BAND)
        return GPUTotal(term=term, source=f"vLLM logs of the {gpu.name}")
    recorded = torch_total(gpu.name)
    if recorded is not None:
        term = MemoryTerm(
            bytes=recorded.bytes, exact=recorded.exact, error_bytes=recorded.error_bytes
        )
        count = len(recorded.quotes)
        reports = "1 public report" if count == 1 else f"{count} public reports"
        return GPUTotal(
            term=term,
            source=f"torch's total on the {gpu.name} ({reports}: kvpure.serve.gpu_totals)",
        )
    term = MemoryTerm(
        bytes=gpu.total_memory_bytes - DRIVER_RESERVE, exact=False, error_bytes=DRIVER_RESERVE
    )
    return GPUTotal(
        term=term,
        source=f"the driver's {gpu.total_memory_bytes / _GIB:.2f} GiB less the "
        f"{DRIVER_RESERVE / _GIB:.2f} GiB torch reports below the driver on an H100 80GB "
        "(assumed alike here)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerMemory:
    """One worker's budget (its KV band widened by the total's band) and the total's term."""

    budget: MemoryBudget
    total: GPUTotal

    def to_json(self) -> dict[str, object]:
        """The budget's ``memory`` object, with the total as one more term."""
        data = self.budget.to_json()
        b = self.budget
        data["terms"] = {
            name: {"exact": term.exact, "error_bytes": term.error_bytes}
            for name, term in (
                ("total", self.total.term),
                ("weights", b.weights),
                ("activation", b.activation),
                ("non_torch", b.non_torch),
                ("cuda_graph", b.cuda_graph),
            )
        }
        data["total_source"] = self.total.source
        return data


def model_folder_tensors(folder: Path | None) -> tuple[TensorInfo, ...] | None:
    """The checkpoint's tensors when ``folder`` holds safetensors files, else None."""
    if folder is None or not folder.is_dir():
        return None
    has_index = (folder / "model.safetensors.index.json").is_file()
    if not has_index and next(folder.glob("*.safetensors"), None) is None:
        return None
    return read_model_folder(folder)


def _int_setting(serve: ServeSettings, name: str) -> int:
    value = serve[name].value
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def check_quantization(config: HFConfig, quantization: str) -> None:
    """``--quantization``, refused as vLLM refuses it for this checkpoint (named as the flag)."""
    try:
        checkpoint_quantization(config, quantization)
    except InvalidFieldError as err:
        raise InvalidFieldError(
            field="--quantization", value=quantization, reason=err.reason
        ) from None


def worker_memory(
    config: HFConfig,
    serve: ServeSettings,
    flags: ServeFlags,
    *,
    gpu: GPU,
    gpu_given: bool,
    gpu_memory_utilization: float | None,
    quantization: str | None,
    tensors: tuple[TensorInfo, ...] | None,
    vllm_version: str = DEFAULT_VLLM_VERSION,
    enforce_eager: bool = False,
    flashinfer_sampler: bool = False,
    encoder_budget_tokens: int | None = None,
) -> tuple[WorkerMemory, ...]:
    """Every worker's memory budget (rank order) for the resolved serve settings.

    ``vllm_version`` names the release whose start-up profile is estimated
    (its formula, :mod:`kvpure.memory_profile.releases`); an unset
    ``gpu_memory_utilization`` (None) takes that release's default, 1.0 under
    0.34's extensible KV cache. ``enforce_eager`` charges no CUDA graphs;
    ``flashinfer_sampler``: top-k/top-p ran in FlashInfer (no larger sampler peak).
    ``encoder_budget_tokens``: a multimodal model's logged encoder budget.
    """
    if quantization is not None:
        check_quantization(config, quantization)
    tp = _int_setting(serve, "tensor_parallel_size")
    pp = _int_setting(serve, "pipeline_parallel_size")
    ep = tp * serve.data_parallel_size if flags.enable_expert_parallel else 1
    total = vllm_total_memory(gpu, given=gpu_given)
    settings = ProfileSettings(
        total_gpu_bytes=total.term.bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_batched_tokens=_int_setting(serve, "max_num_batched_tokens"),
        max_num_seqs=_int_setting(serve, "max_num_seqs"),
        dtype=flags.dtype or "auto",
        quantization=quantization,
        vllm_version=vllm_version,
        enforce_eager=enforce_eager,
        flashinfer_sampler=flashinfer_sampler,
        encoder_budget_tokens=encoder_budget_tokens,
        rocm=gpu.is_rocm,
        gpu_capability=gpu.compute_capability,
    )
    budgets = estimate_memory_budget(
        config, settings, Parallelism(tp=tp, pp=pp, ep=ep), tensors=tensors
    )
    widen = math.ceil(total.term.error_bytes * settings.resolved_gpu_memory_utilization)
    return tuple(
        WorkerMemory(
            budget=replace(
                b,
                kv_cache_bytes_low=b.kv_cache_bytes_low - widen,
                kv_cache_bytes_high=b.kv_cache_bytes_high + widen,
            ),
            total=total,
        )
        for b in budgets
    )


class MemoryBand:
    """The three verdicts a band gives."""

    STARTS: Final = "starts"
    MAY_NOT_START: Final = "may not start"
    DOES_NOT_START: Final = "does not start"


@dataclass(frozen=True, slots=True, kw_only=True)
class EndOutcome:
    """The plan at one end of the band: whether it starts, tokens, requests at once."""

    kv_cache_bytes: tuple[int, ...]
    starts: bool
    tokens: int
    concurrency: float
    max_model_len: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BandOutcome:
    """The plan at the low and high end of every worker's KV band, and the verdict."""

    low: EndOutcome
    high: EndOutcome
    verdict: str
    longest_low: int | None = None
    longest_high: int | None = None
    """The largest ``max_model_len`` that starts at each end (when asked for)."""


def kv_flags(flags: ServeFlags, kv: tuple[int, ...]) -> ServeFlags:
    """``flags`` with one KV figure per worker (negative figures, no memory, as 0)."""
    return replace(flags, kv_cache_memory_bytes=tuple(max(0, k) for k in kv))


def _end(layout: ModelLayout, flags: ServeFlags, kv: tuple[int, ...]) -> EndOutcome:
    serve = resolve_serve_settings(layout, kv_flags(flags, kv))
    length = serve["max_model_len"].value
    try:
        _, plan = plan_deployment(layout, serve.deployment)
    except NOT_STARTING:
        fallback = length if isinstance(length, int) else layout.derived_max_model_len
        return EndOutcome(
            kv_cache_bytes=kv, starts=False, tokens=0, concurrency=0.0, max_model_len=fallback
        )
    facts = plan.workers[0]
    return EndOutcome(
        kv_cache_bytes=kv,
        starts=True,
        tokens=facts.kv_cache_capacity_tokens or 0,
        concurrency=facts.max_concurrency or 0.0,
        max_model_len=plan.final_max_model_len,
    )


def band_outcome(
    layout: ModelLayout,
    flags: ServeFlags,
    workers: tuple[WorkerMemory, ...],
    *,
    longest: bool = False,
) -> BandOutcome:
    """Plan at each end of the band; ``longest`` also finds the largest max_model_len there."""
    low_kv = tuple(w.budget.kv_cache_bytes_low for w in workers)
    high_kv = tuple(w.budget.kv_cache_bytes_high for w in workers)
    low = _end(layout, flags, low_kv)
    high = _end(layout, flags, high_kv)
    if low.starts:
        verdict = MemoryBand.STARTS
    elif high.starts:
        verdict = MemoryBand.MAY_NOT_START
    else:
        verdict = MemoryBand.DOES_NOT_START
    longest_low = longest_high = None
    if longest:
        upper = layout.derived_max_model_len
        longest_low = largest_fitting_max_model_len(layout, kv_flags(flags, low_kv), upper)
        longest_high = largest_fitting_max_model_len(layout, kv_flags(flags, high_kv), upper)
    return BandOutcome(
        low=low,
        high=high,
        verdict=verdict,
        longest_low=longest_low,
        longest_high=longest_high,
    )
