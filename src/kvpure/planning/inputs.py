"""The public planner's arguments, checked once at the boundary.

:func:`check_plan_inputs` refuses wrong types and out-of-range memory figures
with typed errors naming the argument, so that the planning core
(:mod:`kvpure.planning.planner` and what it calls) runs unchecked on known-good
values. It runs on every call of ``get_kv_cache_configs`` in every process: no
test hook or setting turns it off.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvpure.errors import FieldTypeError, KVPureTypeError
from kvpure.field_checks import MAX_MEMORY_BYTES, check_int
from kvpure.settings import PlannerSettings
from kvpure.specs.base import KVCacheSpec
from kvpure.specs.kv_cache_config import KVCacheConfig
from kvpure.specs.layer_map import LayerMap

__all__ = [
    "check_kv_cache_config",
    "check_memory",
    "check_plan_inputs",
    "check_settings",
    "layer_specs_checked",
]


def check_settings(settings: object) -> None:
    """Refuse ``settings`` unless it is a :class:`PlannerSettings`."""
    if not isinstance(settings, PlannerSettings):
        raise FieldTypeError(
            field="settings",
            value=settings,
            reason="must be a PlannerSettings (kvpure.PlannerSettings(vllm_version=...))",
        )


def layer_specs_checked(field: str, specs: object) -> LayerMap[KVCacheSpec]:
    """``specs`` as a LayerMap: a LayerMap or a mapping of layer names (str) to KVCacheSpec
    values, in order; anything else a typed error naming ``field``."""
    if isinstance(specs, LayerMap):
        name_types, spec_types = specs.kinds()
        if name_types <= {str} and all(issubclass(t, KVCacheSpec) for t in spec_types):
            return specs
    elif not isinstance(specs, Mapping):
        raise FieldTypeError(
            field=field,
            value=specs,
            reason="must map layer names (str) to KVCacheSpec values (a LayerMap or a dict)",
        )
    for name, spec in specs.items():
        if not isinstance(name, str):
            raise FieldTypeError(field=field, value=name, reason="a layer name is a str")
        if not isinstance(spec, KVCacheSpec):
            raise FieldTypeError(
                field=f"{field}[{name!r}]", value=spec, reason="must be a KVCacheSpec"
            )
    return specs if isinstance(specs, LayerMap) else LayerMap.from_mapping(specs)


def check_memory(field: str, value: object) -> int:
    """A memory figure in bytes: an int from 0 to ``MAX_MEMORY_BYTES``."""
    return check_int(field, value, minimum=0, maximum=MAX_MEMORY_BYTES)


def check_kv_cache_config(config: object) -> None:
    """Refuse ``config`` unless it is a :class:`KVCacheConfig`."""
    if not isinstance(config, KVCacheConfig):
        raise FieldTypeError(
            field="kv_cache_config",
            value=config,
            reason="must be a KVCacheConfig (a plan's kv_cache_configs[i])",
        )


def check_plan_inputs(
    settings: object, specs_per_worker: object, available_memory_per_worker: object
) -> None:
    """``get_kv_cache_configs``'s arguments: PlannerSettings, per-worker mappings of layer
    names to specs, and one memory figure (an int of at most ``MAX_MEMORY_BYTES``) per worker."""
    if not isinstance(settings, PlannerSettings):
        raise KVPureTypeError(
            f"get_kv_cache_configs: settings must be a PlannerSettings, "
            f"got {type(settings).__name__}"
        )
    if not isinstance(specs_per_worker, list | tuple):
        raise KVPureTypeError(
            "get_kv_cache_configs: specs_per_worker must be a list or tuple of mappings, "
            f"got {type(specs_per_worker).__name__}"
        )
    for worker, specs in enumerate(specs_per_worker):
        if not isinstance(specs, Mapping):
            raise KVPureTypeError(
                f"get_kv_cache_configs: specs_per_worker[{worker}] must map layer names to "
                f"specs, got {type(specs).__name__}"
            )
        if isinstance(specs, LayerMap):  # the common case: one set of classes per worker
            name_types, spec_types = specs.kinds()
            if name_types <= {str} and all(issubclass(t, KVCacheSpec) for t in spec_types):
                continue
        for name, spec in specs.items():
            if not isinstance(name, str) or not isinstance(spec, KVCacheSpec):
                raise KVPureTypeError(
                    f"get_kv_cache_configs: specs_per_worker[{worker}] must map layer names "
                    f"(str) to KVCacheSpec values, got {type(name).__name__} -> "
                    f"{type(spec).__name__}"
                )
    if not isinstance(available_memory_per_worker, list | tuple):
        raise KVPureTypeError(
            "get_kv_cache_configs: available_memory_per_worker must be a list or tuple of "
            f"ints (bytes), got {type(available_memory_per_worker).__name__}"
        )
    for worker, memory in enumerate(available_memory_per_worker):
        # A negative figure is vLLM's own "No available memory" error, raised by the planner.
        check_int(
            f"available_memory[{worker}]",
            memory,
            minimum=-MAX_MEMORY_BYTES,
            maximum=MAX_MEMORY_BYTES,
        )
