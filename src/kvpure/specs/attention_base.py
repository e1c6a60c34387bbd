"""The attention spec base: fields every attention layer has and its page size.

vLLM 0.26.0's ``AttentionSpec`` (``vllm/v1/kv_cache_interface.py``). The full
attention family is in ``kvpure.specs.attention``, the other kinds in
``kvpure.specs.attention_variants``; ``kvpure.specs.attention`` re-exports all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvpure.errors import InvalidFieldError
from kvpure.runtime_types import typed_init
from kvpure.settings import PlannerSettings
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    cdiv,
    check_optional_positive,
    check_positive,
    nvfp4_kv_cache_full_dim,
)

__all__ = ["AttentionSpec", "set_page_size_padded"]


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
