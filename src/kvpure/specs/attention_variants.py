"""Attention specs besides the full family: sliding window, chunked local, encoder-only, cross.

Formulas and merge rules are vLLM 0.26.0's (``vllm/v1/kv_cache_interface.py``);
``kvpure.specs.attention`` re-exports these classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvpure.errors import ContextParallelUnsupportedError
from kvpure.runtime_types import typed_init
from kvpure.settings import PlannerSettings
from kvpure.specs.attention_base import AttentionSpec
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,  # noqa: F401  # beartype resolves the inherited ``dtype: KVDtype`` hint here
    KVQuantMode,  # noqa: F401  # and ``kv_quant_mode: KVQuantMode``
    cdiv,
    check_all_equal,
    check_non_negative,
    check_optional_positive,
    check_positive,
    nvfp4_kv_cache_full_dim,
)

__all__ = [
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "SlidingWindowSpec",
]


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
