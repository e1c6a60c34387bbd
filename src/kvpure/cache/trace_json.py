"""Cache-replay traces in JSON (``kvpure-cache-replay/1``): read a trace, write the goldens' shape.

:func:`parse_trace` accepts a trace object or a whole golden file (its
``trace`` is read) and ignores keys it does not know; a malformed field
raises :class:`~kvpure.cache.errors.TraceFieldError` naming its path. The
release replayed is ``vllm_version=`` (the ``--vllm`` flag), else the trace's
own ``"vllm_version"``, else the default (0.34).
:func:`render_result` gives ``{"vllm_version", "kv_cache_config", "records",
"final_state"}`` in that release's shapes (0.33+: the events' added fields,
``hits_by_source``, the lookahead header fields). A free queue longer than the
replay's ``free_queue_limit`` is written as its head, and ``free_queue_omitted``
counts the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvpure.cache.errors import TraceFieldError
from kvpure.cache.trace import (
    ArriveOp,
    CacheTrace,
    DecodeOp,
    DraftFlags,
    FinishOp,
    Op,
    ReplaySettings,
    ResetPrefixCacheOp,
    RetryOp,
)
from kvpure.cache.trace_render import render_event, render_result
from kvpure.hashing import MultiModalFeature
from kvpure.interop.planning import PlanningInput, parse_planning_input
from kvpure.versions import resolve_vllm_version

__all__ = ["TRACE_FORMAT", "parse_trace", "render_event", "render_result"]

TRACE_FORMAT = "kvpure-cache-replay/1"
JSON = dict[str, Any]

_KINDS = {
    "int": "an integer",
    "bool": "true or false",
    "str": "a string",
    "number": "a number",
    "list": "a list",
    "obj": "an object",
}


def _is(kind: str, value: object) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    return isinstance(value, Mapping)


def _field(obj: Mapping[str, Any], path: str, key: str, kind: str, default: Any = ...) -> Any:
    """``obj[key]`` checked to be of ``kind``; ``default`` (if given) when absent or null."""
    value = obj.get(key)
    if value is None:
        if default is ...:
            raise TraceFieldError(field=f"{path}.{key}", value=value, reason="is required")
        return default
    if not _is(kind, value):
        raise TraceFieldError(field=f"{path}.{key}", value=value, reason=f"must be {_KINDS[kind]}")
    return value


_JUST_INT = {int}


def _token_ids(obj: Mapping[str, Any], path: str, key: str) -> tuple[int, ...]:
    values = _field(obj, path, key, "list")
    if not values or (set(map(type, values)) == _JUST_INT and min(values) >= 0):
        return tuple(values)  # every token an exact int (C-speed check), none negative
    for i, token in enumerate(values):
        if not _is("int", token) or token < 0:
            raise TraceFieldError(
                field=f"{path}.{key}[{i}]", value=token, reason="must be a non-negative integer"
            )
    return tuple(values)


def _mm_features(obj: Mapping[str, Any], path: str) -> tuple[MultiModalFeature, ...]:
    items = _field(obj, path, "mm_features", "list", [])
    features = []
    for i, item in enumerate(items):
        where = f"{path}.mm_features[{i}]"
        item = _obj(item, where)
        features.append(
            MultiModalFeature(
                identifier=_field(item, where, "identifier", "str"),
                offset=_field(item, where, "offset", "int"),
                length=_field(item, where, "length", "int"),
            )
        )
    return tuple(features)


def _obj(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TraceFieldError(field=path, value=value, reason="must be an object")
    return value


def _parse_op(value: object, path: str) -> Op:
    item = _obj(value, path)
    name = _field(item, path, "op", "str")
    if name == "reset_prefix_cache":
        return ResetPrefixCacheOp()
    request_id = _field(item, path, "request_id", "str")
    if name == "arrive":
        prompt = _token_ids(item, path, "prompt_token_ids")
        if not prompt:
            raise TraceFieldError(
                field=f"{path}.prompt_token_ids", value=[], reason="must not be empty"
            )
        lora_name = _field(item, path, "lora_name", "str", None)
        mode = _field(item, path, "kv_cache_report_mode", "str", "incremental")
        if mode not in ("incremental", "full"):
            raise TraceFieldError(
                field=f"{path}.kv_cache_report_mode",
                value=mode,
                reason='must be "incremental" or "full"',
            )
        return ArriveOp(
            request_id=request_id,
            prompt_token_ids=prompt,
            lora_name=lora_name,
            lora_int_id=_field(item, path, "lora_int_id", "int", 1),
            lora_path=_field(
                item,
                path,
                "lora_path",
                "str",
                "" if lora_name is None else f"/adapters/{lora_name}",
            ),
            cache_salt=_field(item, path, "cache_salt", "str", None),
            mm_features=_mm_features(item, path),
            kv_cache_report_mode=mode,
            skip_reading_prefix_cache=_field(
                item, path, "skip_reading_prefix_cache", "bool", False
            ),
        )
    if name == "decode":
        return DecodeOp(request_id=request_id, token_ids=_token_ids(item, path, "token_ids"))
    if name == "retry":
        return RetryOp(request_id=request_id)
    if name == "finish":
        return FinishOp(request_id=request_id)
    raise TraceFieldError(
        field=f"{path}.op",
        value=name,
        reason="must be one of arrive, retry, decode, finish, reset_prefix_cache",
    )


def _parse_replay(obj: Mapping[str, Any]) -> ReplaySettings:
    replay = _field(obj, "trace", "replay", "obj", {})
    path = "replay"
    defaults = ReplaySettings()
    seed = replay.get("pythonhashseed", defaults.pythonhashseed)
    if _is("int", seed):
        seed = str(seed)
    if not _is("str", seed):
        raise TraceFieldError(field="replay.pythonhashseed", value=seed, reason="must be a string")
    watermark = _field(replay, path, "watermark", "number", defaults.watermark)
    if watermark < 0:
        raise TraceFieldError(field="replay.watermark", value=watermark, reason="must be >= 0")
    return ReplaySettings(
        log_stats=_field(replay, path, "log_stats", "bool", defaults.log_stats),
        enable_kv_cache_events=_field(
            replay, path, "enable_kv_cache_events", "bool", defaults.enable_kv_cache_events
        ),
        use_int_block_hashes=_field(
            replay, path, "use_int_block_hashes", "bool", defaults.use_int_block_hashes
        ),
        pythonhashseed=seed,
        watermark=float(watermark),
        reserve_full_isl=_field(
            replay, path, "reserve_full_isl", "bool", defaults.reserve_full_isl
        ),
    )


def _draft_flags(plan: Mapping[str, Any]) -> DraftFlags:
    """``plan_input.vllm_config.speculative_config``'s two 0.33+ switches (False if absent)."""
    config = plan.get("vllm_config")
    speculative = config.get("speculative_config") if isinstance(config, Mapping) else None
    if not isinstance(speculative, Mapping):
        return DraftFlags()
    path = "plan_input.vllm_config.speculative_config"
    return DraftFlags(
        disable_lookahead_block_hashes=_field(
            speculative, path, "disable_lookahead_block_hashes", "bool", False
        ),
        disable_eagle_block_drop=_field(
            speculative, path, "disable_eagle_block_drop", "bool", False
        ),
    )


def _plan_input(plan: Mapping[str, Any], vllm_version: str) -> PlanningInput:
    """The planning input, its settings answering for ``vllm_version``."""
    parsed = parse_planning_input(plan, "plan_input", vllm_version=vllm_version)
    if parsed.settings.vllm_version == vllm_version:
        return parsed
    return replace(parsed, settings=replace(parsed.settings, vllm_version=vllm_version))


def parse_trace(data: object, *, vllm_version: str | None = None) -> CacheTrace:
    """A trace object (or a golden file holding one under ``trace``) as kvpure values.

    ``vllm_version`` (``--vllm``) wins over the trace's ``"vllm_version"`` key; without
    either the default release (0.34) is replayed. An unknown version raises
    :class:`kvpure.versions.UnknownVllmVersionError` naming where it came from.
    """
    obj = _obj(data, "trace")
    if "trace" in obj and "ops" not in obj:
        obj = _obj(obj["trace"], "trace")
    data = obj
    fmt = data.get("format", TRACE_FORMAT)
    if fmt != TRACE_FORMAT:
        raise TraceFieldError(field="format", value=fmt, reason=f'must be "{TRACE_FORMAT}"')
    version = resolve_vllm_version(vllm_version, data.get("vllm_version"))
    name = data.get("name")
    plan = _field(data, "trace", "plan_input", "obj")
    ops = _field(data, "trace", "ops", "list")
    return CacheTrace(
        name=name if isinstance(name, str) else None,
        plan_input=_plan_input(plan, version),
        replay=_parse_replay(data),
        ops=tuple(_parse_op(op, f"ops[{i}]") for i, op in enumerate(ops)),
        draft_flags=_draft_flags(plan),
    )
