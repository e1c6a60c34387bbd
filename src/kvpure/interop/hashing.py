"""A hashing request in the shape of the hash goldens' cases, into kvpure values.

Fields (all but ``block_size`` and one of ``prompt_token_ids`` /
``prompt_embeds`` optional):

- ``block_size``: tokens per hashed block (vLLM's ``hash_block_size``).
- ``prompt_token_ids``: a list of ints, or null for an embeddings-only prompt.
- ``lora_name``, ``lora_path``, ``cache_salt``: strings or null (a null
  ``lora_path`` is vLLM's ``LoRARequest`` default, ``""``).
- ``mm_features``: a list of ``{"identifier", "offset", "length"}``.
- ``prompt_embeds``: null, or ``{"dtype", "shape": [rows, ...], "hex"}`` with the
  raw little-endian bytes in hex; the goldens' ``{"recipe", "shape"}`` form
  ``torch.arange(N, dtype=float32).reshape(R, C) / D`` is also read.
- ``appended_output_tokens``: output steps appended after the prompt, each a
  list of ints (or one int).

Strings read from JSON are distinct objects, so pickle writes each of them out
(see :mod:`kvpure.hashing.algorithms`), as vLLM does for a request built from
the same JSON. ``share_equal_strings=True`` makes equal strings one (interned)
object instead, as when a Python caller gave vLLM the same literal twice, for
example one name as LoRA name and cache salt.

Anything malformed raises :class:`~kvpure.errors.InvalidFieldError` naming the
field. An unknown key is refused, naming the closest known one (a misspelt
``lora_nme`` would otherwise hash as a request without LoRA);
``ignore_unknown_keys=True`` reads the goldens' cases, which also hold their
expected outputs.
"""

from __future__ import annotations

import difflib
import math
import re
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_bool
from kvpure.hashing.request import HashRequest, MultiModalFeature, PromptEmbeds
from kvpure.versions import normalize_vllm_version

DTYPE_ITEM_SIZES: Mapping[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
}
"""Bytes per element of the dtypes an embeddings tensor may have."""

MAX_RECIPE_ELEMENTS = 2**25
"""The most float32 elements a ``prompt_embeds`` recipe may build (128 MiB, as much as
the largest ``hex`` embeddings a bounded input file can hold)."""

_RECIPE = re.compile(
    r"^\s*torch\.arange\(\s*(?P<count>\d{1,12}(?:\s*\*\s*\d{1,12}){0,3})\s*,\s*dtype\s*=\s*(?:torch\.)?float32\s*\)"
    r"\s*\.reshape\(\s*(?P<rows>\d{1,12})\s*,\s*(?P<cols>\d{1,12})\s*\)"
    r"(?:\s*/\s*(?P<divisor>\d{1,12}(?:\.\d{0,12})?))?\s*$"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HashRequestCase:
    """A request file: the request, its block size and the output steps to append."""

    request: HashRequest
    block_size: int
    appended_output_tokens: tuple[tuple[int, ...], ...] = ()
    num_hash_lookahead_tokens: int | None = None
    """The file's ``num_hash_lookahead_tokens`` (vLLM's L), None where it has none."""
    vllm_version: str | None = None
    """The file's ``vllm_version`` (``"0.34"``, ``"0.34.0"``...), None where it has none."""


def _int(value: object, field: str, *, minimum: int | None = None) -> int:
    if type(value) is not int:
        raise InvalidFieldError(field=field, value=value, reason="must be an integer")
    if minimum is not None and value < minimum:
        raise InvalidFieldError(field=field, value=value, reason=f"must be at least {minimum}")
    return value


def _optional_str(value: object, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidFieldError(field=field, value=value, reason="must be a string or null")


def _int_list(value: object, field: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise InvalidFieldError(field=field, value=value, reason="must be a list of integers")
    return tuple(_int(item, f"{field}[{index}]") for index, item in enumerate(value))


def _mm_features(value: object) -> tuple[MultiModalFeature, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidFieldError(field="mm_features", value=value, reason="must be a list")
    features: list[MultiModalFeature] = []
    for index, item in enumerate(value):
        field = f"mm_features[{index}]"
        if not isinstance(item, dict):
            raise InvalidFieldError(field=field, value=item, reason="must be an object")
        identifier = item.get("identifier")
        if not isinstance(identifier, str):
            raise InvalidFieldError(
                field=f"{field}.identifier", value=identifier, reason="must be a string"
            )
        offset = _int(item.get("offset"), f"{field}.offset", minimum=0)
        length = _int(item.get("length"), f"{field}.length", minimum=1)
        features.append(MultiModalFeature(identifier=identifier, offset=offset, length=length))
    return tuple(features)


def _shape(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidFieldError(
            field="prompt_embeds.shape", value=value, reason="must be a non-empty list [rows, ...]"
        )
    return tuple(
        _int(item, f"prompt_embeds.shape[{index}]", minimum=0) for index, item in enumerate(value)
    )


def _recipe_bytes(recipe: str, shape: tuple[int, ...]) -> bytes:
    match = _RECIPE.match(recipe)
    if match is None:
        raise InvalidFieldError(
            field="prompt_embeds.recipe",
            value=recipe,
            reason="only 'torch.arange(N, dtype=float32).reshape(R, C) / D' is understood",
        )
    count = math.prod(int(part) for part in match["count"].split("*"))
    rows, cols = int(match["rows"]), int(match["cols"])
    if count > MAX_RECIPE_ELEMENTS:
        raise InvalidFieldError(
            field="prompt_embeds.recipe",
            value=recipe,
            reason=f"builds {count} elements; at most {MAX_RECIPE_ELEMENTS} are allowed",
        )
    if count != rows * cols or shape != (rows, cols):
        raise InvalidFieldError(
            field="prompt_embeds.recipe",
            value=recipe,
            reason=f"the recipe's sizes must agree with shape {list(shape)}",
        )
    divisor = float(match["divisor"]) if match["divisor"] is not None else 1.0
    # float32(i) / float32(D) correctly rounded equals float32(i / D) rounded once
    # from the double (i / D has no exact float32 midpoint), so struct's rounding
    # reproduces torch's float32 division.
    return struct.pack(f"<{count}f", *(i / divisor for i in range(count)))


def _prompt_embeds(value: object) -> PromptEmbeds | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidFieldError(field="prompt_embeds", value=value, reason="must be an object")
    shape = _shape(value.get("shape"))
    if "hex" in value:
        dtype = value.get("dtype")
        if not isinstance(dtype, str) or dtype not in DTYPE_ITEM_SIZES:
            raise InvalidFieldError(
                field="prompt_embeds.dtype",
                value=dtype,
                reason=f"must be one of {', '.join(DTYPE_ITEM_SIZES)}",
            )
        text = value["hex"]
        if not isinstance(text, str):
            raise InvalidFieldError(
                field="prompt_embeds.hex", value=text, reason="must be a string"
            )
        try:
            data = bytes.fromhex(text)
        except ValueError:
            raise InvalidFieldError(
                field="prompt_embeds.hex", value=text[:40], reason="must be hexadecimal"
            ) from None
        item_size = DTYPE_ITEM_SIZES[dtype]
    elif "recipe" in value:
        recipe = value["recipe"]
        if not isinstance(recipe, str):
            raise InvalidFieldError(
                field="prompt_embeds.recipe", value=recipe, reason="must be a string"
            )
        data = _recipe_bytes(recipe, shape)
        item_size = 4
    else:
        raise InvalidFieldError(
            field="prompt_embeds", value=value, reason="needs 'hex' (with 'dtype') or 'recipe'"
        )
    row_size_bytes = math.prod(shape[1:]) * item_size
    expected = shape[0] * row_size_bytes
    if len(data) != expected or row_size_bytes < 1:
        raise InvalidFieldError(
            field="prompt_embeds.hex",
            value=f"{len(data)} bytes",
            reason=f"shape {list(shape)} of {item_size}-byte elements needs {expected} bytes",
        )
    return PromptEmbeds(data=data, row_size_bytes=row_size_bytes)


def _appended(value: object) -> tuple[tuple[int, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidFieldError(
            field="appended_output_tokens", value=value, reason="must be a list of steps"
        )
    steps: list[tuple[int, ...]] = []
    for index, step in enumerate(value):
        field = f"appended_output_tokens[{index}]"
        steps.append((_int(step, field),) if type(step) is int else _int_list(step, field))
    return tuple(steps)


def _share_equal_strings(request: HashRequest) -> HashRequest:
    def shared(text: str | None) -> str | None:
        return None if text is None else sys.intern(text)

    return replace(
        request,
        lora_name=shared(request.lora_name),
        lora_path=sys.intern(request.lora_path),
        cache_salt=shared(request.cache_salt),
        mm_features=tuple(
            replace(feature, identifier=sys.intern(feature.identifier))
            for feature in request.mm_features
        ),
    )


REQUEST_KEYS: tuple[str, ...] = (
    "prompt_token_ids",
    "lora_name",
    "lora_path",
    "cache_salt",
    "mm_features",
    "prompt_embeds",
)
"""The keys of a request object."""
CASE_KEYS: tuple[str, ...] = (
    "block_size",
    *REQUEST_KEYS,
    "appended_output_tokens",
    "num_hash_lookahead_tokens",
    "vllm_version",
)
"""The keys of a request file: the request, its block size and appended output."""


def _refuse_unknown_keys(data: Mapping[str, object], known: tuple[str, ...]) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known: " + ", ".join(known)
            raise InvalidFieldError(field=str(key), value=data[key], reason=f"unknown key; {hint}")


def hash_request_from_json(
    data: object, *, share_equal_strings: bool = False, ignore_unknown_keys: bool = False
) -> HashRequest:
    """The request part of a request object (see the module docstring)."""
    check_bool("share_equal_strings", share_equal_strings)
    check_bool("ignore_unknown_keys", ignore_unknown_keys)
    if not isinstance(data, dict):
        raise InvalidFieldError(
            field="request", value=type(data).__name__, reason="must be an object"
        )
    if not ignore_unknown_keys:
        _refuse_unknown_keys(data, CASE_KEYS)
    tokens_value = data.get("prompt_token_ids")
    tokens = None if tokens_value is None else _int_list(tokens_value, "prompt_token_ids")
    lora_path = _optional_str(data.get("lora_path"), "lora_path")
    request = HashRequest(
        prompt_token_ids=tokens,
        lora_name=_optional_str(data.get("lora_name"), "lora_name"),
        lora_path="" if lora_path is None else lora_path,
        cache_salt=_optional_str(data.get("cache_salt"), "cache_salt"),
        mm_features=_mm_features(data.get("mm_features")),
        prompt_embeds=_prompt_embeds(data.get("prompt_embeds")),
    )
    return _share_equal_strings(request) if share_equal_strings else request


def hash_case_from_json(
    data: object,
    *,
    share_equal_strings: bool = False,
    ignore_unknown_keys: bool = False,
    block_size: int | None = None,
    default_block_size: int | None = None,
) -> HashRequestCase:
    """A whole request file: request, ``block_size``, ``appended_output_tokens`` and
    ``num_hash_lookahead_tokens`` (optional).

    A bare list of token ids is a request of those tokens alone. ``block_size``
    (the command's ``--block-size``) is used where the file has none, and must
    agree with the file's where it has one; ``default_block_size`` where neither
    gives one.
    """
    if isinstance(data, list):
        data = {"prompt_token_ids": data}
    if not isinstance(data, dict):
        raise InvalidFieldError(
            field="request", value=type(data).__name__, reason="must be an object or a list"
        )
    if not ignore_unknown_keys:
        _refuse_unknown_keys(data, CASE_KEYS)
    size_value = data.get("block_size", block_size)
    if size_value is None:
        size_value = default_block_size
    if size_value is None:
        raise InvalidFieldError(
            field="block_size", value=None, reason="is required (in the file or --block-size)"
        )
    size = _int(size_value, "block_size", minimum=1)
    if block_size is not None and size != block_size:
        raise InvalidFieldError(
            field="--block-size",
            value=block_size,
            reason=f"disagrees with the file's block_size {size}",
        )
    return HashRequestCase(
        request=hash_request_from_json(
            data, share_equal_strings=share_equal_strings, ignore_unknown_keys=True
        ),
        block_size=size,
        appended_output_tokens=_appended(data.get("appended_output_tokens")),
        num_hash_lookahead_tokens=_optional_lookahead(data.get("num_hash_lookahead_tokens")),
        vllm_version=_optional_version(data.get("vllm_version")),
    )


def _optional_version(value: object) -> str | None:
    return None if value is None else normalize_vllm_version(value, field="vllm_version")


def _optional_lookahead(value: object) -> int | None:
    return None if value is None else _int(value, "num_hash_lookahead_tokens", minimum=0)
