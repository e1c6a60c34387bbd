"""``kvpure.plan_deployment``: ``kvpure plan MODEL [flags]`` from Python.

:func:`plan_deployment` takes what the command takes (a model as a config
mapping, a folder, a config.json path or a hub id read from the local
Hugging Face cache; ``gpu=``, ``vllm=`` and the serve flags by their option
names) and returns the command's :class:`~kvpure.cli.deployment_plan.DeploymentPlan`:
``kvpure plan X --json`` prints ``plan_deployment(X).to_json()`` for every
flag. Flag values are typed (``int``, ``bool``, ``float``) or given as the
command line's text (``"24GiB"``, ``"32K"``, ``"auto"``); a memory given as a
number is in bytes, one per GPU as a sequence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kvpure.cli.deployment_plan import DeploymentPlan, build_deployment_plan
from kvpure.cli.input_files import read_json
from kvpure.cli.memory_release import split_release_options
from kvpure.cli.plan_memory import MEMORY_OPTIONS, memory_case
from kvpure.cli.plan_options import OPTIONS
from kvpure.cli.serve_options import SERVE_OPTIONS, SERVE_SWITCHES, VLLM_OPTION
from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.hf_cache import config_argument
from kvpure.models.sentence_transformers import with_folder_modules

__all__ = [
    "FLAG_NAMES",
    "KVMemoryBand",
    "estimate_kv_cache_memory",
    "kv_memory_band_from_options",
    "plan_deployment",
    "plan_options",
]

FlagValue = str | int | float | bool | Sequence[int | str] | None

#: Every flag ``plan_deployment`` takes, by option name (the command's flags).
FLAG_NAMES: Final = frozenset(
    {option.name for option in (*OPTIONS, *SERVE_OPTIONS, *MEMORY_OPTIONS)}
    | {name for _, name, _, _ in SERVE_SWITCHES}
    | {VLLM_OPTION}
)
_SWITCH_NAMES: Final = frozenset(
    {name for _, name, _, _ in SERVE_SWITCHES}
    | {"prefix_caching", "hybrid_kv_cache_manager", "enforce_eager", "flashinfer_sampler"}
)
_SIZES: Final = frozenset({"kv_cache_memory", "gpu_memory"})


def _text(name: str, value: str | int | float | bool | Sequence[int | str]) -> str:
    if isinstance(value, bool):
        if name not in _SWITCH_NAMES:
            raise InvalidFieldError(field=name, value=value, reason="is not an on/off flag")
        return "on" if value else "off"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value}B" if name in _SIZES else str(value)
    if isinstance(value, float):
        return repr(value)
    if name != "kv_cache_memory":
        raise InvalidFieldError(field=name, value=value, reason="takes one value")
    if not isinstance(value, (list, tuple)):
        raise InvalidFieldError(
            field=name,
            value=type(value).__name__,
            reason="must be bytes (an int), a size text such as '24GiB', or a list of them "
            "(one per GPU)",
        )
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise InvalidFieldError(
                field=name,
                value=type(item).__name__,
                reason="lists one size per GPU: bytes (an int) or a text such as '24GiB'",
            )
    return ",".join(_text(name, item) for item in value)


def plan_options(flags: Mapping[str, FlagValue]) -> dict[str, str]:
    """Typed flags (by option name) as the command line's option texts; None = not given."""
    options: dict[str, str] = {}
    for name, value in flags.items():
        if name not in FLAG_NAMES:
            raise InvalidFieldError(
                field=name,
                value=value,
                reason="is not a kvpure plan flag; known: " + ", ".join(sorted(FLAG_NAMES)),
            )
        if value is not None:
            options[name] = _text(name, value)
    return options


def _model(model: Mapping[str, object] | str | os.PathLike[str]) -> tuple[object, Path | None]:
    """The parsed config.json and the folder of its weights (None for a mapping)."""
    if isinstance(model, Mapping):
        return dict(model), None
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidFieldError(
            field="model",
            value=type(model).__name__,
            reason="must be a config.json mapping, a path to config.json or its folder, "
            "or a Hugging Face id in the local cache",
        )
    name = os.fspath(model)
    if not isinstance(name, str):
        raise InvalidFieldError(
            field="model", value=type(name).__name__, reason="must be a text path, not bytes"
        )
    path = config_argument(name)
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    try:
        return read_json(path), folder
    except OSError as err:
        raise InvalidFieldError(
            field="model",
            value=name,
            reason=f"cannot be read ({err.strerror or type(err).__name__}); name an existing "
            "config.json, its folder, or a Hugging Face id in the local cache",
        ) from None


def plan_deployment(
    model: Mapping[str, object] | str | os.PathLike[str],
    *,
    gpu: str | None = None,
    vllm: str | None = None,
    kv_cache_memory: int | str | Sequence[int | str] | None = None,
    sweep: str | None = None,
    architecture_as: str | None = None,
    **flags: FlagValue,
) -> DeploymentPlan:
    """Plan ``model`` as ``vllm serve`` would run it: ``kvpure plan MODEL [flags]`` as a value.

    ``model``: a config.json mapping, a path to config.json or its folder, or a
    Hugging Face id read from the local cache. ``gpu``: a catalogue name
    (``"H100-80GB"``); ``vllm``: the release (``"0.26"``, ``"0.33"``,
    ``"0.34"``; default 0.34). ``kv_cache_memory``: vLLM's "Available KV cache
    memory" (bytes, text such as ``"24GiB"``, or one per GPU); without it the
    memory is estimated from the GPU, with its band. ``flags``: every other
    option of ``kvpure plan`` by its name (``max_model_len=32768``,
    ``tensor_parallel_size=2``, ``async_scheduling=False``,
    ``gpu_memory_utilization=0.9``, ...). Bad input raises a
    :class:`~kvpure.errors.KVPureError` naming the flag.
    """
    config, folder = _model(model)
    options = plan_options(
        {**flags, "gpu": gpu, VLLM_OPTION: vllm, "kv_cache_memory": kv_cache_memory}
    )
    return build_deployment_plan(
        config,
        options,
        sweep_text=sweep,
        architecture_as=architecture_as,
        model_folder=folder,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KVMemoryBand:
    """A GPU's estimated KV cache memory per worker: the band's low end, centre and high end.

    Bytes per worker in rank order, never negative (0: no KV memory left); the
    figures ``kvpure plan MODEL --gpu NAME`` plans at, for the release named.
    """

    vllm_version: str
    low: tuple[int, ...]
    central: tuple[int, ...]
    high: tuple[int, ...]
    gpu_memory_utilization: float

    def kv_cache_memory_option(self, end: str = "central") -> str:
        """The ``--kv-cache-memory`` text of ``low``, ``central`` or ``high``: ``"123B,..."``."""
        figures = {"low": self.low, "central": self.central, "high": self.high}.get(end)
        if figures is None:
            raise InvalidFieldError(field="end", value=end, reason="must be low, central or high")
        return ",".join(f"{figure}B" for figure in figures)


def kv_memory_band_from_options(
    config: object, options: Mapping[str, str], *, model_folder: Path | None = None
) -> KVMemoryBand:
    """The KV memory band of a config.json from option texts (``gpu`` or ``gpu_memory`` needed).

    The same estimate as ``kvpure plan CONFIG --gpu NAME`` (no ``kv_cache_memory``
    among ``options``; ``vllm``, ``tensor_parallel_size``, ``max_model_len``,
    ``gpu_memory_utilization``, ``quantization``... as that command reads them).
    """
    hf_config = parse_model_config(config)
    layout = with_folder_modules(model_layout(hf_config), model_folder)
    options = split_release_options(options)
    case = memory_case(hf_config, layout, options, model_folder=model_folder)
    budgets = [w.budget for w in case.workers]
    return KVMemoryBand(
        vllm_version=case.serve.vllm_version,
        low=tuple(max(0, b.kv_cache_bytes_low) for b in budgets),
        central=tuple(max(0, b.kv_cache_bytes) for b in budgets),
        high=tuple(max(0, b.kv_cache_bytes_high) for b in budgets),
        gpu_memory_utilization=budgets[0].gpu_memory_utilization,
    )


def estimate_kv_cache_memory(
    model: Mapping[str, object] | str | os.PathLike[str],
    *,
    gpu: str,
    vllm: str | None = None,
    **flags: FlagValue,
) -> KVMemoryBand:
    """The KV cache memory vLLM would leave on ``gpu`` for ``model``: the estimate's band.

    ``flags`` as :func:`plan_deployment` takes them (``tensor_parallel_size=2``,
    ``gpu_memory_utilization=0.9``, ``quantization="fp8"``, ...).
    """
    config, folder = _model(model)
    options = plan_options({**flags, "gpu": gpu, VLLM_OPTION: vllm})
    if "kv_cache_memory" in options:
        raise InvalidFieldError(
            field="kv_cache_memory",
            value=options["kv_cache_memory"],
            reason="replaces the estimate; leave it out to estimate it from the GPU",
        )
    return kv_memory_band_from_options(config, options, model_folder=folder)
