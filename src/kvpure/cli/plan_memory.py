"""``kvpure plan MODEL --gpu NAME`` without ``--kv-cache-memory``: the KV memory estimated.

The KV cache memory per worker then comes from vLLM's start-up memory
profile, computed offline (:mod:`kvpure.memory_profile`, wired up in
:mod:`kvpure.serve.memory`): the GPU's total memory (the catalogue, or
``--gpu-memory`` as vLLM prints it) times ``--gpu-memory-utilization``, less
the weights (exact from the safetensors headers in the model's folder, else
estimated from config.json in ``--quantization``'s format), the activation
peak, non-torch memory and CUDA graphs. The band of the estimate is carried
through the plan: tokens and concurrency at both ends, and the verdict
"starts / may not start / does not start". ``--kv-cache-memory`` replaces the
whole estimate.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kvpure.cli.errors import MissingOptionError
from kvpure.cli.option_values import parse_bool
from kvpure.cli.plan_options import Option
from kvpure.cli.serve_options import serve_flags_from_options
from kvpure.errors import InvalidFieldError, format_gib
from kvpure.models.config import HFConfig
from kvpure.models.layout import ModelLayout
from kvpure.serve.defaults import ServeSettings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.setting import Setting, Source
from kvpure.versions import DEFAULT_VLLM_VERSION

# The estimate itself (kvpure.serve.memory, kvpure.memory_profile) is imported by the
# functions that estimate: `kvpure plan CONFIG --kv-cache-memory X` only reads the options
# here and never imports it. Its types resolve on first use (module __getattr__ below), for
# a run-time checker that reads this module's annotations.
if TYPE_CHECKING:
    from kvpure.serve.memory import BandOutcome, WorkerMemory

_ESTIMATE_TYPES: Final = frozenset({"BandOutcome", "WorkerMemory"})


def __getattr__(name: str) -> object:
    """``BandOutcome`` and ``WorkerMemory`` from :mod:`kvpure.serve.memory`, on first use."""
    if name in _ESTIMATE_TYPES:
        from kvpure.serve import memory

        return getattr(memory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MEMORY_OPTIONS",
    "MemoryCase",
    "add_memory_options",
    "check_memory_options",
    "given_memory_options",
    "memory_case",
    "memory_json",
    "memory_text",
    "profile_utilization",
    "split_memory_options",
]

MEMORY_OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        name="gpu_memory_utilization",
        flags=("--gpu-memory-utilization",),
        metavar="FRACTION",
        help="share of the GPU's memory vLLM may use (default: the release's, 0.9 before "
        "vLLM 0.20, 0.92 from 0.20, 1.0 under 0.34's extensible KV cache); with --gpu and "
        "without --kv-cache-memory the KV cache memory is estimated from it",
    ),
    Option(
        name="quantization",
        flags=("--quantization", "-q"),
        metavar="NAME",
        help="vLLM's weight quantization (fp8, awq, awq_marlin, gptq, gptq_marlin, "
        "modelopt_fp4, nvfp4, mxfp4); default: config.json's quantization_config",
    ),
    Option(
        name="memory_profile_version",
        flags=("--memory-profile-version",),
        metavar="VERSION",
        help="the vLLM release whose start-up memory profile is estimated (V1 releases 0.10 "
        "to 0.34; default --vllm's), e.g. to compare with an older server's log",
    ),
    Option(
        name="enforce_eager",
        flags=("--enforce-eager",),
        metavar="on|off",
        help="vLLM's --enforce-eager: no CUDA graphs are captured, so none are charged "
        "(default off)",
    ),
    Option(
        name="flashinfer_sampler",
        flags=("--flashinfer-sampler",),
        metavar="on|off",
        help="top-k/top-p sampled by FlashInfer, as a log's 'Using FlashInfer for top-p & "
        "top-k sampling.' says (vLLM 0.10/0.11.0 with FlashInfer installed): the profiling "
        "run keeps no larger sampler peak (default off)",
    ),
    Option(
        name="encoder_budget",
        flags=("--encoder-budget",),
        metavar="TOKENS",
        help="a multimodal model's encoder budget as vLLM logs it ('Encoder cache will be "
        "initialized with a budget of N tokens'): charges the encoder outputs its profile "
        "keeps where config.json cannot size them (Qwen3-VL's video); default: the band "
        "is widened below instead",
    ),
)
_NAMES: Final = frozenset(option.name for option in MEMORY_OPTIONS)
#: Options that, as in ``vllm serve``, may also be given bare (``--enforce-eager`` = on).
_SWITCHES: Final = frozenset({"enforce_eager", "flashinfer_sampler"})
_PLACEHOLDER: Final = "1GiB"


def add_memory_options(parser: argparse.ArgumentParser) -> None:
    """Add :data:`MEMORY_OPTIONS` to ``parser``."""
    group = parser.add_argument_group(
        "memory estimate (with --gpu or --gpu-memory, when --kv-cache-memory is not given)"
    )
    for option in MEMORY_OPTIONS:
        if option.name in _SWITCHES:
            group.add_argument(
                *option.flags,
                dest=f"opt_{option.name}",
                metavar=option.metavar,
                help=option.help,
                nargs="?",
                const="on",
            )
            continue
        group.add_argument(
            *option.flags, dest=f"opt_{option.name}", metavar=option.metavar, help=option.help
        )


def given_memory_options(args: argparse.Namespace) -> dict[str, str]:
    """The memory-estimate options given on the command line, by option name."""
    given: dict[str, str] = {}
    for option in MEMORY_OPTIONS:
        value = getattr(args, f"opt_{option.name}", None)
        if value is not None:
            given[option.name] = str(value)
    return given


def split_memory_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``(serve options, memory-estimate options)``."""
    serve = {k: v for k, v in options.items() if k not in _NAMES}
    memory = {k: v for k, v in options.items() if k in _NAMES}
    return serve, memory


def parse_encoder_budget(text: str | None) -> int | None:
    """``--encoder-budget`` text -> a positive number of tokens (None when not given)."""
    if text is None:
        return None
    if not (text.isdigit() and len(text) <= 12 and int(text) > 0):
        raise InvalidFieldError(
            field="--encoder-budget",
            value=text,
            reason="must be a positive number of tokens, as vLLM logs it, e.g. 153600",
        )
    return int(text)


def parse_utilization(text: str) -> float:
    """``--gpu-memory-utilization`` text -> a fraction in (0, 1]."""
    try:
        value = float(text) if len(text) <= 32 else float("nan")
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise InvalidFieldError(
            field="--gpu-memory-utilization",
            value=text,
            reason="must be a fraction in (0, 1], e.g. 0.9",
        )
    return value


def check_memory_options(
    config: HFConfig, memory_texts: Mapping[str, str], vllm_version: str | None
) -> None:
    """The memory-estimate options given beside ``--kv-cache-memory``, checked.

    vLLM then sizes the cache from the memory given and never reads these, but
    its argument parser and config classes still refuse a bad value (a
    ``--gpu-memory-utilization`` outside (0, 1], an unknown quantization), so
    kvpure refuses the same inputs whether or not it estimates. The
    quantization check alone reads the estimate's weight formats, so only a
    given ``--quantization`` imports it.
    """
    utilization = memory_texts.get("gpu_memory_utilization")
    if utilization is not None:
        parse_utilization(utilization)
    for name, field in (
        ("enforce_eager", "--enforce-eager"),
        ("flashinfer_sampler", "--flashinfer-sampler"),
    ):
        text = memory_texts.get(name)
        if text is not None:
            parse_bool(text, field=field)
    profile_version(memory_texts.get("memory_profile_version"), vllm_version)
    parse_encoder_budget(memory_texts.get("encoder_budget"))
    quantization = memory_texts.get("quantization")
    if quantization is not None:
        from kvpure.serve.memory import check_quantization  # the estimate's formats

        check_quantization(config, quantization)


def profile_version(text: str | None, vllm_version: str | None) -> str:
    """``--memory-profile-version``, else ``--vllm``'s release, else the default (checked)."""
    if text is None:
        return vllm_version or DEFAULT_VLLM_VERSION
    from kvpure.memory_profile.releases import parse_version  # the estimate only

    parse_version(text, field="--memory-profile-version")
    return text.strip().lstrip("v")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryCase:
    """The estimated memory of one deployment and the plan at both ends of its band."""

    flags: ServeFlags
    serve: ServeSettings
    workers: tuple[WorkerMemory, ...]
    outcome: BandOutcome

    @property
    def central_flags(self) -> ServeFlags:
        """The flags with every worker's central KV figure."""
        from kvpure.serve.memory import kv_flags  # the estimate only

        return kv_flags(self.flags, tuple(w.budget.kv_cache_bytes for w in self.workers))

    @property
    def high_flags(self) -> ServeFlags:
        """The flags with every worker's KV figure at the high end of the band."""
        from kvpure.serve.memory import kv_flags  # the estimate only

        return kv_flags(self.flags, tuple(w.budget.kv_cache_bytes_high for w in self.workers))


def memory_case(
    config: HFConfig,
    layout: ModelLayout,
    options: Mapping[str, str],
    *,
    model_folder: Path | None,
    longest: bool = False,
    vllm_version: str | None = None,
) -> MemoryCase:
    """Estimate every worker's KV memory from the GPU and plan at both ends of the band.

    ``vllm_version`` (``--vllm``) names the release whose memory profile is
    estimated unless ``--memory-profile-version`` is given; the default is
    :data:`kvpure.versions.DEFAULT_VLLM_VERSION`.
    """
    from kvpure.serve.defaults import resolve_serve_settings
    from kvpure.serve.memory import band_outcome, model_folder_tensors, worker_memory

    serve_texts, memory_texts = split_memory_options(options)
    if "gpu" not in serve_texts and "gpu_memory" not in serve_texts:
        raise MissingOptionError(
            option="--kv-cache-memory",
            reason="for a config.json, or a GPU to estimate it from: give vLLM's 'Available KV "
            "cache memory' (--kv-cache-memory 24GiB) or the GPU (--gpu H100-80GB, or "
            "--gpu-memory 79.19GiB as vLLM prints its total memory)",
        )
    given_utilization = memory_texts.get("gpu_memory_utilization")
    flags = replace(
        serve_flags_from_options({**serve_texts, "kv_cache_memory": _PLACEHOLDER}),
        kv_cache_memory_given=False,
        gpu_memory_utilization=None
        if given_utilization is None
        else parse_utilization(given_utilization),
    )
    profile = profile_version(
        memory_texts.get("memory_profile_version"), vllm_version or flags.vllm_version
    )
    serve = resolve_serve_settings(layout, flags)
    if given_utilization is None:
        serve = profile_utilization(serve, profile)
    gpu = flags.gpu
    if gpu is None:  # unreachable: --gpu or --gpu-memory was given above
        raise MissingOptionError(option="--gpu", reason="to estimate the KV cache memory")
    util_text = memory_texts.get("gpu_memory_utilization")
    utilization = None if util_text is None else parse_utilization(util_text)
    eager_text = memory_texts.get("enforce_eager")
    eager = eager_text is not None and parse_bool(eager_text, field="--enforce-eager")
    sampler_text = memory_texts.get("flashinfer_sampler")
    flashinfer = sampler_text is not None and parse_bool(sampler_text, field="--flashinfer-sampler")
    workers = worker_memory(
        config,
        serve,
        flags,
        gpu=gpu,
        gpu_given="gpu_memory" in serve_texts,
        gpu_memory_utilization=utilization,
        quantization=memory_texts.get("quantization"),
        tensors=model_folder_tensors(model_folder),
        vllm_version=profile,
        enforce_eager=eager,
        flashinfer_sampler=flashinfer,
        encoder_budget_tokens=parse_encoder_budget(memory_texts.get("encoder_budget")),
    )
    outcome = band_outcome(layout, flags, workers, longest=longest)
    return MemoryCase(flags=flags, serve=serve, workers=workers, outcome=outcome)


def profile_utilization(serve: ServeSettings, profile: str) -> ServeSettings:
    """``serve`` showing the memory profile's release's unset ``gpu_memory_utilization``
    (0.9 before vLLM 0.20) where that release is not the planning release: the estimate
    sizes memory from it, so the settings say the value it used."""
    from kvpure.memory_profile.releases import memory_profile_rules  # the estimate only

    rules = memory_profile_rules(profile, field="--vllm")
    if rules is memory_profile_rules(serve.vllm_version):
        return serve
    unset = Setting(value=rules.unset_gpu_memory_utilization, source=Source.VLLM_DEFAULT)
    settings = tuple(
        (name, unset if name == "gpu_memory_utilization" else setting)
        for name, setting in serve.settings
    )
    return replace(serve, settings=settings)


#: By :class:`kvpure.serve.memory.MemoryBand` value.
_VERDICT_TEXT: Final = {
    "starts": "starts (even at the low end of the estimate's band)",
    "may not start": "may not start (it starts at the high end of the estimate's "
    "band, not at the low end)",
    "does not start": "does NOT start (not even at the high end of the estimate's band)",
}


def _gib_range(low: int, high: int) -> str:
    return f"{format_gib(max(0, low))} to {format_gib(max(0, high))} GiB"


def _groups(case: MemoryCase) -> list[list[int]]:
    """The workers' indexes, grouped by equal budgets (weights, activation, KV band)."""
    groups: list[list[int]] = []
    workers = case.workers
    for index, worker in enumerate(workers):
        b = worker.budget
        key = (b.weights, b.activation, b.kv_cache_bytes_low, b.kv_cache_bytes_high)
        for group in groups:
            g = workers[group[0]].budget
            if (g.weights, g.activation, g.kv_cache_bytes_low, g.kv_cache_bytes_high) == key:
                group.append(index)
                break
        else:
            groups.append([index])
    return groups


def memory_text(case: MemoryCase) -> str:
    """The band's verdict and ranges, then the budget as vLLM would log it."""
    out = case.outcome
    low, high = out.low, out.high
    workers = case.workers
    total = workers[0].total
    mark = "exact" if total.term.exact else f"+/- {total.term.error_bytes / 2**30:.3f} GiB"
    lines = [
        f"Memory verdict: {_VERDICT_TEXT[out.verdict]}.",
        "  KV cache memory per GPU: "
        + _gib_range(
            min(w.budget.kv_cache_bytes_low for w in workers),
            max(w.budget.kv_cache_bytes_high for w in workers),
        )
        + f" (central {format_gib(max(0, min(w.budget.kv_cache_bytes for w in workers)))} GiB)",
        f"  tokens of KV cache: {low.tokens:,} to {high.tokens:,}; max concurrency "
        f"{low.concurrency:.2f}x to {high.concurrency:.2f}x at {high.max_model_len:,} "
        "tokens per request",
        "",
        f"Memory budget (vLLM {workers[0].budget.vllm_version}'s start-up profile, estimated "
        "offline; --kv-cache-memory with vLLM's logged figure replaces it):",
        f"  total memory {format_gib(total.term.bytes)} GiB from {total.source} ({mark})",
    ]
    for group in _groups(case):
        from kvpure.memory_profile.render import render_vllm_log  # the memory report only

        first = workers[group[0]].budget
        lines.extend("  " + line for line in render_vllm_log(first).splitlines())
        if len(group) > 1:
            others = ", ".join(str(workers[i].budget.worker) for i in group[1:])
            lines.append(f"  (workers {others}: the same)")
    return "\n".join(lines)


def memory_json(case: MemoryCase) -> dict[str, object]:
    """``{"memory": [per worker], "memory_verdict": {...}}`` for ``--json``."""
    out = case.outcome
    return {
        "memory": [w.to_json() for w in case.workers],
        "memory_verdict": {
            "verdict": out.verdict,
            "kv_cache_capacity_tokens": [out.low.tokens, out.high.tokens],
            "max_concurrency": [out.low.concurrency, out.high.concurrency],
            "max_model_len": [out.low.max_model_len, out.high.max_model_len],
        },
    }
