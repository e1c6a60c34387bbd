"""The Mamba (state-space) layer spec: fixed-size recurrent state per block."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from math import prod

from kvpure.errors import InvalidFieldError
from kvpure.runtime_types import typed_init
from kvpure.settings import PlannerSettings
from kvpure.specs.base import (
    KVCacheSpec,
    KVDtype,
    cdiv,
    check_non_negative,
    check_optional_positive,
    check_positive,
    round_up,
)


class MambaAttentionBackendEnum(Enum):
    """Which Mamba-style backend a layer uses (vLLM's enum of the same name)."""

    MAMBA1 = "MAMBA1"
    MAMBA2 = "MAMBA2"
    SHORT_CONV = "SHORT_CONV"
    LINEAR = "LINEAR"
    GDN_ATTN = "GDN_ATTN"
    CUSTOM = "CUSTOM"


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MambaSpec(KVCacheSpec):
    """Mamba state: one tensor per entry of ``shapes``/``dtypes``, one state per block.

    The page is the state size, independent of ``block_size``; the platform or
    the planner may pad it (``page_size_padded``) to line up with attention pages.
    """

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[KVDtype, ...]
    page_size_padded: int | None = None
    mamba_type: MambaAttentionBackendEnum = MambaAttentionBackendEnum.MAMBA2
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0
    state_alignment: int = 1
    """vLLM 0.34: byte alignment of each state tensor within a page."""
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None
    num_heads: int = 1
    tokens_per_state: int = -1
    tp_replicated: bool = False

    def __post_init__(self) -> None:
        KVCacheSpec.__post_init__(self)
        if not self.shapes:
            raise InvalidFieldError(field="shapes", value=self.shapes, reason="must not be empty")
        for i, shape in enumerate(self.shapes):
            for j, dim in enumerate(shape):
                check_positive(f"shapes[{i}][{j}]", dim)
        if len(self.dtypes) != len(self.shapes):
            raise InvalidFieldError(
                field="dtypes",
                value=self.dtypes,
                reason=f"must give one dtype per state shape ({len(self.shapes)})",
            )
        check_optional_positive("page_size_padded", self.page_size_padded)
        padded = self.page_size_padded
        check_non_negative("num_speculative_blocks", self.num_speculative_blocks)
        check_positive("state_alignment", self.state_alignment)
        check_non_negative("num_prefill_checkpoint_blocks", self.num_prefill_checkpoint_blocks)
        check_optional_positive("prefill_checkpoint_alignment", self.prefill_checkpoint_alignment)
        check_positive("num_heads", self.num_heads)
        if padded is not None and padded % self.state_alignment:
            raise InvalidFieldError(
                field="page_size_padded",
                value=padded,
                reason=f"must be a multiple of state_alignment ({self.state_alignment} bytes)",
            )
        padded = self.page_size_padded
        if padded is not None and padded < self.state_size_bytes:
            raise InvalidFieldError(
                field="page_size_padded",
                value=padded,
                reason=f"must be at least the state size ({self.state_size_bytes} bytes)",
            )

    @property
    def state_size_bytes(self) -> int:
        """Bytes of the state tensors of one block, before padding."""
        return sum(
            round_up(prod(shape) * dtype.itemsize, self.state_alignment)
            for shape, dtype in zip(self.shapes, self.dtypes, strict=True)
        )

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            return self.page_size_padded
        return self.state_size_bytes

    def max_memory_usage_bytes(self, settings: PlannerSettings) -> int:
        mode = settings.mamba_cache_mode
        if mode == "all":
            blocks = cdiv(settings.max_model_len, self.block_size)
            return (blocks + self.num_speculative_blocks) * self.page_size_bytes
        if mode == "align":
            extra = self.num_speculative_blocks + self.num_prefill_checkpoint_blocks
            return self.page_size_bytes * (2 + extra)
        return self.page_size_bytes * (1 + self.num_speculative_blocks)

    def max_num_blocks_per_req(self, settings: PlannerSettings, max_len: int) -> int:
        if settings.mamba_cache_mode == "align":
            return cdiv(max_len, self.block_size) + self.num_speculative_blocks
        return cdiv(self.max_memory_usage_bytes(settings), self.page_size_bytes)
