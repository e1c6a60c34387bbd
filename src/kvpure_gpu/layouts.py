"""Backend KV-cache layouts: logical shapes and the order they sit in memory.

Each layout is what one vLLM attention backend returns from
``get_kv_cache_shape`` and ``get_kv_cache_stride_order`` (vLLM 0.26.0).
A view has the backend's logical shape; its memory follows the stride
order (``physical_shape[i] = shape[order[i]]``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from kvpure.block_table import MultipleOf
from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.runtime_types import typed

MAX_DIM = 2**62
"""The largest dimension of a view (torch sizes are signed 64-bit)."""


class KVCacheLayout(enum.Enum):
    """How one attention layer's pages are shaped.

    - ``FLASH_ATTN_NHD``: FlashAttention/FlashInfer/Triton in vLLM 0.26,
      ``(num_blocks, num_kv_heads, block_size, 2*head_size)`` with stride
      order ``(0, 2, 1, 3)``: memory is ``[blocks, tokens, heads, K|V]``.
    - ``FLASH_ATTN_HND``: the same shape, memory in that order (identity).
    - ``KV_FIRST``: the older ``(2, num_blocks, block_size, num_kv_heads,
      head_size)``, K for every block, then V: FlashAttention before vLLM 0.26,
      ROCm's ``rocm_attn`` (``RocmAttentionBackend``) today.
    - ``MLA``: vLLM's MLA common backend, ``(num_blocks, block_size,
      head_size)``, one latent vector per token.
    """

    FLASH_ATTN_NHD = "flash_attn_nhd"
    FLASH_ATTN_HND = "flash_attn_hnd"
    KV_FIRST = "kv_first"
    MLA = "mla"

    @classmethod
    def _missing_(cls, value: object) -> KVCacheLayout:
        """``KVCacheLayout("nope")`` raises kvpure's typed error naming ``layout``."""
        raise InvalidFieldError(
            field="layout",
            value=value,
            reason="must be one of " + ", ".join(repr(m.value) for m in cls),
        )

    @property
    def backend_name(self) -> str:
        """The vLLM backend class this layout is taken from."""
        return _BACKEND_NAMES[self]

    @property
    def stride_order(self) -> tuple[int, ...]:
        """The permutation from logical dims to memory order (outermost first)."""
        return _STRIDE_ORDERS[self]

    @property
    def supported_kernel_block_sizes(self) -> tuple[int | MultipleOf, ...]:
        """Kernel block sizes the backend accepts (FlashAttention: multiples of 16)."""
        return _SUPPORTED_KERNEL_BLOCK_SIZES[self]

    @property
    def block_dim(self) -> int:
        """The logical dimension that indexes blocks."""
        return 1 if self is KVCacheLayout.KV_FIRST else 0

    def kv_cache_shape(
        self, num_blocks: int, block_size: int, num_kv_heads: int, head_size: int
    ) -> tuple[int, ...]:
        """The backend's logical shape for ``num_blocks`` kernel blocks."""
        check_int("num_blocks", num_blocks, minimum=0, maximum=MAX_DIM)
        check_int("block_size", block_size, minimum=1, maximum=MAX_DIM)
        check_int("num_kv_heads", num_kv_heads, minimum=1, maximum=MAX_DIM)
        check_int("head_size", head_size, minimum=1, maximum=MAX_DIM)
        if self is KVCacheLayout.KV_FIRST:
            return (2, num_blocks, block_size, num_kv_heads, head_size)
        if self is KVCacheLayout.MLA:
            return (num_blocks, block_size, head_size)
        return (num_blocks, num_kv_heads, block_size, 2 * head_size)


_BACKEND_NAMES = {
    KVCacheLayout.FLASH_ATTN_NHD: "FlashAttentionBackend",
    KVCacheLayout.FLASH_ATTN_HND: "FlashAttentionBackend",
    KVCacheLayout.KV_FIRST: "RocmAttentionBackend",
    KVCacheLayout.MLA: "MLACommonBackend",
}

_SUPPORTED_KERNEL_BLOCK_SIZES: dict[KVCacheLayout, tuple[int | MultipleOf, ...]] = {
    KVCacheLayout.FLASH_ATTN_NHD: (MultipleOf(base=16),),
    KVCacheLayout.FLASH_ATTN_HND: (MultipleOf(base=16),),
    KVCacheLayout.KV_FIRST: (MultipleOf(base=16),),
    KVCacheLayout.MLA: (MultipleOf(base=1),),
}

_STRIDE_ORDERS = {
    KVCacheLayout.FLASH_ATTN_NHD: (0, 2, 1, 3),
    KVCacheLayout.FLASH_ATTN_HND: (0, 1, 2, 3),
    KVCacheLayout.KV_FIRST: (0, 1, 2, 3, 4),
    KVCacheLayout.MLA: (0, 1, 2),
}


@typed
def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``shape``."""
    for index, size in enumerate(shape):
        check_int(f"shape[{index}]", size, minimum=0)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


@typed
def inverse_permutation(order: Sequence[int]) -> tuple[int, ...]:
    """``inv`` with ``inv[order[i]] == i`` (numpy's ``argsort`` of a permutation)."""
    for index, axis in enumerate(order):
        check_int(f"order[{index}]", axis, minimum=0)
    if sorted(order) != list(range(len(order))):
        raise InvalidFieldError(
            field="order", value=list(order), reason=f"must be a permutation of 0..{len(order) - 1}"
        )
    inv = [0] * len(order)
    for i, o in enumerate(order):
        inv[o] = i
    return tuple(inv)
