"""Attention specs: the AttentionSpec base, the full-attention family, windows and chunks.

Formulas and merge rules are vLLM 0.26.0's (``vllm/v1/kv_cache_interface.py``).
Where vLLM asserts while merging, kvpure raises :class:`SpecMergeError` (a
ValueError); where vLLM raises ValueError (different window sizes in one
group), kvpure raises :class:`WindowSizeMismatchError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, TypedDict, cast

from kvpure.errors import (
    ContextParallelUnsupportedError,
    InvalidFieldError,
    SpecMergeError,
    WindowSizeMismatchError,
)
from kvpure.runtime_types import typed_init, unchecked
from kvpure.settings import PlannerSettings
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    cdiv,
    check_all_equal,
    check_non_negative,
    check_optional_positive,
    check_positive,
    nvfp4_kv_cache_full_dim,
    spec_type_names,
)

_FP32_BYTES = 4


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    """Fields every attention layer has: heads, head size, dtype, quantisation, padding.

    ``indexes_kv_by_block_stride`` is vLLM 0.26's (gone in 0.33); ``max_tp_shards``,
    ``num_head_slots``, ``state_content_bytes``, ``kv_head_major_slots`` and
    ``tokens_per_state`` are 0.33+'s (kvpure models their defaults: the JSON reader
    refuses a packed page layout it cannot size).
    """

    dcp_sharded: bool = True
    num_kv_heads: int
    head_size: int
    dtype: KVDtype
    kv_quant_mode: KVQuantMode = KVQuantMode.NONE
    page_size_padded: int | None = None
    indexes_kv_by_block_stride: bool = False
    max_tp_shards: int | None = None
    num_head_slots: int | None = None
    state_content_bytes: int | None = None
    kv_head_major_slots: bool = False
    tokens_per_state: int = 1
    _page_size_bytes_memo: int = field(default=0, init=False, repr=False, compare=False)
    """``page_size_bytes`` once computed (0: not yet); the planner asks for it often."""

    def __post_init__(self) -> None:
        KVCacheSpec.__post_init__(self)
        check_positive("num_kv_heads", self.num_kv_heads)
        check_positive("head_size", self.head_size)
        check_optional_positive("page_size_padded", self.page_size_padded)
        check_optional_positive("max_tp_shards", self.max_tp_shards)

    def _check_padding(self) -> None:
        padded = self.page_size_padded
        if padded is not None and padded < self.unpadded_page_size_bytes:
            raise InvalidFieldError(
                field="page_size_padded",
                value=padded,
                reason=(
                    "must be at least the unpadded page size "
                    f"({self.unpadded_page_size_bytes} bytes)"
                ),
            )

    @property
    def real_page_size_bytes(self) -> int:
        """Bytes of K and V data in one block (2 x tokens x heads x head bytes)."""
        if self.kv_quant_mode.is_nvfp4:
            head_dim = nvfp4_kv_cache_full_dim(self.head_size)
        elif self.kv_quant_mode is KVQuantMode.INT4_PER_TOKEN_HEAD:
            head_dim = self.head_size // 2
        else:
            head_dim = self.head_size
        return 2 * self.block_size * self.num_kv_heads * head_dim * self.dtype.itemsize

    @property
    def unpadded_page_size_bytes(self) -> int:
        """The real page plus the fp32 per-token-head scales carved from the same memory."""
        unpadded = self.real_page_size_bytes
        if self.kv_quant_mode.is_per_token_head:
            unpadded += 2 * self.block_size * self.num_kv_heads * _FP32_BYTES
        return unpadded

    @property
    def page_size_bytes(self) -> int:
        memo = self._page_size_bytes_memo
        if memo:
            return memo
        padded = self.page_size_padded
        size = padded if padded is not None else self.unpadded_page_size_bytes
        object.__setattr__(self, "_page_size_bytes_memo", size)
        return size

    def max_num_blocks_per_req(self, settings: PlannerSettings, max_len: int) -> int:
        shards = settings.decode_context_parallel_size if self.dcp_sharded else 1
        return cdiv(max_len, self.block_size * shards)

    def attention_fields(self) -> tuple[object, ...]:
        """The values of the fields AttentionSpec declares (merge compares these)."""
        return (
            self.block_size,
            self.num_kv_heads,
            self.head_size,
            self.dtype,
            self.kv_quant_mode,
            self.page_size_padded,
            self.indexes_kv_by_block_stride,
            self.dcp_sharded,
            self.block_stride_alignment,
            self.max_tp_shards,
            self.num_head_slots,
            self.state_content_bytes,
            self.kv_head_major_slots,
            self.tokens_per_state,
        )


def set_page_size_padded(spec: KVCacheSpec, page_size_padded: int | None) -> None:
    """Set ``page_size_padded`` on a spec being built (as vLLM assigns the field), and
    forget the page size computed before."""
    object.__setattr__(spec, "page_size_padded", page_size_padded)
    if isinstance(spec, AttentionSpec):
        object.__setattr__(spec, "_page_size_bytes_memo", 0)


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


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Chunked local attention (Llama 4 style): each token sees its chunk only."""

    attention_chunk_size: int

    def __post_init__(self) -> None:
        AttentionSpec.__post_init__(self)
        check_positive("attention_chunk_size", self.attention_chunk_size)
        self._check_padding()

    def max_admission_blocks_per_request(
        self, max_in_flight_tokens: int, max_model_len: int
    ) -> int:
        """Blocks one request may hold: one chunk plus the in-flight tokens, capped by length."""
        num_tokens = min(self.attention_chunk_size + max_in_flight_tokens, max_model_len)
        return cdiv(num_tokens, self.block_size)

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        blocks = self.max_admission_blocks_per_request(
            settings.max_in_flight_tokens, settings.max_model_len
        )
        return blocks * self.page_size_bytes

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        return check_all_equal(specs)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding window attention over the last ``sliding_window`` tokens."""

    sliding_window: int
    head_size_v: int | None = None
    extra_retained_tokens: int = 0
    """vLLM 0.33+: trailing tokens kept below the window for multi-module drafting."""

    def __post_init__(self) -> None:
        AttentionSpec.__post_init__(self)
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)
        check_non_negative("extra_retained_tokens", self.extra_retained_tokens)
        check_positive("sliding_window", self.sliding_window)
        check_optional_positive("head_size_v", self.head_size_v)
        self._check_padding()

    @property
    def real_page_size_bytes(self) -> int:
        # As vLLM: NVFP4 is packed like full attention, but INT4 is not halved here.
        head_size_v = self.head_size_v if self.head_size_v is not None else self.head_size
        if self.kv_quant_mode.is_nvfp4:
            last_dim = nvfp4_kv_cache_full_dim(self.head_size)
            last_dim += nvfp4_kv_cache_full_dim(head_size_v)
        else:
            last_dim = self.head_size + head_size_v
        return self.block_size * self.num_kv_heads * last_dim * self.dtype.itemsize

    def max_admission_blocks_per_request(
        self, max_in_flight_tokens: int, max_model_len: int
    ) -> int:
        """Blocks one request may hold: the window less one plus in-flight tokens, plus one
        because the window may start inside a block."""
        num_tokens = min(
            self.sliding_window - 1 + self.extra_retained_tokens + max_in_flight_tokens,
            max_model_len,
        )
        return cdiv(num_tokens, self.block_size) + 1

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        if self.dcp_sharded and settings.decode_context_parallel_size != 1:
            raise ContextParallelUnsupportedError(
                spec_type=type(self).__name__,
                decode_context_parallel_size=settings.decode_context_parallel_size,
            )
        blocks = self.max_admission_blocks_per_request(
            settings.max_in_flight_tokens, settings.max_model_len
        )
        return blocks * self.page_size_bytes

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        return check_all_equal(specs)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    """Encoder-only attention: no KV cache is kept (the runner adds these layers itself)."""

    def __post_init__(self) -> None:
        AttentionSpec.__post_init__(self)
        self._check_padding()

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        return 0

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        return check_all_equal(specs)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CrossAttentionSpec(AttentionSpec):
    """Cross attention in encoder-decoder models: caches the encoder's tokens."""

    def __post_init__(self) -> None:
        AttentionSpec.__post_init__(self)
        self._check_padding()

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        max_encoder_len = settings.max_num_encoder_input_tokens
        return cdiv(max_encoder_len, self.block_size) * self.page_size_bytes

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        return check_all_equal(specs)
