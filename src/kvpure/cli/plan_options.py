"""The deployment options of ``kvpure plan CONFIG.json``, as command-line flags.

Flags are named as ``vllm serve``'s. They are read as text and converted by
:func:`deployment_from_options`, so a bad value gets kvpure's one-line error
naming the flag (``--block-size: must be at least 1 (got 0)``) rather than
argparse's. ``--sweep NAME=V1,V2,...`` re-plans with one option set to each
value; :data:`SWEEPABLE` lists the names it takes.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kvpure.cli.errors import MissingOptionError
from kvpure.cli.option_values import (
    parse_bool,
    parse_max_model_len,
    parse_memory_bytes,
    parse_positive_int,
)
from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import (
    KV_CACHE_DTYPES,
    MAMBA_CACHE_MODES,
    MODEL_DTYPES,
    AttentionBackend,
    Deployment,
)
from kvpure.versions import DEFAULT_VLLM_VERSION

__all__ = [
    "OPTIONS",
    "SERVE_SWEEPABLE",
    "SWEEPABLE",
    "add_deployment_options",
    "deployment_from_options",
    "given_options",
    "parse_attention_backend",
    "parse_sweep",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """One deployment flag: its name (the sweep key), flags, metavar and help."""

    name: str
    flags: tuple[str, ...]
    metavar: str
    help: str


OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        name="kv_cache_memory",
        flags=("--kv-cache-memory",),
        metavar="SIZE",
        help="KV cache memory per GPU, vLLM's 'Available KV cache memory' (without it, "
        "estimated from --gpu): a size such as "
        "24GiB, 16GB, 512MiB (GiB/MiB are powers of 1024, GB/MB of 1000), or one per GPU "
        "in rank order as vLLM's 'Available KV cache memory' lines give them: 12.13GiB,11.33GiB",
    ),
    Option(
        name="max_model_len",
        flags=("--max-model-len",),
        metavar="TOKENS",
        help="longest request in tokens (32768, 32K = 32768, 32k = 32000), or auto to fit it "
        "to the memory (vLLM's -1); default: the model's limit from config.json",
    ),
    Option(
        name="block_size",
        flags=("--block-size",),
        metavar="N",
        help="tokens per KV cache block, a multiple of the backend's kernel block (16; 64 for "
        "FLASHMLA, 128 for CUTLASS_MLA, any for TRITON_MLA); default 16 (64 for FLASHMLA, 128 "
        "for CUTLASS_MLA); attention + Mamba hybrids raise it until a Mamba state fits a page",
    ),
    Option(
        name="kv_cache_dtype",
        flags=("--kv-cache-dtype",),
        metavar="DTYPE",
        help="KV cache element type: " + ", ".join(KV_CACHE_DTYPES) + " (auto = the model "
        "dtype; fp8 and fp8_e4m3 = float8_e4m3fn with per-tensor scales)",
    ),
    Option(
        name="dtype",
        flags=("--dtype",),
        metavar="DTYPE",
        help="model dtype: " + ", ".join(MODEL_DTYPES) + " (auto = config.json's torch_dtype; "
        "float32 checkpoints are served in bfloat16)",
    ),
    Option(
        name="mamba_ssm_cache_dtype",
        flags=("--mamba-ssm-cache-dtype",),
        metavar="DTYPE",
        help="Mamba SSM state dtype: " + ", ".join(MODEL_DTYPES) + " (auto = the model dtype)",
    ),
    Option(
        name="tensor_parallel_size",
        flags=("--tensor-parallel-size", "-tp"),
        metavar="N",
        help="GPUs per pipeline stage; KV heads are divided among them (at least one per GPU)",
    ),
    Option(
        name="pipeline_parallel_size",
        flags=("--pipeline-parallel-size", "-pp"),
        metavar="N",
        help="pipeline stages; layers are split among them as vLLM splits them",
    ),
    Option(
        name="num_gpu_blocks_override",
        flags=("--num-gpu-blocks-override",),
        metavar="N",
        help="use exactly N blocks instead of what fits in the memory",
    ),
    Option(
        name="max_num_batched_tokens",
        flags=("--max-num-batched-tokens",),
        metavar="N",
        help="tokens scheduled per step (default by GPU and usage context: 8192 or 2048 for "
        "serve); sliding-window and chunked layers keep that many tokens beyond their window",
    ),
    Option(
        name="attention_backend",
        flags=("--attention-backend",),
        metavar="NAME",
        help="attention backend: " + ", ".join(b.value for b in AttentionBackend) + "; default "
        "vLLM's choice for the --gpu and the model",
    ),
    Option(
        name="mamba_cache_mode",
        flags=("--mamba-cache-mode",),
        metavar="MODE",
        help="Mamba state caching: " + ", ".join(MAMBA_CACHE_MODES) + " (default: vLLM's, none "
        "without prefix caching, else align; 0.26: all for models with Mamba prefix caching; "
        "0.33+ has no flag: the mode follows prefix caching)",
    ),
    Option(
        name="prefix_caching",
        flags=("--prefix-caching",),
        metavar="on|off",
        help="prefix caching (default on, off for Mamba hybrids in mamba cache mode none); "
        "decides the hash block size",
    ),
    Option(
        name="hybrid_kv_cache_manager",
        flags=("--hybrid-kv-cache-manager",),
        metavar="on|off",
        help="vLLM's hybrid KV cache manager (default on); off budgets every sliding-window and "
        "chunked layer as full attention (vLLM's --disable-hybrid-kv-cache-manager)",
    ),
)

#: Options of :mod:`kvpure.cli.serve_options` and :mod:`kvpure.cli.plan_memory` a sweep takes
#: too (the GPU and what the estimated KV memory follows).
SERVE_SWEEPABLE: Final[tuple[str, ...]] = (
    "gpu",
    "gpu_memory",
    "gpu_memory_utilization",
    "quantization",
    "max_num_seqs",
    "data_parallel_size",
)
SWEEPABLE: Final[tuple[str, ...]] = tuple(option.name for option in OPTIONS) + SERVE_SWEEPABLE
_BY_NAME: Final = {option.name: option for option in OPTIONS}


def add_deployment_options(parser: argparse.ArgumentParser) -> None:
    """Add every deployment flag (read as text) and ``--sweep`` to ``parser``."""
    group = parser.add_argument_group("deployment options (for a config.json)")
    for option in OPTIONS:
        group.add_argument(
            *option.flags, dest=f"opt_{option.name}", metavar=option.metavar, help=option.help
        )
    # vLLM's own spellings of the two switches.
    for flag, dest, value in (
        ("--enable-prefix-caching", "opt_prefix_caching", "on"),
        ("--no-enable-prefix-caching", "opt_prefix_caching", "off"),
        ("--disable-hybrid-kv-cache-manager", "opt_hybrid_kv_cache_manager", "off"),
    ):
        group.add_argument(
            flag, dest=dest, action="store_const", const=value, help=f"same as {value} above"
        )
    group.add_argument(
        "--sweep",
        metavar="NAME=V1,V2,...",
        help="plan once per value of one option and print a capacity table, e.g. "
        "--sweep max_model_len=4096,32768,131072, --sweep kv_cache_memory=16GiB,24GiB, or "
        "with --gpu and no --kv-cache-memory --sweep tensor_parallel_size=1,2,4,8 or "
        "--sweep gpu=H100-80GB,A100-40GB,L4 (verdict, tokens and the longest max_model_len "
        "that starts, from the estimated memory); "
        "NAME is one of " + ", ".join(SWEEPABLE),
    )


def given_options(args: argparse.Namespace) -> dict[str, str]:
    """The deployment flags given on the command line, by option name."""
    given: dict[str, str] = {}
    for option in OPTIONS:
        value = getattr(args, f"opt_{option.name}", None)
        if value is not None:
            given[option.name] = str(value)
    return given


def parse_sweep(text: str) -> tuple[str, tuple[str, ...]]:
    """``"max_model_len=4096,32768"`` -> ``("max_model_len", ("4096", "32768"))``."""
    name, sep, values = text.partition("=")
    key = name.strip().lstrip("-").replace("-", "_")
    if not sep or key not in SWEEPABLE:
        raise InvalidFieldError(
            field="--sweep",
            value=text,
            reason="must be NAME=V1,V2,... with NAME one of " + ", ".join(SWEEPABLE),
        )
    items = tuple(v.strip() for v in values.split(",") if v.strip())
    if not items:
        raise InvalidFieldError(field="--sweep", value=text, reason="must list at least one value")
    return key, items


def _flag(name: str) -> str:
    return _BY_NAME[name].flags[0]


def _choice(name: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise InvalidFieldError(
            field=_flag(name), value=text, reason="must be one of " + ", ".join(choices)
        )
    return text


def parse_attention_backend(text: str) -> AttentionBackend:
    """``--attention-backend`` text (any case) -> the backend."""
    try:
        return AttentionBackend(text.upper())
    except ValueError:
        raise InvalidFieldError(
            field="--attention-backend",
            value=text,
            reason="must be one of " + ", ".join(b.value for b in AttentionBackend),
        ) from None


def deployment_from_options(
    options: Mapping[str, str],
    *,
    vllm_version: str = DEFAULT_VLLM_VERSION,
    async_scheduling: bool | None = None,
) -> Deployment:
    """Build the deployment from option texts (by option name); unknown names are refused.

    What the options leave out is vLLM's default for ``vllm_version``, as
    :class:`~kvpure.models.deployment.Deployment` resolves it.
    """
    for name in options:
        if name not in _BY_NAME:
            raise InvalidFieldError(field=name, value=options[name], reason="unknown option")
    if "kv_cache_memory" not in options:
        raise MissingOptionError(
            option="--kv-cache-memory",
            reason="for a config.json: the KV cache memory per GPU, e.g. --kv-cache-memory 24GiB",
        )

    def positive(name: str) -> int | None:
        text = options.get(name)
        return None if text is None else parse_positive_int(text, field=_flag(name))

    max_len_text = options.get("max_model_len")
    max_model_len = None if max_len_text is None else parse_max_model_len(max_len_text)
    auto_fit = max_len_text is not None and max_model_len is None
    prefix = options.get("prefix_caching")
    hybrid = options.get("hybrid_kv_cache_manager")
    backend = options.get("attention_backend")
    return Deployment(
        kv_cache_memory_bytes=parse_memory_bytes(options["kv_cache_memory"]),
        block_size=positive("block_size"),
        max_model_len=max_model_len,
        auto_fit_max_model_len=auto_fit,
        kv_cache_dtype=_choice(
            "kv_cache_dtype", options.get("kv_cache_dtype", "auto"), KV_CACHE_DTYPES
        ),
        dtype=_choice("dtype", options.get("dtype", "auto"), MODEL_DTYPES),
        mamba_ssm_cache_dtype=_choice(
            "mamba_ssm_cache_dtype", options.get("mamba_ssm_cache_dtype", "auto"), MODEL_DTYPES
        ),
        tensor_parallel_size=positive("tensor_parallel_size") or 1,
        pipeline_parallel_size=positive("pipeline_parallel_size") or 1,
        num_gpu_blocks_override=positive("num_gpu_blocks_override"),
        max_num_batched_tokens=positive("max_num_batched_tokens") or 8192,
        attention_backend=None if backend is None else parse_attention_backend(backend),
        mamba_cache_mode=None
        if "mamba_cache_mode" not in options
        else _choice("mamba_cache_mode", options["mamba_cache_mode"], MAMBA_CACHE_MODES),
        async_scheduling=async_scheduling,
        vllm_version=vllm_version,
        enable_prefix_caching=None
        if prefix is None
        else parse_bool(prefix, field="--prefix-caching"),
        enable_hybrid_kv_cache_manager=True
        if hybrid is None
        else parse_bool(hybrid, field="--hybrid-kv-cache-manager"),
    )
