"""KV cache specs to and from vLLM-shaped JSON objects.

A spec object is ``{"type": <vLLM class name>, <its fields>...}`` with dtypes
as torch names, ``kv_quant_mode`` and ``mamba_type`` as enum member names,
and, on output, a ``_derived`` block of page sizes (ignored on input).
Anything malformed raises :class:`InvalidFieldError` naming the dotted path
of the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, cast

from kvpure.errors import InvalidFieldError
from kvpure.specs import (
    SPEC_CLASSES,
    AttentionSpec,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaAttentionBackendEnum,
)
from kvpure.specs.layer_map import LayerMap

JSONObject = dict[str, Any]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _int(path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFieldError(field=path, value=value, reason="must be an integer")
    return value


def _bool(path: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidFieldError(field=path, value=value, reason="must be true or false")
    return value


def _str(path: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidFieldError(field=path, value=value, reason="must be a string")
    return value


def _dtype(path: str, value: object) -> KVDtype:
    name = _str(path, value)
    try:
        return KVDtype.from_name(name)
    except InvalidFieldError as err:
        raise InvalidFieldError(field=path, value=value, reason=err.reason) from None


def _quant_mode(path: str, value: object) -> KVQuantMode:
    if isinstance(value, str) and value in KVQuantMode.__members__:
        return KVQuantMode[value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return KVQuantMode(value)
        except ValueError:
            pass
    known = ", ".join(KVQuantMode.__members__)
    raise InvalidFieldError(field=path, value=value, reason=f"must be one of {known}")


def _mamba_type(path: str, value: object) -> MambaAttentionBackendEnum:
    if isinstance(value, str) and value in MambaAttentionBackendEnum.__members__:
        return MambaAttentionBackendEnum[value]
    known = ", ".join(MambaAttentionBackendEnum.__members__)
    raise InvalidFieldError(field=path, value=value, reason=f"must be one of {known}")


def _shapes(path: str, value: object) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list | tuple):
        raise InvalidFieldError(field=path, value=value, reason="must be a list of shapes")
    shapes: list[tuple[int, ...]] = []
    for i, shape in enumerate(value):
        if not isinstance(shape, list | tuple):
            raise InvalidFieldError(field=f"{path}[{i}]", value=shape, reason="must be a list")
        shapes.append(tuple(_int(f"{path}[{i}][{j}]", d) for j, d in enumerate(shape)))
    return tuple(shapes)


def _dtypes(path: str, value: object) -> tuple[KVDtype, ...]:
    if not isinstance(value, list | tuple):
        raise InvalidFieldError(field=path, value=value, reason="must be a list of dtypes")
    return tuple(_dtype(f"{path}[{i}]", d) for i, d in enumerate(value))


_PARSERS: dict[str, Callable[[str, object], object]] = {
    "dtype": _dtype,
    "kv_quant_mode": _quant_mode,
    "mamba_type": _mamba_type,
    "shapes": _shapes,
    "dtypes": _dtypes,
    "indexes_kv_by_block_stride": _bool,
    "non_causal": _bool,
    "cache_dtype_str": _str,
    "model_version": _str,
    "mamba_cache_mode": _str,
}


def _init_fields(cls: type[KVCacheSpec]) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.init)


def parse_kv_cache_spec(obj: object, path: str = "") -> KVCacheSpec:
    """A spec from its JSON object; ``path`` prefixes field names in errors."""
    if not isinstance(obj, Mapping):
        raise InvalidFieldError(field=path or "spec", value=obj, reason="must be a JSON object")
    type_name = obj.get("type")
    cls = SPEC_CLASSES.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        known = ", ".join(SPEC_CLASSES)
        raise InvalidFieldError(
            field=_join(path, "type"),
            value=type_name,
            reason=f"unknown spec type; expected one of {known}",
        )
    fields = _init_fields(cls)
    names = {f.name for f in fields}
    for key in obj:
        if key not in names and key not in ("type", "_derived"):
            raise InvalidFieldError(
                field=_join(path, key), value=obj[key], reason=f"not a field of {type_name}"
            )
    kwargs: dict[str, object] = {}
    for f in fields:
        fpath = _join(path, f.name)
        if f.name not in obj:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InvalidFieldError(field=fpath, value=None, reason="missing")
            continue
        raw = obj[f.name]
        if raw is None:
            if f.default is not None:
                raise InvalidFieldError(field=fpath, value=raw, reason="must not be null")
            kwargs[f.name] = None
        elif f.name == "kv_cache_specs":
            kwargs[f.name] = parse_layer_specs(raw, fpath)
        else:
            kwargs[f.name] = _PARSERS.get(f.name, _int)(fpath, raw)
    try:
        build = cast(Callable[..., KVCacheSpec], cls)
        return build(**kwargs)
    except InvalidFieldError as err:
        raise InvalidFieldError(
            field=_join(path, err.field), value=err.value, reason=err.reason
        ) from None
    except TypeError as err:
        raise InvalidFieldError(field=path or "spec", value=type_name, reason=str(err)) from None


def parse_layer_specs(obj: object, path: str = "") -> LayerMap[KVCacheSpec]:
    """An ordered layer map from a JSON object ``{layer name: spec object}``."""
    if not isinstance(obj, Mapping):
        raise InvalidFieldError(
            field=path or "kv_cache_specs", value=obj, reason="must be a JSON object"
        )
    return LayerMap.from_pairs(
        (name, parse_kv_cache_spec(spec, _join(path, name))) for name, spec in obj.items()
    )


def _render_value(value: object) -> object:
    if isinstance(value, KVDtype):
        return value.value
    if isinstance(value, KVQuantMode | MambaAttentionBackendEnum):
        return value.name
    if isinstance(value, LayerMap):
        return render_layer_specs(value)
    if isinstance(value, tuple):
        return [_render_value(v) for v in value]
    return value


def derived_page_sizes(spec: KVCacheSpec) -> JSONObject:
    """The ``_derived`` block: page sizes in bytes and the storage block size in tokens."""
    if isinstance(spec, AttentionSpec):
        return {
            "page_size_bytes": spec.page_size_bytes,
            "real_page_size_bytes": spec.real_page_size_bytes,
            "unpadded_page_size_bytes": spec.unpadded_page_size_bytes,
            "storage_block_size": spec.storage_block_size,
        }
    return {"page_size_bytes": spec.page_size_bytes, "storage_block_size": spec.storage_block_size}


def render_kv_cache_spec(spec: KVCacheSpec) -> JSONObject:
    """The spec as a JSON object in the goldens' shape, ``_derived`` included."""
    out: JSONObject = {"type": type(spec).__name__}
    for f in _init_fields(type(spec)):
        out[f.name] = _render_value(getattr(spec, f.name))
    out["_derived"] = derived_page_sizes(spec)
    return out


def render_layer_specs(specs: LayerMap[KVCacheSpec]) -> JSONObject:
    """``{layer name: spec object}`` in layer order."""
    return {name: render_kv_cache_spec(spec) for name, spec in specs.ordered_items()}


__all__ = [
    "derived_page_sizes",
    "parse_kv_cache_spec",
    "parse_layer_specs",
    "render_kv_cache_spec",
    "render_layer_specs",
]
