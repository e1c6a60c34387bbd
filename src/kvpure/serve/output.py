"""The verdict and the resolved settings, as text for people and as JSON data.

:func:`final_settings` completes the resolved settings with what only the
plan knows (a block size raised for a Mamba state, an auto-fitted
``max_model_len``); :func:`render_serve_header` prints the verdict line, the
fixes when vLLM would not start, and one line per setting with its source,
the way vLLM's "non-default args" line names what was given;
:func:`serve_json` gives ``{"verdict", "settings"}`` keyed by vLLM's names.
"""

from __future__ import annotations

from kvpure.report.capacity import CapacityReport
from kvpure.serve.defaults import ServeSettings, Setting, Source
from kvpure.serve.verdict import Verdict

__all__ = ["final_settings", "release_line", "render_serve_header", "serve_json"]


def final_settings(
    serve: ServeSettings, report: CapacityReport | None
) -> tuple[tuple[str, Setting], ...]:
    """The settings, with the plan's block size and fitted max_model_len where they differ."""
    if report is None or report.model is None:
        return serve.settings
    model = report.model
    settings: list[tuple[str, Setting]] = []
    for name, setting in serve.settings:
        if name == "block_size" and model.block_size != setting.value:
            setting = Setting(
                value=model.block_size,
                source=Source.MODEL_CONFIG,
                note=f"raised from {setting.value} so one page holds a Mamba state",
            )
        elif name == "max_model_len" and setting.value == "auto":
            setting = Setting(
                value=report.max_model_len,
                source=Source.FLAG,
                note=f"auto: fitted to the memory (the model allows {model.derived_max_model_len})",
            )
        settings.append((name, setting))
    return tuple(settings)


def _release(text: str) -> tuple[str, ...]:
    return tuple(text.strip().lstrip("v").split(".")[:2])


def release_line(
    vllm_version: str, *, memory_profile: str | None = None, named: str | None = None
) -> str:
    """The report's first line: the vLLM release it answers for.

    ``vllm_version`` is the release planned as; ``memory_profile`` the release
    whose start-up memory profile the estimate follows and ``named`` the
    ``--vllm`` given (None: not used). When either is another release (``--vllm
    0.13``: memory as 0.13, the plan by the nearest reproduced release), the
    line says both.
    """
    planned = _release(vllm_version)
    exact = "the nearest release kvpure plans exactly: 0.26, 0.33 or 0.34"
    if memory_profile is not None and _release(memory_profile) != planned:
        return (
            f"vLLM release: memory profile of vLLM {memory_profile}; "
            f"planning as {vllm_version} ({exact})"
        )
    if named is not None and _release(named) != planned:
        return f"vLLM release: planning vLLM {named.strip()} as {vllm_version} ({exact})"
    return f"vLLM release: {vllm_version} (--vllm 0.26, 0.33 or 0.34; default 0.34)"


def _value_text(value: int | str | bool | float) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return value


def render_serve_header(
    serve: ServeSettings, verdict: Verdict, settings: tuple[tuple[str, Setting], ...]
) -> str:
    """The verdict, the fixes, the GPU and every resolved setting with its source."""
    lines = [verdict.line]
    if not verdict.starts:
        if verdict.fixes:
            lines.append("Any one of these would make it start:")
            lines.extend(f"  {fix}" for fix in verdict.fixes)
        elif verdict.weights_do_not_fit:
            lines.append(
                "No single flag found makes it start: the weights need more GPUs "
                "(tensor or pipeline parallel) or a larger GPU."
            )
        else:
            lines.append("No single flag makes it start: give more --kv-cache-memory.")
    lines.append("")
    gpu = serve.gpu
    gpu_text = (
        f"{gpu.name} ({gpu.device_name}, {gpu.total_memory_bytes / 2**30:.2f} GiB, "
        f"compute capability {gpu.capability_text})"
        if gpu is not None
        else "none named (--gpu); an H100-80GB is assumed"
    )
    context = "vllm serve" if serve.usage_context == "serve" else "the LLM class"
    lines.append(f"Settings (vLLM {serve.vllm_version} for {context}; GPU: {gpu_text})")
    width = max(len(name) for name, _ in settings)
    for name, setting in settings:
        note = f"; {setting.note}" if setting.note else ""
        lines.append(
            f"  {name:<{width}}  {_value_text(setting.value):<16} ({setting.source.value}{note})"
        )
    if serve.enable_expert_parallel:
        lines.append("  enable_expert_parallel: on (flag; MoE weights only, no KV cache change)")
    rejected = serve.backend.rejected
    if rejected:
        passed = "; ".join(f"{b.value}: {why}" for b, why in rejected)
        lines.append(f"  (backends passed over: {passed})")
    return "\n".join(lines)


def serve_json(
    serve: ServeSettings, verdict: Verdict, settings: tuple[tuple[str, Setting], ...]
) -> dict[str, object]:
    """``{"verdict": {...}, "settings": {name: {"value", "source"}}, "gpu": ...}``."""
    gpu = serve.gpu
    return {
        "vllm_version": serve.vllm_version,
        "verdict": {
            "starts": verdict.starts,
            "kv_cache_capacity_tokens": verdict.tokens,
            "max_concurrency": verdict.concurrency,
            "max_model_len": verdict.max_model_len,
            "max_num_seqs": verdict.max_num_seqs,
            "data_parallel_size": verdict.data_parallel_size,
            "line": verdict.line,
            "fixes": list(verdict.fixes),
            "weights_do_not_fit": verdict.weights_do_not_fit or None,
        },
        "settings": {
            name: {"value": setting.value, "source": setting.source.value}
            | ({"note": setting.note} if setting.note else {})
            for name, setting in settings
        },
        "gpu": None
        if gpu is None
        else {
            "name": gpu.name,
            "device_name": gpu.device_name,
            "total_memory_bytes": gpu.total_memory_bytes,
            "compute_capability": list(gpu.compute_capability),
            "vendor": gpu.vendor,
        },
        "usage_context": serve.usage_context,
    }
