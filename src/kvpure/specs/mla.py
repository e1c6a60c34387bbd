"""MLA specs: multi-head latent attention, its sliding-window form and hidden-state caches.

MLA keeps one latent vector per token (no K/V factor 2). DeepSeek-V3.2's
``fp8_ds_mla`` layout takes 656 bytes per token; DeepSeek-V4's takes 584
bytes per stored token, where ``compress_ratio`` tokens share one stored
slot (``storage_block_size = block_size // compress_ratio``). ``alignment``
pads the page up to a multiple of it, after construction, as vLLM does.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from kvpure.errors import InvalidFieldError, SpecMergeError
from kvpure.runtime_types import typed_init, unchecked
from kvpure.specs.attention import (
    AttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
    new_attention_fields,
    set_page_size_padded,
)
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,  # noqa: F401  # beartype resolves the inherited ``dtype: KVDtype`` hint here
    KVQuantMode,
    check_optional_positive,
    check_positive,
    round_up,
    spec_type_names,
)

#: Bytes per token of DeepSeek-V3.2's fp8_ds_mla layout (512 fp8 NoPE + scales + 64 bf16 RoPE).
DS_MLA_V32_BYTES_PER_TOKEN = 656
#: Bytes per stored token of DeepSeek-V4's layout (448 NoPE + 128 RoPE + 8 scale).
DS_MLA_V4_BYTES_PER_TOKEN = 584
DEEPSEEK_V4 = "deepseek_v4"
FP8_DS_MLA = "fp8_ds_mla"


SpecT = TypeVar("SpecT", bound=AttentionSpec)


def _apply_alignment_padding(spec: MLAAttentionSpec | SlidingWindowMLASpec) -> None:
    if spec.alignment is None:
        return
    real = spec.real_page_size_bytes
    padded = round_up(real, spec.alignment)
    if padded != real:
        set_page_size_padded(spec, padded)


def _check_mla_fields(spec: MLAAttentionSpec | SlidingWindowMLASpec) -> None:
    check_optional_positive("alignment", spec.alignment)
    check_positive("compress_ratio", spec.compress_ratio)
    if spec.compress_ratio > spec.block_size:
        raise InvalidFieldError(
            field="compress_ratio",
            value=spec.compress_ratio,
            reason=f"must not exceed block_size ({spec.block_size} tokens): a block would "
            "store zero tokens",
        )


def _all_of(cls: type[SpecT], specs: Sequence[KVCacheSpec]) -> list[SpecT]:
    out: list[SpecT] = []
    for spec in specs:
        if not isinstance(spec, cls):
            raise SpecMergeError(
                reason=f"All attention layers in the same KV cache group must be {cls.__name__}.",
                spec_types=spec_type_names(specs),
            )
        out.append(spec)
    return out


_MLA_SHARED_FIELDS: tuple[str, ...] = (
    "cache_dtype_str",
    "compress_ratio",
    "model_version",
    "indexes_kv_by_block_stride",
    "topk_buffer_width",
    "tokens_per_state",
    "cache_role",
    "is_index_group_leader",
    "block_stride_alignment",
)
"""The fields every layer of one MLA group must share (vLLM's merge asserts each)."""

_mla_shared_values = operator.attrgetter(*_MLA_SHARED_FIELDS)


def _single(specs: Sequence[KVCacheSpec], name: str) -> None:
    values = {getattr(s, name) for s in specs}
    if len(values) != 1:
        raise SpecMergeError(
            reason="All attention layers in the same KV cache group must use the same "
            "quantization method, compress ratio, model version, sliding window size and "
            f"KV block stride indexing; they differ in {name}: {sorted(values, key=repr)}.",
            spec_types=spec_type_names(specs),
        )


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MLAAttentionSpec(FullAttentionSpec):
    """Multi-head latent attention (DeepSeek): one latent vector per token."""

    is_mla_layout: ClassVar[bool] = True

    cache_dtype_str: str | None = None
    alignment: int | None = None
    compress_ratio: int = 1
    model_version: str | None = None
    topk_buffer_width: int | None = None
    cache_role: str = "sparse"
    is_index_group_leader: bool = False
    non_causal_multi_token_decode: bool = False

    def __post_init__(self) -> None:
        self._init_full_fields()
        _check_mla_fields(self)
        _apply_alignment_padding(self)
        self._check_padding()

    @property
    def storage_block_size(self) -> int:
        return self.block_size // self.compress_ratio

    @property
    def real_page_size_bytes(self) -> int:
        if self.cache_dtype_str == FP8_DS_MLA:
            if self.model_version == DEEPSEEK_V4:
                return self.storage_block_size * DS_MLA_V4_BYTES_PER_TOKEN
            return self.block_size * DS_MLA_V32_BYTES_PER_TOKEN
        if self.kv_quant_mode is KVQuantMode.INT4_PER_TOKEN_HEAD:
            head_dim = self.head_size // 2
        else:
            head_dim = self.head_size
        return self.storage_block_size * self.num_kv_heads * head_dim * self.dtype.itemsize

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        mla = _all_of(MLAAttentionSpec, specs)
        if len({_mla_shared_values(s) for s in mla}) != 1:  # one pass; the field named below
            for name in _MLA_SHARED_FIELDS:
                _single(mla, name)
        first = mla[0]
        return unchecked(cls)(  # built from checked specs
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            kv_quant_mode=first.kv_quant_mode,
            page_size_padded=first.page_size_padded,
            indexes_kv_by_block_stride=first.indexes_kv_by_block_stride,
            **new_attention_fields(first),
            cache_dtype_str=first.cache_dtype_str,
            compress_ratio=first.compress_ratio,
            model_version=first.model_version,
            topk_buffer_width=first.topk_buffer_width,
            cache_role=first.cache_role,
            is_index_group_leader=first.is_index_group_leader,
            non_causal_multi_token_decode=any(s.non_causal_multi_token_decode for s in mla),
        )


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HiddenStateCacheSpec(MLAAttentionSpec):
    """Marker for the hidden-state cache layers of extract_hidden_states."""


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """Sliding window attention in the MLA cache format (DeepSeek-V4).

    As in vLLM, ``head_size_v`` is not filled in here (it stays ``None``
    unless given) and the page has no K/V factor 2.
    """

    cache_dtype_str: str | None = None
    alignment: int | None = None
    compress_ratio: int = 1
    model_version: str | None = None
    bounded_replay: bool = False
    non_causal_multi_token_decode: bool = False

    def __post_init__(self) -> None:
        AttentionSpec.__post_init__(self)
        check_positive("sliding_window", self.sliding_window)
        check_optional_positive("head_size_v", self.head_size_v)
        _check_mla_fields(self)
        if self.model_version not in (None, DEEPSEEK_V4):
            raise InvalidFieldError(
                field="model_version",
                value=self.model_version,
                reason=f"Unsupported model version: must be None or {DEEPSEEK_V4!r}",
            )
        _apply_alignment_padding(self)
        self._check_padding()

    @property
    def storage_block_size(self) -> int:
        return self.block_size // self.compress_ratio

    @property
    def prefix_cacheable(self) -> bool:
        return not self.bounded_replay

    @property
    def real_page_size_bytes(self) -> int:
        if self.model_version == DEEPSEEK_V4 and self.cache_dtype_str == FP8_DS_MLA:
            return self.storage_block_size * DS_MLA_V4_BYTES_PER_TOKEN
        return self.storage_block_size * self.num_kv_heads * self.head_size * self.dtype.itemsize

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        swa = _all_of(SlidingWindowMLASpec, specs)
        for name in (
            "cache_dtype_str",
            "compress_ratio",
            "model_version",
            "sliding_window",
            "indexes_kv_by_block_stride",
            "extra_retained_tokens",
            "bounded_replay",
            "tokens_per_state",
            "block_stride_alignment",
        ):
            _single(swa, name)
        first = swa[0]
        return unchecked(cls)(  # built from checked specs
            block_size=first.block_size,
            num_kv_heads=first.num_kv_heads,
            head_size=first.head_size,
            dtype=first.dtype,
            page_size_padded=first.page_size_padded,
            indexes_kv_by_block_stride=first.indexes_kv_by_block_stride,
            **new_attention_fields(first),
            extra_retained_tokens=first.extra_retained_tokens,
            bounded_replay=first.bounded_replay,
            non_causal_multi_token_decode=any(s.non_causal_multi_token_decode for s in swa),
            sliding_window=first.sliding_window,
            cache_dtype_str=first.cache_dtype_str,
            compress_ratio=first.compress_ratio,
            model_version=first.model_version,
        )
