"""Planning cases in vLLM-shaped JSON: read a golden's ``input``, write its result shapes.

- :func:`parse_planning_input` turns ``{"vllm_config", "available_memory",
  "kv_cache_specs"}`` into :class:`PlanningInput` (settings, per-worker
  layer maps, memory);
- :func:`render_plan` turns a :class:`KVCachePlan` into ``{"output",
  "final_max_model_len", "derived"}`` exactly as the goldens hold them;
- :func:`plan_case` does both, and renders a planning error as
  ``{"error": {"type", "vllm_type", "message"}}``.

Malformed input raises :class:`InvalidFieldError` naming the dotted path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pyrsistent import freeze, pmap

from kvpure.errors import (
    InvalidFieldError,
    KVPureError,
)
from kvpure.interop.planning_render import (
    KV_CACHE_LAYOUT,
    render_error,
    render_kv_cache_config,
    render_plan,
    vllm_error_type,
)
from kvpure.interop.spec_json import (
    JSONObject,
    derived_page_sizes,
    parse_kv_cache_spec,
    parse_layer_specs,
    render_kv_cache_spec,
    render_layer_specs,
)
from kvpure.planning.planner import KVCachePlan, get_kv_cache_configs
from kvpure.settings import PlannerSettings
from kvpure.specs import KVCacheSpec
from kvpure.specs.layer_map import LayerMap
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version, resolve_vllm_version


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanningInput:
    """A planning case's input as kvpure values."""

    settings: PlannerSettings
    kv_cache_specs: tuple[LayerMap[KVCacheSpec], ...]
    available_memory: tuple[int, ...]


def _obj(path: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidFieldError(field=path, value=value, reason="must be a JSON object")
    return value


def _get(
    obj: Mapping[str, Any], path: str, key: str, kind: str, *, required: bool, default: Any = None
) -> Any:
    if key not in obj:
        if required:
            raise InvalidFieldError(field=f"{path}.{key}", value=None, reason="missing")
        return default
    value = obj[key]
    if value is None:
        if kind.endswith("?"):
            return None
        raise InvalidFieldError(field=f"{path}.{key}", value=value, reason="must not be null")
    base = kind.rstrip("?")
    if base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "bool":
        ok = isinstance(value, bool)
    elif base == "str":
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, Mapping)
    if not ok:
        fpath = f"{path}.{key}"
        names = {
            "int": "an integer",
            "bool": "true or false",
            "str": "a string",
            "obj": "an object",
        }
        raise InvalidFieldError(field=fpath, value=value, reason=f"must be {names[base]}")
    return value


# (section of vllm_config, field, JSON kind; "?" allows null, "!" is required)
_SETTINGS_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("cache_config", "block_size", "int!"),
    ("cache_config", "enable_prefix_caching", "bool"),
    ("cache_config", "prefix_match_unit", "int?"),
    ("cache_config", "num_gpu_blocks_override", "int?"),
    ("cache_config", "mamba_cache_mode", "str"),
    ("cache_config", "cache_dtype", "str"),
    ("cache_config", "prefix_caching_hash_algo", "str"),
    ("parallel_config", "decode_context_parallel_size", "int"),
    ("parallel_config", "prefill_context_parallel_size", "int"),
    ("parallel_config", "pipeline_parallel_size", "int"),
    ("parallel_config", "tensor_parallel_size", "int"),
    ("scheduler_config", "disable_hybrid_kv_cache_manager", "bool"),
    ("scheduler_config", "max_num_batched_tokens", "int!"),
    ("scheduler_config", "max_num_encoder_input_tokens", "int"),
    ("scheduler_config", "async_scheduling", "bool"),
    ("model_config", "max_model_len", "int!"),
    ("model_config", "original_max_model_len", "int?"),
)
_SECTIONS = ("cache_config", "parallel_config", "scheduler_config", "model_config")


@cache
def _default_settings() -> PlannerSettings:
    """``PlannerSettings()``, built once: the reader takes its defaults for left-out fields
    (the default settings are frozen, so one value serves every call)."""
    return PlannerSettings()


def parse_planner_settings(
    vllm_config: object, path: str = "vllm_config", *, vllm_version: str = DEFAULT_VLLM_VERSION
) -> PlannerSettings:
    """Planner settings from a golden's ``input.vllm_config`` object.

    Fields the file leaves out take PlannerSettings' defaults, except the
    required ones (block_size, max_num_batched_tokens, max_model_len).
    """
    version = normalize_vllm_version(vllm_version)
    cfg = _obj(path, vllm_config)
    sections = {
        name: _obj(f"{path}.{name}", _get(cfg, path, name, "obj", required=True))
        for name in _SECTIONS
    }
    defaults = _default_settings()
    kwargs: dict[str, Any] = {}
    for section, key, kind in _SETTINGS_FIELDS:
        kwargs[key] = _get(
            sections[section],
            f"{path}.{section}",
            key,
            kind.rstrip("!"),
            required=kind.endswith("!"),
            default=getattr(defaults, key),
        )
    kv_transfer = _get(cfg, path, "kv_transfer_config", "obj?", required=False)
    if kv_transfer is not None:
        tpath = f"{path}.kv_transfer_config"
        extra = _get(kv_transfer, tpath, "kv_connector_extra_config", "obj?", required=False)
        kwargs["kv_connector_extra_config"] = freeze(dict(extra)) if extra is not None else pmap()
    speculative = _get(cfg, path, "speculative_config", "obj?", required=False)
    if speculative is not None:
        spath = f"{path}.speculative_config"
        kwargs["speculative_method"] = _get(speculative, spath, "method", "str?", required=False)
        kwargs["num_speculative_tokens"] = _get(
            speculative, spath, "num_speculative_tokens", "int?", required=False
        )
    kwargs["use_v2_model_runner"] = _get(
        cfg, path, "use_v2_model_runner", "bool", required=False, default=False
    )
    kwargs["vllm_version"] = version
    if version != "0.26":
        _check_newer_config(cfg, sections, path)
        lookahead = _get(cfg, path, "num_prefill_lookahead_tokens", "int?", required=False)
        if lookahead is not None:
            kwargs["num_prefill_lookahead_tokens"] = lookahead
    try:
        settings = PlannerSettings(**kwargs)
    except InvalidFieldError as err:
        owner = next((sec for sec, key, _ in _SETTINGS_FIELDS if key == err.field), None)
        where = f"{path}.{owner}" if owner else path
        raise InvalidFieldError(
            field=f"{where}.{err.field}", value=err.value, reason=err.reason
        ) from None
    return _check_derived(settings, cfg, path)


def _check_newer_config(
    cfg: Mapping[str, Any], sections: Mapping[str, Mapping[str, Any]], path: str
) -> None:
    """vLLM 0.33+ settings kvpure plans only at the values the contract fixes."""
    fixed: tuple[tuple[str, str, tuple[object, ...]], ...] = (
        ("cache_config", "mamba_cache_mode", ("none", "align")),
        ("cache_config", "kv_cache_layout", (None, "LBNHC")),
        ("cache_config", "enable_extensible_kv_cache", (None, False)),
        ("model_config", "supports_kv_cache_grouping", (None, False)),
    )
    for section, key, allowed in fixed:
        value = sections[section].get(key)
        if value not in allowed:
            raise InvalidFieldError(
                field=f"{path}.{section}.{key}",
                value=value,
                reason=f"kvpure plans vLLM 0.33+ with {' or '.join(map(repr, allowed))} here",
            )


def _check_derived(settings: PlannerSettings, cfg: Mapping[str, Any], path: str) -> PlannerSettings:
    given = _get(cfg, path, "max_concurrent_batches", "int?", required=False)
    if (
        given is not None
        and given != settings.max_concurrent_batches
        and "use_v2_model_runner" not in cfg
    ):
        v2 = PlannerSettings(**{**_settings_fields(settings), "use_v2_model_runner": True})
        if given == v2.max_concurrent_batches:
            settings = v2
    if given is not None and given != settings.max_concurrent_batches:
        raise InvalidFieldError(
            field=f"{path}.max_concurrent_batches",
            value=given,
            reason=f"does not match the settings (vLLM derives {settings.max_concurrent_batches})",
        )
    tokens = _get(cfg, path, "max_in_flight_tokens", "int?", required=False)
    if tokens is not None and tokens != settings.max_in_flight_tokens:
        raise InvalidFieldError(
            field=f"{path}.max_in_flight_tokens",
            value=tokens,
            reason=f"does not match the settings (vLLM derives {settings.max_in_flight_tokens})",
        )
    return settings


def _settings_fields(settings: PlannerSettings) -> dict[str, Any]:
    return {
        name: getattr(settings, name)
        for name, spec in PlannerSettings.__dataclass_fields__.items()
        if spec.init
    }


def case_vllm_version(case: object, vllm_version: str | None = None) -> str:
    """The release a planning case is for: ``vllm_version`` > the case's own
    ``"vllm_version"`` (beside ``"input"``, or beside ``"vllm_config"`` in an input given
    alone; never ``meta``) > the default."""
    if vllm_version is not None:
        return normalize_vllm_version(vllm_version, field="vllm_version")
    file_value = case.get("vllm_version") if isinstance(case, Mapping) else None
    return resolve_vllm_version(None, file_value)


def parse_planning_input(
    case_input: object, path: str = "input", *, vllm_version: str | None = None
) -> PlanningInput:
    """A golden's ``input`` object as kvpure values, for ``vllm_version`` (None: the
    object's own ``"vllm_version"`` key, else the default release)."""
    version = case_vllm_version(case_input, vllm_version)
    obj = _obj(path, case_input)
    settings = parse_planner_settings(obj.get("vllm_config"), "vllm_config", vllm_version=version)
    memory = obj.get("available_memory")
    if not isinstance(memory, list):
        raise InvalidFieldError(field="available_memory", value=memory, reason="must be a list")
    for i, mem in enumerate(memory):
        if isinstance(mem, bool) or not isinstance(mem, int):
            raise InvalidFieldError(
                field=f"available_memory[{i}]", value=mem, reason="must be an integer"
            )
    workers = obj.get("kv_cache_specs")
    if not isinstance(workers, list):
        raise InvalidFieldError(field="kv_cache_specs", value=workers, reason="must be a list")
    if len(workers) != len(memory):
        raise InvalidFieldError(
            field="available_memory",
            value=memory,
            reason=f"must give one figure per worker ({len(workers)} in kv_cache_specs)",
        )
    specs = tuple(
        parse_layer_specs(w, f"kv_cache_specs[{i}]", vllm_version=version)
        for i, w in enumerate(workers)
    )
    return PlanningInput(settings=settings, kv_cache_specs=specs, available_memory=tuple(memory))


def plan_input(parsed: PlanningInput) -> KVCachePlan:
    """Run the planner on a parsed case."""
    return get_kv_cache_configs(parsed.settings, parsed.kv_cache_specs, parsed.available_memory)


def plan_case(case: object, *, vllm_version: str | None = None) -> JSONObject:
    """Plan a golden case (or its ``input``); the result or ``{"error": ...}`` in the
    goldens' shapes of ``vllm_version`` (None: the case's ``"vllm_version"``, else the
    default release).

    Malformed input raises InvalidFieldError (it is not a planning outcome).
    """
    version = case_vllm_version(case, vllm_version)
    case_input = case
    if isinstance(case, Mapping) and "input" in case and "vllm_config" not in case:
        case_input = case["input"]
    parsed = parse_planning_input(case_input, vllm_version=version)
    try:
        return render_plan(plan_input(parsed))  # the logged facts are worked out here
    except KVPureError as err:
        return render_error(err)


__all__ = [
    "KV_CACHE_LAYOUT",
    "PlanningInput",
    "case_vllm_version",
    "derived_page_sizes",
    "parse_kv_cache_spec",
    "parse_layer_specs",
    "parse_planner_settings",
    "parse_planning_input",
    "plan_case",
    "plan_input",
    "render_error",
    "render_kv_cache_config",
    "render_kv_cache_spec",
    "render_layer_specs",
    "render_plan",
    "vllm_error_type",
]
