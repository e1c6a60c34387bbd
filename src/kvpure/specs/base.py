"""The pieces every KV cache spec shares: dtypes, quantisation modes, the base class.

``KVDtype`` names dtypes as torch does (``"bfloat16"``, ``"float8_e4m3fn"``,
...) without importing torch; ``kvpure_gpu`` maps them to ``torch.dtype``.
``KVQuantMode`` and :func:`get_kv_quant_mode` mirror vLLM's enum and its
mapping from a ``kv_cache_dtype`` string.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum
from typing import Final

from kvpure.errors import FieldTypeError, InvalidFieldError, SpecMergeError
from kvpure.field_checks import MAX_MEMORY_BYTES, check_int
from kvpure.runtime_types import typed_init
from kvpure.settings import PlannerSettings


def _check_operands(a_name: str, a: object, b_name: str, b: object) -> None:
    """Two ints, the divisor at least 1 (a bool, a float or a zero divisor refused)."""
    if type(a) is not int:
        raise FieldTypeError(field=a_name, value=a, reason="must be an int (not a bool or float)")
    check_int(b_name, b, minimum=1)


def cdiv(a: int, b: int) -> int:
    """Ceiling division, as vLLM's ``cdiv``: ``-(a // -b)``."""
    if type(a) is not int or type(b) is not int or b < 1:
        _check_operands("a", a, "b", b)
    return -(a // -b)


def round_up(x: int, y: int) -> int:
    """``x`` rounded up to a multiple of ``y``."""
    if type(x) is not int or type(y) is not int or y < 1:
        _check_operands("x", x, "y", y)
    return ((x + y - 1) // y) * y


class KVDtype(Enum):
    """A tensor element type, named as torch names it, with its size in bytes."""

    BOOL = "bool"
    UINT8 = "uint8"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E4M3FNUZ = "float8_e4m3fnuz"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT8_E5M2FNUZ = "float8_e5m2fnuz"
    FLOAT8_E8M0FNU = "float8_e8m0fnu"
    FLOAT4_E2M1FN_X2 = "float4_e2m1fn_x2"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"

    @classmethod
    def _missing_(cls, value: object) -> KVDtype:
        """``KVDtype("int3")`` raises kvpure's typed error naming the field."""
        known = ", ".join(d.value for d in cls)
        raise InvalidFieldError(
            field="dtype", value=value, reason=f"unknown dtype; expected one of {known}"
        )

    @property
    def itemsize(self) -> int:
        """Bytes per element (torch's ``element_size()``)."""
        return _ITEMSIZE[self]

    @classmethod
    def from_name(cls, name: str) -> KVDtype:
        """The dtype for a torch name, with or without the ``torch.`` prefix."""
        bare = name.removeprefix("torch.")
        bare = _ALIASES.get(bare, bare)
        try:
            return cls(bare)
        except ValueError:
            known = ", ".join(d.value for d in cls)
            raise InvalidFieldError(
                field="dtype", value=name, reason=f"unknown dtype; expected one of {known}"
            ) from None


_ITEMSIZE: dict[KVDtype, int] = {
    KVDtype.BOOL: 1,
    KVDtype.UINT8: 1,
    KVDtype.INT8: 1,
    KVDtype.INT16: 2,
    KVDtype.INT32: 4,
    KVDtype.INT64: 8,
    KVDtype.UINT16: 2,
    KVDtype.UINT32: 4,
    KVDtype.UINT64: 8,
    KVDtype.FLOAT16: 2,
    KVDtype.BFLOAT16: 2,
    KVDtype.FLOAT32: 4,
    KVDtype.FLOAT64: 8,
    KVDtype.FLOAT8_E4M3FN: 1,
    KVDtype.FLOAT8_E4M3FNUZ: 1,
    KVDtype.FLOAT8_E5M2: 1,
    KVDtype.FLOAT8_E5M2FNUZ: 1,
    KVDtype.FLOAT8_E8M0FNU: 1,
    KVDtype.FLOAT4_E2M1FN_X2: 1,
    KVDtype.COMPLEX64: 8,
    KVDtype.COMPLEX128: 16,
}

# torch's aliases of the canonical names.
_ALIASES: dict[str, str] = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "cfloat": "complex64",
    "cdouble": "complex128",
}


class KVQuantMode(IntEnum):
    """How the KV cache is quantised (vLLM's ``KVQuantMode``)."""

    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    NVFP4 = 5

    @property
    def is_per_token_head(self) -> bool:
        """True for the modes that keep an fp32 scale per token and head."""
        return self in (
            KVQuantMode.INT8_PER_TOKEN_HEAD,
            KVQuantMode.FP8_PER_TOKEN_HEAD,
            KVQuantMode.INT4_PER_TOKEN_HEAD,
        )

    @property
    def is_nvfp4(self) -> bool:
        """True for packed fp4 data with fp8 block scales."""
        return self is KVQuantMode.NVFP4


def get_kv_quant_mode(kv_cache_dtype: str) -> KVQuantMode:
    """The quantisation mode vLLM derives from a ``kv_cache_dtype`` string."""
    if not isinstance(kv_cache_dtype, str):
        raise FieldTypeError(
            field="kv_cache_dtype", value=kv_cache_dtype, reason="must be a str (auto, fp8, ...)"
        )
    named = _QUANT_BY_CACHE_DTYPE.get(kv_cache_dtype)
    if named is not None:
        return named
    if kv_cache_dtype.startswith("fp8"):
        return KVQuantMode.FP8_PER_TENSOR
    return KVQuantMode.NONE


_QUANT_BY_CACHE_DTYPE: dict[str, KVQuantMode] = {
    "int4_per_token_head": KVQuantMode.INT4_PER_TOKEN_HEAD,
    "int8_per_token_head": KVQuantMode.INT8_PER_TOKEN_HEAD,
    "fp8_per_token_head": KVQuantMode.FP8_PER_TOKEN_HEAD,
    "nvfp4": KVQuantMode.NVFP4,
}


def nvfp4_kv_cache_full_dim(head_size: int) -> int:
    """Packed bytes per head row for NVFP4: fp4 data plus one fp8 scale per 16 values."""
    return head_size // 2 + head_size // 16


MAX_SPEC_SIZE: Final = 2**40
"""The largest size a spec field takes (a block size, head count, head size, window, page
size in bytes): real ones are under 2**27; past 2**40 it is a mistake, refused."""


def check_positive(field: str, value: int) -> None:
    """Raise InvalidFieldError unless ``value`` is an int in ``[1, MAX_SPEC_SIZE]``."""
    if type(value) is not int or not 1 <= value <= MAX_SPEC_SIZE:  # common case: no call
        check_int(field, value, minimum=1, maximum=MAX_SPEC_SIZE)


def check_non_negative(field: str, value: int) -> None:
    """Raise InvalidFieldError unless ``value`` is an int of at least zero (bounded by the
    largest memory figure only: tensor sizes and block counts scale with the memory planned)."""
    if type(value) is not int or not 0 <= value <= MAX_MEMORY_BYTES:
        check_int(field, value, minimum=0, maximum=MAX_MEMORY_BYTES)


def check_optional_positive(field: str, value: int | None) -> None:
    """Like :func:`check_positive`, but ``None`` is allowed."""
    if value is not None and (type(value) is not int or not 1 <= value <= MAX_SPEC_SIZE):
        check_int(field, value, minimum=1, maximum=MAX_SPEC_SIZE)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class KVCacheSpec:
    """The KV cache format of one layer (vLLM's ``KVCacheSpec``).

    ``block_size`` is the number of tokens in a block. Subclasses give the
    page size (bytes per block) and the most memory one request can need.

    ``dcp_sharded``, ``block_stride_alignment`` and ``is_draft`` are vLLM 0.33+'s
    fields (0.26 specs leave them at their defaults): whether DCP shards the token
    positions, the byte alignment between physical blocks, and whether a draft model
    owns the layer (not compared, as in vLLM).
    """

    block_size: int
    dcp_sharded: bool = False
    block_stride_alignment: int | None = None
    is_draft: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        check_positive("block_size", self.block_size)
        check_optional_positive("block_stride_alignment", self.block_stride_alignment)

    def get_block_stride_alignment(self) -> int:
        """Bytes the stride between physical blocks must be a multiple of (vLLM 0.33+)."""
        return self.block_stride_alignment or 1

    @property
    def prefix_cacheable(self) -> bool:
        """Whether this spec's group takes part in prefix caching (vLLM 0.33+)."""
        return True

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of this layer."""
        raise NotImplementedError

    @property
    def storage_block_size(self) -> int:
        """Tokens physically stored per block (smaller than block_size when compressed)."""
        return self.block_size

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        """The most KV cache memory one request can need in this layer."""
        raise NotImplementedError

    def max_num_blocks_per_req(self, settings: PlannerSettings, max_len: int) -> int:
        """Block-table entries one request needs (the worker's block-table row length)."""
        return cdiv(max_len, self.block_size)

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        """One spec for a group of layers; vLLM's rule is that all must be equal."""
        return check_all_equal(specs)

    def copy_with_new_block_size(self, block_size: int) -> KVCacheSpec:
        """This spec with another block size (post-init rules apply again)."""
        return replace(self, block_size=block_size)


def spec_type_names(specs: Sequence[KVCacheSpec]) -> tuple[str, ...]:
    """The distinct class names of ``specs``, in first-seen order (for messages)."""
    return tuple(dict.fromkeys(type(s).__name__ for s in specs))


def check_all_equal(specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
    """vLLM's base ``merge``: every spec must equal the first; the first is returned."""
    first = specs[0]
    for spec in specs[1:]:
        if spec is not first and spec != first:
            raise SpecMergeError(
                reason="All layers in the same KV cache group must be the same.",
                spec_types=spec_type_names(specs),
            )
    return first
