"""vLLM 0.34's extensible KV cache: its size after warm-up and CUDA-graph capture.

vLLM 0.34 (``vllm/v1/worker/extensible_kv_cache.py``, ``measure_kv_cache_bytes``
and ``measure_kv_cache_blocks``; ``vllm/v1/worker/gpu_worker.py``,
``Worker.compile_or_warm_up_model``) reserves the KV cache's address space,
runs warm-up and graph capture, then commits::

    non_kv_used = init_free - free - committed     (weights, non-torch, CUDA graphs)
    headroom    = free + committed                  (= init_free - non_kv_used)
    margin      = max(KV_CACHE_MARGIN_FLOOR_BYTES, 0.75 x transient_peak)
    available   = min(requested - non_kv_used, headroom - margin)
                  - max(transient_peak, torch_reserve_growth)

``transient_peak`` starts as the profiled ``peak_activation_memory``
(``transient_peak_headroom`` plus the CUDA-graph estimate, ``gpu_worker.py``),
and warm-up can only raise it; the torch reservation growth is not larger in
vLLM's own measurements, so it is the transient peak here. ``init_free`` is the
GPU's total less what the CUDA context and NCCL hold before vLLM's first
snapshot: "Initial free memory" in the bundled H100 logs is 78.68 of 79.19 GiB
on one GPU (0.51 GiB held) and 77.12-77.66 GiB with TP 2 or 4 (1.53-2.07 GiB,
NCCL's communicators are created before the snapshot), so 0.5 +/- 0.15 GiB on
one GPU and 1.8 +/- 0.3 GiB with TP > 1. vLLM never sizes a cache below zero; kvpure keeps
the signed figure so that "does not start" stays visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.memory_profile.profile_logs import GIB
from kvpure.memory_profile.releases import MemoryProfileRules
from kvpure.memory_profile.terms import MemoryTerm

__all__ = [
    "CONTEXT_BAND_GIB",
    "CONTEXT_GIB",
    "CONTEXT_TP_BAND_GIB",
    "CONTEXT_TP_GIB",
    "ExtensibleSize",
    "extensible_kv_cache_bytes",
    "measure_kv_cache_bytes",
]

CONTEXT_GIB: Final = 0.5
"""Memory in use before vLLM's initial snapshot on one GPU (the CUDA context), GiB."""
CONTEXT_BAND_GIB: Final = 0.15
CONTEXT_TP_GIB: Final = 1.8
"""The same with TP > 1 (the context and NCCL's communicators), GiB."""
CONTEXT_TP_BAND_GIB: Final = 0.3


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtensibleSize:
    """The committed KV size, the margin kept free and the terms its band comes from."""

    kv_cache_bytes: int
    margin_bytes: int
    terms: tuple[MemoryTerm, ...]


def measure_kv_cache_bytes(
    *,
    init_free_bytes: int,
    non_kv_used_bytes: int,
    requested_bytes: int,
    transient_peak_bytes: int,
    torch_reserve_growth_bytes: int,
    margin_floor_bytes: int,
    margin_fraction: float,
) -> tuple[int, int]:
    """``(available, margin)`` as ``measure_kv_cache_bytes`` computes them (unclamped)."""
    headroom = init_free_bytes - non_kv_used_bytes
    margin = max(margin_floor_bytes, int(transient_peak_bytes * margin_fraction))
    available = min(requested_bytes - non_kv_used_bytes, headroom - margin)
    return available - max(transient_peak_bytes, torch_reserve_growth_bytes), margin


def extensible_kv_cache_bytes(
    rules: MemoryProfileRules,
    *,
    total_bytes: int,
    requested_bytes: int,
    weights: MemoryTerm,
    activation: MemoryTerm,
    non_torch: MemoryTerm,
    cuda_graph: MemoryTerm,
    rocm: bool,
    tp: int = 1,
) -> ExtensibleSize:
    """The KV bytes 0.34 commits for one worker, from the estimated terms."""
    held, band = (
        (CONTEXT_TP_GIB, CONTEXT_TP_BAND_GIB) if tp > 1 else (CONTEXT_GIB, CONTEXT_BAND_GIB)
    )
    context = MemoryTerm(bytes=round(held * GIB), exact=False, error_bytes=round(band * GIB))
    transient = activation.bytes + cuda_graph.bytes
    available, margin = measure_kv_cache_bytes(
        init_free_bytes=total_bytes - context.bytes,
        non_kv_used_bytes=weights.bytes + non_torch.bytes + cuda_graph.bytes,
        requested_bytes=requested_bytes,
        transient_peak_bytes=transient,
        torch_reserve_growth_bytes=transient,
        margin_floor_bytes=round(rules.margin_floor(rocm=rocm) * GIB),
        margin_fraction=rules.margin_fraction,
    )
    terms: tuple[MemoryTerm, ...] = (weights, activation, non_torch, cuda_graph)
    if requested_bytes >= total_bytes - context.bytes - margin:
        terms = (*terms, context)  # bound by the device: the context's band counts
    return ExtensibleSize(kv_cache_bytes=available, margin_bytes=margin, terms=terms)
