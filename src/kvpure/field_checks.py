"""The one field check: an exact ``int`` within bounds, else :class:`InvalidFieldError`.

``bool`` is refused although it is an ``int`` subclass (``True`` is never meant
as a block size), and so is every non-int; the error names the field.

:func:`check_plan_inputs` checks the public planner's three arguments once, at
the boundary, so that the planning core runs unchecked on known-good values.
"""

from __future__ import annotations

import math

from kvpure.errors import InvalidFieldError

__all__ = ["MAX_MEMORY_BYTES", "check_int", "check_optional_int", "check_plan_inputs"]

MAX_MEMORY_BYTES = 2**96
"""The largest memory figure accepted (vLLM's integer arithmetic is exact far past real
sizes; 2**96 bytes keeps every product of block counts and page sizes a modest int)."""


def check_int(field: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """``value`` if it is an int in ``[minimum, maximum]``; else an error naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFieldError(field=field, value=value, reason="must be an integer")
    if value < minimum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at most {maximum}")
    return value


def check_optional_seconds(field: str, value: object, *, reason: str) -> None:
    """``value`` is None or a finite, non-negative int or float (seconds); else an error."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidFieldError(field=field, value=value, reason=reason)
    if value < 0:
        raise InvalidFieldError(field=field, value=value, reason=reason)


def check_optional_int(field: str, value: object, *, minimum: int) -> int | None:
    """Like :func:`check_int`, but ``None`` (not set) is allowed."""
    return None if value is None else check_int(field, value, minimum=minimum)


def check_plan_inputs(
    settings: object, specs_per_worker: object, available_memory_per_worker: object
) -> None:
    """``get_kv_cache_configs``'s arguments: PlannerSettings, per-worker mappings of layer
    names to specs, and one memory figure (an int of at most ``MAX_MEMORY_BYTES``) per worker."""
    from collections.abc import Mapping

    from kvpure.errors import KVPureTypeError
    from kvpure.settings import PlannerSettings
    from kvpure.specs.base import KVCacheSpec
    from kvpure.specs.layer_map import LayerMap

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
            name_types = {type(name) for name in specs.names}
            spec_types = {type(spec) for spec in specs.ordered_values()}
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
