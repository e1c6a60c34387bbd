"""A :class:`~kvpure.memory_profile.budget.MemoryBudget` in the words of vLLM's start-up log."""

from __future__ import annotations

from kvpure.errors import format_gib
from kvpure.memory_profile.budget import MemoryBudget
from kvpure.memory_profile.terms import MemoryTerm

__all__ = ["render_vllm_log"]


def _mark(term: MemoryTerm) -> str:
    return "exact" if term.exact else f"estimated, +/- {format_gib(term.error_bytes)} GiB"


def render_vllm_log(budget: MemoryBudget) -> str:
    """The budget in the words vLLM's start-up log uses, each term marked exact or estimated.

    From 0.27 the profile's summary reads "Total non KV cache memory"; under
    0.34's extensible KV cache the last line is the committed size, after the
    margin it keeps free.
    """
    if budget.enforce_eager:
        graph_note = "--enforce-eager: no graphs captured"
    elif budget.cuda_graph_subtracted:
        graph_note = "subtracted"
    elif budget.model_runner_v2:
        graph_note = "not subtracted: Model Runner V2 estimates none before vLLM 0.29"
    else:
        graph_note = "not subtracted before vLLM 0.20"
    lines = [
        f"worker {budget.worker}: total_gpu_memory ({format_gib(budget.total_bytes)}GiB) x "
        f"gpu_memory_utilization ({budget.gpu_memory_utilization:.2f}) = "
        f"{format_gib(budget.requested_bytes)}GiB (vLLM {budget.memory_profile}'s memory profile)",
        f"Model loading took {format_gib(budget.weights_bytes)} GiB memory "
        f"({_mark(budget.weights)})",
        f"torch peak memory increase: {format_gib(budget.activation_bytes)}GiB "
        f"({_mark(budget.activation)})",
        f"non-torch forward increase memory: {format_gib(budget.non_torch_bytes)}GiB "
        f"({_mark(budget.non_torch)})",
        f"Estimated CUDA graph memory: {format_gib(budget.cuda_graph_bytes)} GiB total "
        f"({_mark(budget.cuda_graph)}; {graph_note})",
    ]
    if budget.non_kv_from_consumed:
        non_kv = budget.weights_bytes + budget.activation_bytes + budget.non_torch_bytes
        lines.append(f"Total non KV cache memory: {format_gib(non_kv)}GiB")
    if budget.extensible_kv_cache:
        lines.append(
            f"extensible KV cache: margin {format_gib(budget.margin_bytes)} GiB kept free "
            "beyond the transient peak"
        )
    lines.append(
        f"Available KV cache memory: {format_gib(budget.kv_cache_bytes)} GiB "
        f"(range {format_gib(budget.kv_cache_bytes_low)} to "
        f"{format_gib(budget.kv_cache_bytes_high)} GiB; fitted for vLLM {budget.fitted_versions})"
    )
    return "\n".join(lines)
