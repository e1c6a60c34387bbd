"""The ``vllm serve`` flags of ``kvpure plan`` beyond the deployment options: GPU and serving.

:data:`SERVE_OPTIONS` adds ``--gpu`` (or ``--gpu-memory`` with
``--gpu-capability``/``--gpu-vendor``), ``--usage-context``,
``-dp``, ``--enable-expert-parallel``, ``--max-num-seqs``,
``--async-scheduling``/``--no-async-scheduling``, ``--kv-transfer-config``
and ``--speculative-config``. :func:`serve_flags_from_options` reads every
option text (these and :data:`~kvpure.cli.plan_options.OPTIONS`) into one
:class:`~kvpure.serve.flags.ServeFlags`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Final

from pyrsistent import freeze, pmap

from kvpure.cli.errors import MissingOptionError
from kvpure.cli.option_values import (
    parse_bool,
    parse_max_model_len,
    parse_memory_bytes,
    parse_positive_int,
)
from kvpure.cli.plan_options import OPTIONS, Option, parse_attention_backend
from kvpure.errors import InvalidFieldError
from kvpure.serve.flags import USAGE_CONTEXTS, KVTransferConfig, ServeFlags, SpeculativeConfig
from kvpure.serve.gpus import GPU, VENDORS, custom_gpu, find_gpu, known_gpu_names
from kvpure.versions import resolve_vllm_version

__all__ = [
    "SERVE_OPTIONS",
    "VLLM_OPTION",
    "SERVE_SWITCHES",
    "add_serve_options",
    "given_serve_options",
    "serve_flags_from_options",
]

_MAX_GPUS: Final = 4096
#: The option name ``--vllm`` travels under among the option texts.
VLLM_OPTION: Final = "vllm"

SERVE_OPTIONS: Final[tuple[Option, ...]] = (
    Option(
        name="gpu",
        flags=("--gpu",),
        metavar="NAME",
        help="the GPU, for vLLM's GPU-dependent defaults (batch sizes, attention backend, "
        "block size): " + ", ".join(known_gpu_names()) + "; default: an H100-80GB is assumed",
    ),
    Option(
        name="gpu_memory",
        flags=("--gpu-memory",),
        metavar="SIZE",
        help="a GPU not in the list: its total memory (e.g. 94GiB); with --gpu-capability "
        "and --gpu-vendor",
    ),
    Option(
        name="gpu_capability",
        flags=("--gpu-capability",),
        metavar="X.Y",
        help="compute capability of a --gpu-memory GPU (default 9.0; AMD gfx942 is 9.4)",
    ),
    Option(
        name="gpu_vendor",
        flags=("--gpu-vendor",),
        metavar="VENDOR",
        help="vendor of a --gpu-memory GPU: " + ", ".join(VENDORS) + " (default nvidia)",
    ),
    Option(
        name="usage_context",
        flags=("--usage-context",),
        metavar="CONTEXT",
        help="serve (vllm serve, the default) or llm (the Python LLM class): batch defaults differ",
    ),
    Option(
        name="data_parallel_size",
        flags=("--data-parallel-size", "-dp"),
        metavar="N",
        help="engines, each planned alike with its own GPUs (tokens are per engine)",
    ),
    Option(
        name="max_num_seqs",
        flags=("--max-num-seqs",),
        metavar="N",
        help="requests running at once (default by GPU and usage context: 1024 or 256)",
    ),
    Option(
        name="kv_transfer_config",
        flags=("--kv-transfer-config",),
        metavar="JSON",
        help='a KV connector, e.g. \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\'; '
        "connectors without hybrid-manager support turn the hybrid manager off",
    ),
    Option(
        name="speculative_config",
        flags=("--speculative-config",),
        metavar="JSON",
        help='speculative decoding, e.g. \'{"method":"eagle3","num_speculative_tokens":3}\'; '
        "on vLLM 0.26, methods other than EAGLE/MTP/n-gram-GPU turn async scheduling off",
    ),
)


#: Switches without a value: (flag, option name, value, help).
SERVE_SWITCHES: Final = (
    (
        "--async-scheduling",
        "async_scheduling",
        "on",
        "async scheduling on (vLLM's default for generation models): sliding-window and "
        "chunked layers keep more tokens in flight",
    ),
    ("--no-async-scheduling", "async_scheduling", "off", "async scheduling off"),
    (
        "--enable-expert-parallel",
        "expert_parallel",
        "on",
        "expert parallelism: MoE weights only, the KV cache is unchanged",
    ),
)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Add :data:`SERVE_OPTIONS` and the value-less switches to ``parser``."""
    group = parser.add_argument_group("GPU and serving options (vLLM's defaults follow them)")
    for option in SERVE_OPTIONS:
        group.add_argument(
            *option.flags, dest=f"opt_{option.name}", metavar=option.metavar, help=option.help
        )
    for flag, name, value, text in SERVE_SWITCHES:
        group.add_argument(flag, dest=f"opt_{name}", action="store_const", const=value, help=text)


def given_serve_options(args: argparse.Namespace) -> dict[str, str]:
    """The GPU and serving options given on the command line, by option name."""
    names = [option.name for option in SERVE_OPTIONS] + [name for _, name, _, _ in SERVE_SWITCHES]
    given: dict[str, str] = {}
    for name in names:
        value = getattr(args, f"opt_{name}", None)
        if value is not None:
            given[name] = str(value)
    return given


def _json_object(text: str, field: str) -> dict[str, object]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidFieldError(field=field, value=text, reason="must be a JSON object") from None
    if not isinstance(data, dict):
        raise InvalidFieldError(field=field, value=text, reason="must be a JSON object")
    return data


def _kv_transfer(text: str) -> KVTransferConfig:
    data = _json_object(text, "--kv-transfer-config")
    name = data.get("kv_connector")
    if not isinstance(name, str) or not name:
        raise InvalidFieldError(
            field="--kv-transfer-config",
            value=text,
            reason='needs "kv_connector", e.g. {"kv_connector":"NixlConnector"}',
        )
    extra = data.get("kv_connector_extra_config") or {}
    if not isinstance(extra, dict):
        raise InvalidFieldError(
            field="--kv-transfer-config.kv_connector_extra_config",
            value=extra,
            reason="must be a JSON object",
        )
    connectors = extra.get("connectors", [])
    children = (
        tuple(str(child.get("kv_connector", "")) for child in connectors if isinstance(child, dict))
        if isinstance(connectors, list)
        else ()
    )
    frozen = freeze(extra)
    return KVTransferConfig(
        kv_connector=name,
        kv_connector_extra_config=frozen if frozen else pmap(),
        children=children,
    )


def _speculative(text: str) -> SpeculativeConfig:
    data = _json_object(text, "--speculative-config")
    method = data.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidFieldError(
            field="--speculative-config",
            value=text,
            reason='needs "method", e.g. {"method":"eagle3","num_speculative_tokens":3}',
        )
    tokens = data.get("num_speculative_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool)):
        raise InvalidFieldError(
            field="--speculative-config.num_speculative_tokens",
            value=tokens,
            reason="must be a whole number",
        )
    return SpeculativeConfig(
        method=method,
        num_speculative_tokens=tokens,
        disable_padded_drafter_batch=bool(data.get("disable_padded_drafter_batch", False)),
    )


def _capability(text: str) -> tuple[int, int]:
    major, dot, minor = text.strip().partition(".")
    if not (major.isdigit() and (not dot or minor.isdigit())) or len(text) > 8:
        raise InvalidFieldError(
            field="--gpu-capability", value=text, reason="must be MAJOR.MINOR, e.g. 9.0 or 8.9"
        )
    return int(major), int(minor or "0")


def _gpu(options: Mapping[str, str]) -> GPU | None:
    name = options.get("gpu")
    memory = options.get("gpu_memory")
    if name is not None and memory is not None:
        raise InvalidFieldError(
            field="--gpu-memory",
            value=memory,
            reason="describes a GPU not named by --gpu; give one or the other",
        )
    if name is not None:
        for extra in ("gpu_capability", "gpu_vendor"):
            if extra in options:
                raise InvalidFieldError(
                    field="--" + extra.replace("_", "-"),
                    value=options[extra],
                    reason="goes with --gpu-memory, not with a named --gpu",
                )
        return find_gpu(name)
    if memory is None:
        for extra in ("gpu_capability", "gpu_vendor"):
            if extra in options:
                raise MissingOptionError(
                    option="--gpu-memory", reason="to describe a GPU (its total memory)"
                )
        return None
    vendor = options.get("gpu_vendor", "nvidia").lower()
    default_cc = "9.4" if vendor == "amd" else "9.0"
    return custom_gpu(
        total_memory_bytes=parse_memory_bytes(memory, field="--gpu-memory"),
        compute_capability=_capability(options.get("gpu_capability", default_cc)),
        vendor=vendor,
    )


def _switch(options: Mapping[str, str], name: str, flag: str) -> bool | None:
    text = options.get(name)
    return None if text is None else parse_bool(text, field=flag)


def serve_flags_from_options(options: Mapping[str, str]) -> ServeFlags:
    """Every option text (by option name) read into :class:`ServeFlags`."""
    known = {option.name for option in (*OPTIONS, *SERVE_OPTIONS)} | {
        name for _, name, _, _ in SERVE_SWITCHES
    }
    known.add(VLLM_OPTION)
    for name in options:
        if name not in known:
            raise InvalidFieldError(field=name, value=options[name], reason="unknown option")
    if "kv_cache_memory" not in options:
        raise MissingOptionError(
            option="--kv-cache-memory",
            reason="for a config.json: the KV cache memory per GPU, e.g. --kv-cache-memory 24GiB "
            "(or one per GPU: 12.13GiB,11.33GiB)",
        )
    flags = {option.name: option.flags[0] for option in (*OPTIONS, *SERVE_OPTIONS)}

    def count(name: str) -> int | None:
        text = options.get(name)
        return None if text is None else parse_positive_int(text, field=flags[name])

    parts = options["kv_cache_memory"].split(",")
    if len(parts) > _MAX_GPUS:
        raise InvalidFieldError(
            field="--kv-cache-memory", value=len(parts), reason=f"lists at most {_MAX_GPUS} GPUs"
        )
    memory = tuple(parse_memory_bytes(part.strip()) for part in parts)
    length_text = options.get("max_model_len")
    length = None if length_text is None else parse_max_model_len(length_text)
    context = options.get("usage_context", "serve").lower()
    if context not in USAGE_CONTEXTS:
        raise InvalidFieldError(
            field="--usage-context", value=context, reason="must be serve or llm"
        )
    hybrid = _switch(options, "hybrid_kv_cache_manager", "--hybrid-kv-cache-manager")
    backend = options.get("attention_backend")
    transfer = options.get("kv_transfer_config")
    speculative = options.get("speculative_config")
    return ServeFlags(
        kv_cache_memory_bytes=memory,
        gpu=_gpu(options),
        usage_context=context,
        tensor_parallel_size=count("tensor_parallel_size"),
        pipeline_parallel_size=count("pipeline_parallel_size"),
        data_parallel_size=count("data_parallel_size"),
        enable_expert_parallel=bool(
            _switch(options, "expert_parallel", "--enable-expert-parallel")
        ),
        max_model_len=length,
        max_model_len_auto=length_text is not None and length is None,
        max_num_batched_tokens=count("max_num_batched_tokens"),
        max_num_seqs=count("max_num_seqs"),
        kv_cache_dtype=options.get("kv_cache_dtype"),
        dtype=options.get("dtype"),
        mamba_ssm_cache_dtype=options.get("mamba_ssm_cache_dtype"),
        block_size=count("block_size"),
        enable_prefix_caching=_switch(options, "prefix_caching", "--prefix-caching"),
        async_scheduling=_switch(options, "async_scheduling", "--async-scheduling"),
        disable_hybrid_kv_cache_manager=None if hybrid is None else not hybrid,
        kv_transfer_config=None if transfer is None else _kv_transfer(transfer),
        speculative_config=None if speculative is None else _speculative(speculative),
        attention_backend=None if backend is None else parse_attention_backend(backend),
        mamba_cache_mode=options.get("mamba_cache_mode"),
        num_gpu_blocks_override=count("num_gpu_blocks_override"),
        vllm_version=resolve_vllm_version(options.get(VLLM_OPTION)),
    )
