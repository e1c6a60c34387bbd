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
from kvpure.interop.spec_fields import (
    FIELDS_SINCE_0_33,
    FIELDS_UNTIL_0_26,
    IGNORED_AT_DEFAULT,
    SPEC_FIELDS,
    spec_fields,
)
from kvpure.specs import (
    SPEC_CLASSES,
    AttentionSpec,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaAttentionBackendEnum,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
)
from kvpure.specs.layer_map import LayerMap
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version

MLA_CLASSES = (MLAAttentionSpec, SlidingWindowMLASpec)

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
    "cache_role": _str,
    "dcp_sharded": _bool,
    "is_draft": _bool,
    "kv_head_major_slots": _bool,
    "is_index_group_leader": _bool,
    "non_causal_multi_token_decode": _bool,
    "bounded_replay": _bool,
    "tp_replicated": _bool,
}


def _init_fields(cls: type[KVCacheSpec]) -> tuple[dataclasses.Field[Any], ...]:
    found = _INIT_FIELDS.get(cls)
    if found is None:
        found = _INIT_FIELDS[cls] = tuple(f for f in dataclasses.fields(cls) if f.init)
    return found


_INIT_FIELDS: dict[type, tuple[dataclasses.Field[Any], ...]] = {}
"""Each spec class's init fields (read once per class)."""


#: 0.33+ fields whose non-default values change a page in ways kvpure does not model.
_NOT_MODELLED_DEFAULTS: dict[str, object] = {
    "num_head_slots": None,
    "state_content_bytes": None,
}


def _check_modelled(type_name: str, name: str, value: object, fpath: str) -> None:
    default: object = _NOT_MODELLED_DEFAULTS.get(name, value)
    if name == "tokens_per_state":
        default = -1 if type_name == "MambaSpec" else 1
    elif name == "num_heads" and type_name == "MambaSpec":
        default = 1
    if value != default:
        raise InvalidFieldError(
            field=fpath,
            value=value,
            reason=f"kvpure models only {default!r} here (a packed page layout is not modelled)",
        )


_CHECKED_BY_RELEASE = (
    frozenset(FIELDS_UNTIL_0_26) | FIELDS_SINCE_0_33 | {"head_size_v", "kv_cache_specs"}
)
"""Fields read with a release's or a class's own rule (never on the plain-int path)."""

_CLASS_KEYS: dict[tuple[str, type, str], tuple[dict[str, dataclasses.Field[Any]], set[str]]] = {}


def _class_keys(
    type_name: str, cls: type[KVCacheSpec], version: str
) -> tuple[dict[str, dataclasses.Field[Any]], set[str]]:
    """``cls``'s init fields by name and the keys allowed for it under ``version``
    (worked out once per class and release; never changed after)."""
    key = (type_name, cls, version)
    found = _CLASS_KEYS.get(key)
    if found is None:
        own = {f.name: f for f in _init_fields(cls)}
        found = _CLASS_KEYS[key] = (own, _allowed_keys(type_name, cls, version))
    return found


def _allowed_keys(type_name: str, cls: type[KVCacheSpec], version: str) -> set[str]:
    fields = spec_fields(version, type_name)
    if fields is None:
        return set()
    keys = set(fields) | set(IGNORED_AT_DEFAULT[version])
    if version != "0.26":
        keys |= set(FIELDS_UNTIL_0_26)
    return keys


def parse_kv_cache_spec(
    obj: object, path: str = "", *, vllm_version: str = DEFAULT_VLLM_VERSION
) -> KVCacheSpec:
    """A spec from its JSON object; ``path`` prefixes field names in errors.

    ``vllm_version`` picks the release's fields (section 3 of the 0.34 contract): under
    0.33/0.34 a 0.26-shaped object is read too (``indexes_kv_by_block_stride`` ignored,
    missing fields at the class's defaults, an MLA ``head_size_v`` of 0 read as absent).
    """
    version = normalize_vllm_version(vllm_version)
    if not isinstance(obj, Mapping):
        raise InvalidFieldError(field=path or "spec", value=obj, reason="must be a JSON object")
    type_name = obj.get("type")
    known = tuple(SPEC_FIELDS[version])
    cls = SPEC_CLASSES.get(type_name) if type_name in known else None
    if cls is None or not isinstance(type_name, str):
        raise InvalidFieldError(
            field=_join(path, "type"),
            value=type_name,
            reason=f"unknown spec type for vLLM {version}; expected one of {', '.join(known)}",
        )
    own, allowed = _class_keys(type_name, cls, version)
    for key in obj:
        if key not in allowed and key not in ("type", "_derived"):
            raise InvalidFieldError(
                field=_join(path, key), value=obj[key], reason=f"not a field of {type_name}"
            )
    kwargs: dict[str, object] = {}
    ignored = IGNORED_AT_DEFAULT[version]
    for name, f in own.items():
        if name not in obj or name not in allowed:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InvalidFieldError(field=_join(path, name), value=None, reason="missing")
            continue
        raw = obj[name]
        parser = _PARSERS.get(name, _int)
        if (  # the common case, a plain int or bool the release has: no path string made
            name not in ignored
            and name not in _CHECKED_BY_RELEASE
            and ((parser is _int and type(raw) is int) or (parser is _bool and type(raw) is bool))
        ):
            kwargs[name] = raw
            continue
        fpath = _join(path, name)
        if name in ignored:
            if raw not in (None, ignored[name]):
                raise InvalidFieldError(
                    field=fpath, value=raw, reason=f"vLLM {version} has no {name}"
                )
            continue
        if version != "0.26" and name in FIELDS_UNTIL_0_26:
            if name == "compress_ratio" and raw not in (None, 1):
                raise InvalidFieldError(
                    field=fpath,
                    value=raw,
                    reason=f"vLLM {version} has no compress_ratio (use vLLM 0.26)",
                )
            continue
        if version != "0.26" and name in FIELDS_SINCE_0_33:
            _check_modelled(type_name, name, raw, fpath)
        if raw is None:
            if f.default is not None:
                raise InvalidFieldError(field=fpath, value=raw, reason="must not be null")
            kwargs[name] = None
        elif name == "head_size_v" and raw == 0 and issubclass(cls, MLA_CLASSES):
            continue  # 0.33+: MLA has no separate V (default 0); kvpure keeps head_size
        elif name == "kv_cache_specs":
            kwargs[name] = parse_layer_specs(raw, fpath, vllm_version=version)
        else:
            kwargs[name] = parser(fpath, raw)
    if "head_size_v" in obj and "head_size_v" not in own:
        raw = obj["head_size_v"]
        if raw is not None and raw != obj.get("head_size"):
            raise InvalidFieldError(
                field=_join(path, "head_size_v"),
                value=raw,
                reason=f"kvpure models {type_name} with head_size_v equal to head_size",
            )
    try:
        build = cast(Callable[..., KVCacheSpec], cls)
        return build(**kwargs)
    except InvalidFieldError as err:
        raise InvalidFieldError(
            field=_join(path, err.field), value=err.value, reason=err.reason
        ) from None
    except TypeError as err:
        raise InvalidFieldError(field=path or "spec", value=type_name, reason=str(err)) from None


def parse_layer_specs(
    obj: object, path: str = "", *, vllm_version: str = DEFAULT_VLLM_VERSION
) -> LayerMap[KVCacheSpec]:
    """An ordered layer map from a JSON object ``{layer name: spec object}``."""
    if not isinstance(obj, Mapping):
        raise InvalidFieldError(
            field=path or "kv_cache_specs", value=obj, reason="must be a JSON object"
        )
    # Layers of one kind repeat the same object: each distinct text is read once and
    # its (immutable) spec shared. ``repr`` tells 1, 1.0 and True apart, as the reader does.
    # The previous layer's object, when equal key by key with values of the same types
    # (flat values; ``_derived`` is not read), is that layer's spec without a ``repr``.
    read: dict[str, KVCacheSpec] = {}
    pairs: list[tuple[str, KVCacheSpec]] = []
    previous: object = None
    spec: KVCacheSpec | None = None
    for name, spec_obj in obj.items():
        if spec is None or not _same_flat_object(spec_obj, previous):
            key = repr(spec_obj)
            spec = read.get(key)
            if spec is None:
                spec = read[key] = parse_kv_cache_spec(
                    spec_obj, _join(path, name), vllm_version=vllm_version
                )
        pairs.append((name, spec))
        previous = spec_obj
    return LayerMap.from_pairs(pairs)


def _same_flat_object(new: object, old: object) -> bool:
    """Whether ``new`` reads as ``old`` does: both dicts, equal, each key's values of one
    type (``==`` alone holds 1, 1.0 and True equal) and no nested value but ``_derived``."""
    if type(new) is not dict or type(old) is not dict or new != old:
        return False
    for key, value in new.items():
        kind = type(value)
        if kind is not type(old[key]) or (kind in (list, dict) and key != "_derived"):
            return False
    return True


def _render_value(value: object, version: str) -> object:
    if isinstance(value, KVDtype):
        return value.value
    if isinstance(value, KVQuantMode | MambaAttentionBackendEnum):
        return value.name
    if isinstance(value, LayerMap):
        return render_layer_specs(value, vllm_version=version)
    if isinstance(value, tuple):
        return [_render_value(v, version) for v in value]
    return value


def derived_page_sizes(spec: KVCacheSpec, *, vllm_version: str = "0.26") -> JSONObject:
    """The ``_derived`` block: page sizes in bytes (0.26: and the storage block size)."""
    if vllm_version != "0.26":
        if isinstance(spec, AttentionSpec):
            return {
                "page_size_bytes": spec.page_size_bytes,
                "real_page_size_bytes": spec.unpadded_page_size_bytes,
                "unpadded_page_size_bytes": spec.unpadded_page_size_bytes,
            }
        if isinstance(spec, MambaSpec):
            return {
                "page_size_bytes": spec.page_size_bytes,
                "real_page_size_bytes": spec.state_size_bytes,
            }
        return {"page_size_bytes": spec.page_size_bytes}
    if isinstance(spec, AttentionSpec):
        return {
            "page_size_bytes": spec.page_size_bytes,
            "real_page_size_bytes": spec.real_page_size_bytes,
            "unpadded_page_size_bytes": spec.unpadded_page_size_bytes,
            "storage_block_size": spec.storage_block_size,
        }
    return {"page_size_bytes": spec.page_size_bytes, "storage_block_size": spec.storage_block_size}


def _field_value(spec: KVCacheSpec, name: str, version: str) -> object:
    if name == "head_size_v" and version != "0.26":
        if isinstance(spec, MLA_CLASSES):
            value = getattr(spec, "head_size_v", None)
            return 0 if value is None or value == getattr(spec, "head_size", None) else value
        if not hasattr(spec, "head_size_v"):
            return getattr(spec, "head_size", None)
    return _render_value(getattr(spec, name), version)


def render_kv_cache_spec(
    spec: KVCacheSpec, *, vllm_version: str = DEFAULT_VLLM_VERSION
) -> JSONObject:
    """The spec as a JSON object in ``vllm_version``'s shape, ``_derived`` included."""
    version = normalize_vllm_version(vllm_version)
    type_name = type(spec).__name__
    out: JSONObject = {"type": type_name}
    names = spec_fields(version, type_name)
    if names is None:
        names = tuple(f.name for f in _init_fields(type(spec)))
    for name in names:
        out[name] = _field_value(spec, name, version)
    out["_derived"] = derived_page_sizes(spec, vllm_version=version)
    return out


def render_layer_specs(
    specs: LayerMap[KVCacheSpec], *, vllm_version: str = DEFAULT_VLLM_VERSION
) -> JSONObject:
    """``{layer name: spec object}`` in layer order."""
    return {
        name: render_kv_cache_spec(spec, vllm_version=vllm_version)
        for name, spec in specs.ordered_items()
    }


__all__ = [
    "derived_page_sizes",
    "parse_kv_cache_spec",
    "parse_layer_specs",
    "render_kv_cache_spec",
    "render_layer_specs",
]
