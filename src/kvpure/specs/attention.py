"""Attention specs: the full-attention family, and (re-exported) the base and other kinds.

``AttentionSpec`` is in ``kvpure.specs.attention_base``; sliding window,
chunked local, encoder-only and cross attention in
``kvpure.specs.attention_variants``. All are importable from here.

Formulas and merge rules are vLLM 0.26.0's (``vllm/v1/kv_cache_interface.py``).
Where vLLM asserts while merging, kvpure raises :class:`SpecMergeError` (a
ValueError); where vLLM raises ValueError (different window sizes in one
group), kvpure raises :class:`WindowSizeMismatchError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypedDict, cast

from kvpure.errors import (
    SpecMergeError,
    WindowSizeMismatchError,
)
from kvpure.runtime_types import typed_init, unchecked
from kvpure.settings import PlannerSettings
from kvpure.specs.attention_base import AttentionSpec, set_page_size_padded
from kvpure.specs.attention_variants import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    SlidingWindowSpec,
)
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,  # noqa: F401  # beartype resolves the inherited ``dtype: KVDtype`` hint here
    KVQuantMode,
    cdiv,
    check_optional_positive,
    nvfp4_kv_cache_full_dim,
    spec_type_names,
)

__all__ = [
    "AttentionSpec",
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "FullAttentionSpec",
    "NewAttentionFields",
    "SlidingWindowSpec",
    "full_attention_last_dim",
    "merge_full_attention",
    "new_attention_fields",
    "set_page_size_padded",
]


def _single_window(field: str, values: Sequence[int | None]) -> int | None:
    sizes = tuple(dict.fromkeys(v for v in values if v is not None))
    if not sizes:
        return None
    if len(sizes) == 1:
        return sizes[0]
    raise WindowSizeMismatchError(field=field, sizes=tuple(sorted(sizes)))


def full_attention_last_dim(spec: FullAttentionSpec) -> int:
    """Elements of K plus V in one head row of full attention, per the quantisation mode."""
    head_size_v = spec.head_size_v if spec.head_size_v is not None else spec.head_size
    if spec.kv_quant_mode.is_nvfp4:
        return nvfp4_kv_cache_full_dim(spec.head_size) + nvfp4_kv_cache_full_dim(head_size_v)
    if spec.kv_quant_mode is KVQuantMode.INT4_PER_TOKEN_HEAD:
        return spec.head_size // 2 + head_size_v // 2
    return spec.head_size + head_size_v


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class FullAttentionSpec(AttentionSpec):
    """Full attention. With the hybrid manager disabled it also carries a window or chunk."""

    #: True for the MLA layout (one latent vector per token), which merges by its own rules.
    is_mla_layout: ClassVar[bool] = False

    head_size_v: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    non_causal: bool = False

    def __post_init__(self) -> None:
        self._init_full_fields()
        self._check_padding()

    def _init_full_fields(self) -> None:
        """Validate the fields and default ``head_size_v`` (vLLM's post-init), without padding."""
        AttentionSpec.__post_init__(self)
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)
        check_optional_positive("head_size_v", self.head_size_v)
        check_optional_positive("sliding_window", self.sliding_window)
        check_optional_positive("attention_chunk_size", self.attention_chunk_size)

    @property
    def real_page_size_bytes(self) -> int:
        last_dim = full_attention_last_dim(self)
        return self.block_size * self.num_kv_heads * last_dim * self.dtype.itemsize

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        max_model_len = settings.max_model_len
        dcp = settings.decode_context_parallel_size
        if self.dcp_sharded and dcp > 1:
            max_model_len = cdiv(max_model_len, dcp)
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        return merge_full_attention(cls, specs)


class NewAttentionFields(TypedDict):
    """The attention fields vLLM 0.33 added (kvpure keeps them through merges)."""

    dcp_sharded: bool
    block_stride_alignment: int | None
    max_tp_shards: int | None
    num_head_slots: int | None
    state_content_bytes: int | None
    kv_head_major_slots: bool
    tokens_per_state: int


def new_attention_fields(spec: AttentionSpec) -> NewAttentionFields:
    """The vLLM 0.33+ attention fields of ``spec``, as keyword arguments (merges keep them)."""
    return {
        "dcp_sharded": spec.dcp_sharded,
        "block_stride_alignment": spec.block_stride_alignment,
        "max_tp_shards": spec.max_tp_shards,
        "num_head_slots": spec.num_head_slots,
        "state_content_bytes": spec.state_content_bytes,
        "kv_head_major_slots": spec.kv_head_major_slots,
        "tokens_per_state": spec.tokens_per_state,
    }


def merge_full_attention(
    cls: type[FullAttentionSpec], specs: Sequence[KVCacheSpec], **extra: object
) -> FullAttentionSpec:
    """vLLM's ``FullAttentionSpec.merge``, building ``cls`` (extra fields from ``extra``)."""
    first_spec = specs[0]
    if (  # every layer the same plain full-attention spec: the merge is that spec
        not extra
        and cls is FullAttentionSpec
        and type(first_spec) is FullAttentionSpec
        and not first_spec.is_draft
        and (first_spec.sliding_window is None or first_spec.attention_chunk_size is None)
        and all(s is first_spec or s == first_spec for s in specs)
    ):
        return first_spec
    full: list[FullAttentionSpec] = []
    for spec in specs:
        if not isinstance(spec, FullAttentionSpec):
            raise SpecMergeError(
                reason="All attention layers in the same KV cache group must be FullAttentionSpec.",
                spec_types=spec_type_names(specs),
            )
        full.append(spec)
    if any(spec.is_mla_layout for spec in full):
        raise SpecMergeError(
            reason="MLAAttentionSpec should be merged in MLAAttentionSpec.merge",
            spec_types=spec_type_names(specs),
        )
    first = full[0]
    sliding_window = _single_window("sliding_window", [s.sliding_window for s in full])
    chunk = _single_window("attention_chunk_size", [s.attention_chunk_size for s in full])
    # Built from checked specs, so without the type check (``extra``: the subclass's fields).
    build = cast(Callable[..., FullAttentionSpec], unchecked(cls))
    merged = build(
        block_size=first.block_size,
        num_kv_heads=first.num_kv_heads,
        head_size=first.head_size,
        head_size_v=first.head_size_v,
        dtype=first.dtype,
        kv_quant_mode=first.kv_quant_mode,
        page_size_padded=first.page_size_padded,
        indexes_kv_by_block_stride=first.indexes_kv_by_block_stride,
        **new_attention_fields(first),
        sliding_window=sliding_window,
        attention_chunk_size=chunk,
        non_causal=any(s.non_causal for s in full),
        **extra,
    )
    merged_fields = merged.attention_fields()
    for spec in full:
        if spec.attention_fields() != merged_fields:
            raise SpecMergeError(
                reason="All attention layers in the same KV cache group must have the "
                "same attention spec.",
                spec_types=spec_type_names(specs),
            )
    if merged.sliding_window is not None and merged.attention_chunk_size is not None:
        raise SpecMergeError(
            reason="Model with both sliding window layers and chunked local attention "
            "layers is not supported.",
            spec_types=spec_type_names(specs),
        )
    return merged
