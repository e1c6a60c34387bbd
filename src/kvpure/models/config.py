"""Typed reading of a Hugging Face ``config.json``.

:class:`HFConfig` wraps the parsed JSON object (frozen into PMaps and
PVectors) and reads fields with their types checked. A missing field raises
:class:`~kvpure.errors.MissingConfigFieldError` naming the field and the
architecture that needs it; a field of the wrong kind raises
:class:`~kvpure.errors.InvalidFieldError` naming it. Nested configs (the
``text_config`` of multimodal models) are read through :meth:`HFConfig.sub`,
and their fields are named with the dotted path.

Nothing here reads a file: the caller (the CLI) reads and parses the JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from pyrsistent import PMap, PVector, freeze, pmap

from kvpure.errors import InvalidFieldError
from kvpure.models.errors import MissingConfigFieldError

__all__ = ["HFConfig", "checkpoint_kv_cache_dtype", "default_max_model_len", "parse_model_config"]

_MISSING: Final = object()
#: RoPE types whose ``max_position_embeddings`` vLLM 0.33+ takes as already scaled.
_YARN_TYPES: Final = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")

# The keys vLLM reads, in this order, to find a model's maximum length; the
# smallest value present wins, except that ``model_max_length`` (Command-R)
# wins whenever it is set (vLLM's ``derive_max_model_len_and_key``).
MAX_LEN_KEYS: Final = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


MAX_CONFIG_INT = 2**40
"""The largest integer accepted in a config.json field (sizes of real models are far below)."""
_MAXIMA = {
    "num_hidden_layers": 4096,
    "num_attention_heads": 65536,
    "num_key_value_heads": 65536,
    "head_dim": 65536,
}
"""Tighter bounds where a larger value would only exhaust memory (one spec per layer)."""
MAX_MODEL_LEN = 2**40
"""The longest derived context accepted (about 10**12 tokens)."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, PVector | list | tuple):
        return "a list"
    return "an object"


@dataclass(frozen=True, slots=True, kw_only=True)
class HFConfig:
    """A config.json object (or a nested part of one), read with types checked.

    ``path`` is the dotted prefix of this part inside the file ("" at the top,
    ``"text_config."`` inside a text config); ``architecture`` is the
    architecture being read, used in error messages.
    """

    data: PMap[str, object]
    architecture: str = "this model"
    path: str = ""

    def name(self, field: str) -> str:
        """The field's dotted name inside the file."""
        return f"{self.path}{field}"

    def has(self, field: str) -> bool:
        """Whether the field is present and not null."""
        return self.data.get(field) is not None

    def raw(self, field: str) -> object:
        """The field's value as given (None when absent)."""
        return self.data.get(field)

    def with_architecture(self, architecture: str) -> HFConfig:
        """The same config, naming ``architecture`` in its errors."""
        return HFConfig(data=self.data, architecture=architecture, path=self.path)

    def sub(self, field: str) -> HFConfig:
        """The nested object ``field`` (e.g. ``text_config``) as a config."""
        value = self._get(field, _MISSING)
        if not isinstance(value, PMap):
            raise InvalidFieldError(
                field=f"config.json {self.name(field)}",
                value=value,
                reason=f"must be an object, not {_kind(value)}",
            )
        return HFConfig(data=value, architecture=self.architecture, path=f"{self.name(field)}.")

    def _get(self, field: str, default: object) -> object:
        value = self.data.get(field)
        if value is None:
            if default is _MISSING:
                raise MissingConfigFieldError(
                    field=self.name(field), architecture=self.architecture
                )
            return default
        return value

    def _bad(self, field: str, value: object, expected: str) -> InvalidFieldError:
        return InvalidFieldError(
            field=f"config.json {self.name(field)}",
            value=value,
            reason=f"must be {expected}, not {_kind(value)}",
        )

    def int_(self, field: str, default: int | None = None, *, minimum: int = 0) -> int:
        """An integer field (a float with an integral value counts), at least ``minimum``."""
        value = self._get(field, _MISSING if default is None else default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(field, value, "an integer")
        if value < minimum:
            raise InvalidFieldError(
                field=f"config.json {self.name(field)}",
                value=value,
                reason=f"must be at least {minimum}",
            )
        maximum = _MAXIMA.get(field, MAX_CONFIG_INT)
        if value > maximum:
            raise InvalidFieldError(
                field=f"config.json {self.name(field)}",
                value=value,
                reason=f"must be at most {maximum}",
            )
        return value

    def optional_int(self, field: str, *, minimum: int = 0) -> int | None:
        """An integer field that may be absent or null."""
        return self.int_(field, minimum=minimum) if self.has(field) else None

    def float_(self, field: str, default: float | None = None) -> float:
        """A number field."""
        value = self._get(field, _MISSING if default is None else default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._bad(field, value, "a number")
        if not math.isfinite(value):
            raise self._bad(field, value, "a finite number")
        return float(value)

    def str_(self, field: str, default: str | None = None) -> str:
        """A string field."""
        value = self._get(field, _MISSING if default is None else default)
        if not isinstance(value, str):
            raise self._bad(field, value, "a string")
        return value

    def bool_(self, field: str, default: bool | None = None) -> bool:
        """A boolean field."""
        value = self._get(field, _MISSING if default is None else default)
        if not isinstance(value, bool):
            raise self._bad(field, value, "true or false")
        return value

    def list_(self, field: str) -> tuple[object, ...]:
        """A list field, as a tuple of its items."""
        value = self._get(field, _MISSING)
        if not isinstance(value, PVector):
            raise self._bad(field, value, "a list")
        return tuple(value)

    def str_list(self, field: str) -> tuple[str, ...]:
        """A list of strings."""
        items = self.list_(field)
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise self._bad(f"{field}[{index}]", item, "a string")
        return tuple(str(item) for item in items)

    def int_list(self, field: str) -> tuple[int, ...]:
        """A list of integers."""
        items = self.list_(field)
        out: list[int] = []
        for index, item in enumerate(items):
            if isinstance(item, bool) or not isinstance(item, int):
                raise self._bad(f"{field}[{index}]", item, "an integer")
            out.append(item)
        return tuple(out)

    def architectures(self) -> tuple[str, ...]:
        """The ``architectures`` list (vLLM picks the model class from it)."""
        if not self.has("architectures"):
            raise MissingConfigFieldError(
                field=self.name("architectures"), architecture="every model"
            )
        names = self.str_list("architectures")
        if not names:
            raise InvalidFieldError(
                field="config.json architectures", value=[], reason="must name an architecture"
            )
        return names

    def derived_max_model_len(self, *, yarn_factor: bool = True) -> int:
        """The longest context the config allows, as vLLM derives it.

        The smallest of the length keys vLLM reads (2048 when none is present),
        times the RoPE scaling factor for scaling types other than ``su``,
        ``longrope`` and ``llama3`` (``yarn`` scales its
        ``original_max_position_embeddings``); Gemma-3 lengths are already
        scaled, so vLLM skips the factor there. That is vLLM 0.26's
        ``_get_and_verify_max_len`` (vllm/config/model.py); with
        ``yarn_factor=False`` it is 0.33's and 0.34's, where the YaRN types
        (``yarn``, ``deepseek_yarn``, ``deepseek_llama_scaling``) take
        ``max_position_embeddings`` as already scaled and apply no factor.
        """
        lengths = [self.float_(key) for key in MAX_LEN_KEYS if self.has(key)]
        derived = min(lengths) if lengths else 2048.0
        if self.has("model_max_length") and self.float_("model_max_length"):
            derived = self.float_("model_max_length")
        scaling_field = "rope_scaling" if self.has("rope_scaling") else "rope_parameters"
        model_type = self.str_("model_type", "")
        if self.has(scaling_field) and "gemma3" not in model_type:
            scaling = self.sub(scaling_field)
            rope_type = scaling.str_("rope_type", scaling.str_("type", "default"))
            unscaled = ("su", "longrope", "llama3") + (() if yarn_factor else _YARN_TYPES)
            if rope_type not in unscaled:
                if rope_type == "yarn" and scaling.has("original_max_position_embeddings"):
                    derived = scaling.float_("original_max_position_embeddings")
                derived *= scaling.float_("factor", 1.0)
                if not derived <= MAX_MODEL_LEN:
                    raise InvalidFieldError(
                        field=f"config.json {scaling.name('factor')}",
                        value=scaling.raw("factor"),
                        reason=f"scales the context to more than {MAX_MODEL_LEN} tokens",
                    )
        if not 1 <= derived <= MAX_MODEL_LEN:
            keys = [key for key in MAX_LEN_KEYS if self.has(key)] or ["max_position_embeddings"]
            raise InvalidFieldError(
                field=f"config.json {self.name(keys[0])}",
                value=derived,
                reason=f"gives a context of {derived:g} tokens; it must be 1 to {MAX_MODEL_LEN}",
            )
        return int(derived)


def _rope_type(config: HFConfig) -> str | None:
    field = "rope_scaling" if config.has("rope_scaling") else "rope_parameters"
    if not config.has(field):
        return None
    scaling = config.sub(field)
    return scaling.str_("rope_type", scaling.str_("type", "default"))


def default_max_model_len(config: HFConfig, *, yarn_factor: bool = True) -> int:
    """The max_model_len vLLM uses when none is given.

    The derived length, except for LongRoPE models, which default to their
    ``original_max_position_embeddings`` (vLLM: longer contexts slow short ones).
    ``yarn_factor`` as in :meth:`HFConfig.derived_max_model_len`.
    """
    derived = config.derived_max_model_len(yarn_factor=yarn_factor)
    if _rope_type(config) == "longrope" and config.has("original_max_position_embeddings"):
        return config.int_("original_max_position_embeddings", minimum=1)
    return derived


def parse_model_config(data: object) -> HFConfig:
    """Freeze a parsed config.json object into an :class:`HFConfig`."""
    if not isinstance(data, Mapping):
        raise InvalidFieldError(
            field="config.json", value=type(data).__name__, reason="must be a JSON object"
        )
    for key in data:
        if not isinstance(key, str):
            raise InvalidFieldError(
                field="config.json", value=key, reason="a JSON object's keys are strings"
            )
    frozen = freeze(dict(data))
    return HFConfig(data=frozen if isinstance(frozen, PMap) else pmap())


#: ModelOpt names of a KV cache quantization -> vLLM's cache dtype
#: (vllm/utils/torch_utils.py ``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP``).
_MODELOPT_KV_CACHE_DTYPES: Final = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def _modelopt_kv_algo(value: object) -> str:
    if isinstance(value, Mapping):
        if value.get("dynamic") is False and value.get("num_bits") == 8:
            return "fp8" if value.get("type") == "float" else "auto"
        if value.get("num_bits") == 4 and value.get("type") == "float":
            return "nvfp4"
        return "auto"
    if isinstance(value, str):
        return _MODELOPT_KV_CACHE_DTYPES.get(value.lower(), "auto")
    return "auto"


def checkpoint_kv_cache_dtype(config: HFConfig) -> str | None:
    """The KV cache dtype a ModelOpt checkpoint's ``quantization_config`` names.

    vLLM's ``get_kv_cache_quant_algo_string`` (vllm/utils/torch_utils.py, the
    same in 0.26, 0.33 and 0.34), read by ``resolve_kv_cache_dtype_string``
    when ``--kv-cache-dtype`` is ``auto``: for a ``modelopt*`` quant method, the
    first of ``kv_cache_scheme`` / ``kv_cache_quant_algo`` (in the inner
    ``quantization`` object, then the outer one): ``FP8`` -> ``fp8_e4m3``,
    ``NVFP4`` -> ``nvfp4``, a scheme object of 8-bit static floats -> ``fp8_e4m3``,
    anything else -> ``auto``. None when no such key is there.
    """
    raw = config.raw("quantization_config") if config.has("quantization_config") else None
    if not isinstance(raw, Mapping):
        return None
    method = raw.get("quant_method", "")
    if not isinstance(method, str) or not method.startswith("modelopt"):
        return None
    inner = raw.get("quantization", raw)
    inner = inner if isinstance(inner, Mapping) else raw
    for source, key in (
        (inner, "kv_cache_scheme"),
        (raw, "kv_cache_scheme"),
        (inner, "kv_cache_quant_algo"),
        (raw, "kv_cache_quant_algo"),
    ):
        value = source.get(key)
        if value:
            name = _modelopt_kv_algo(value)
            return _MODELOPT_KV_CACHE_DTYPES.get(name, name)
    return None
