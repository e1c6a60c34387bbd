"""Block tables and slot mappings, computed as vLLM's worker computes them.

This is the pure half of ``vllm/v1/worker/block_table.py``: no torch, no
buffers, only integers in and tuples out. ``kvpure_gpu.block_tables`` turns
the results into the int32 block-table and int64 slot-mapping tensors.

Two block sizes meet here. The KV-cache manager hands out blocks of
``block_size`` tokens; an attention kernel may address smaller blocks of
``kernel_block_size`` tokens. Manager block ``b`` is then the run of kernel
blocks ``b*k, b*k+1, ..., b*k+k-1`` with ``k = block_size // kernel_block_size``
(vLLM's ``map_to_kernel_blocks``), and block-table rows hold kernel block ids.

With decode context parallelism (DCP) a manager block holds
``block_size * dcp_world_size`` consecutive token positions, dealt out to the
ranks in runs of ``cp_kv_cache_interleave_size`` tokens; each rank stores only
its own tokens, and every other token's slot is ``PAD_SLOT_ID``.

Every public function checks its inputs at the boundary: sizes are ints in
``[1, MAX_SIZE]`` (never ``bool``), block ids, positions and counts ints in
``[0, MAX_INDEX]``, sequences lists, tuples or ranges of those; anything else
is :class:`~kvpure.errors.InvalidFieldError` naming the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kvpure.errors import (
    BlockTableRowOverflowError,
    InvalidFieldError,
    NoCommonKernelBlockSizeError,
    TokenPositionOutOfRangeError,
)
from kvpure.field_checks import check_int

PAD_SLOT_ID: Final[int] = -1
"""The slot of a padding token or of a token another DCP rank stores (vLLM's value)."""
MAX_SIZE: Final = 2**31
"""The largest block size, world size or per-request block count accepted."""
MAX_INDEX: Final = 2**62
"""The largest block id, token position or request index accepted."""


def _require_positive(field: str, value: int) -> None:
    check_int(field, value, minimum=1, maximum=MAX_SIZE)


def _ints(field: str, values: object, *, minimum: int = 0) -> Sequence[int]:
    """``values`` if it is a list, tuple or range of ints in ``[minimum, MAX_INDEX]``."""
    if isinstance(values, range):
        if len(values) and (min(values) < minimum or max(values) > MAX_INDEX):
            raise InvalidFieldError(
                field=field, value=values, reason=f"must hold ints in [{minimum}, {MAX_INDEX}]"
            )
        return values
    if not isinstance(values, list | tuple):
        raise InvalidFieldError(
            field=field, value=type(values).__name__, reason="must be a list or tuple of ints"
        )
    for index, value in enumerate(values):
        if type(value) is not int or not minimum <= value <= MAX_INDEX:
            check_int(f"{field}[{index}]", value, minimum=minimum, maximum=MAX_INDEX)
    return values


def _rows(field: str, rows: object) -> Sequence[Sequence[int]]:
    if not isinstance(rows, list | tuple):
        raise InvalidFieldError(
            field=field, value=type(rows).__name__, reason="must be a list or tuple of rows"
        )
    for index, row in enumerate(rows):
        _ints(f"{field}[{index}]", row)
    return rows


def _layout(layout: object) -> BlockTableLayout:
    if not isinstance(layout, BlockTableLayout):
        raise InvalidFieldError(
            field="layout", value=type(layout).__name__, reason="must be a BlockTableLayout"
        )
    return layout


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockTableLayout:
    """How one KV-cache group's block ids map to slots on one rank.

    ``block_size`` is the manager's block size in tokens (the group spec's
    ``block_size``), ``kernel_block_size`` the block size the attention kernel
    addresses (``None``: the same), ``dcp_world_size`` / ``dcp_rank`` vLLM's
    ``decode_context_parallel_size`` and this worker's rank in it, and
    ``cp_kv_cache_interleave_size`` how many consecutive tokens go to one rank
    before the next rank's turn.
    """

    block_size: int
    kernel_block_size: int | None = None
    dcp_world_size: int = 1
    dcp_rank: int = 0
    cp_kv_cache_interleave_size: int = 1

    def __post_init__(self) -> None:
        _require_positive("block_size", self.block_size)
        if self.kernel_block_size is not None:
            _require_positive("kernel_block_size", self.kernel_block_size)
            if self.block_size % self.kernel_block_size != 0:
                raise InvalidFieldError(
                    field="kernel_block_size",
                    value=self.kernel_block_size,
                    reason=(
                        f"must divide block_size ({self.block_size} tokens); pick a "
                        "kernel block size that is a factor of the manager's block size"
                    ),
                )
        _require_positive("dcp_world_size", self.dcp_world_size)
        check_int("dcp_rank", self.dcp_rank, minimum=0)
        if not 0 <= self.dcp_rank < self.dcp_world_size:
            raise InvalidFieldError(
                field="dcp_rank",
                value=self.dcp_rank,
                reason=f"must be in [0, dcp_world_size={self.dcp_world_size})",
            )
        _require_positive("cp_kv_cache_interleave_size", self.cp_kv_cache_interleave_size)
        if self.block_size % self.cp_kv_cache_interleave_size != 0:
            raise InvalidFieldError(
                field="cp_kv_cache_interleave_size",
                value=self.cp_kv_cache_interleave_size,
                reason=f"must divide block_size ({self.block_size} tokens)",
            )

    @property
    def resolved_kernel_block_size(self) -> int:
        """The kernel block size in tokens (``block_size`` when none was given)."""
        return self.block_size if self.kernel_block_size is None else self.kernel_block_size

    @property
    def blocks_per_kv_block(self) -> int:
        """How many kernel blocks one manager block splits into."""
        return self.block_size // self.resolved_kernel_block_size

    @property
    def virtual_block_size(self) -> int:
        """Token positions one manager block covers across all DCP ranks."""
        return self.block_size * self.dcp_world_size


def map_to_kernel_blocks(block_ids: Sequence[int], blocks_per_kv_block: int) -> tuple[int, ...]:
    """Expand manager block ids into kernel block ids: ``b -> b*k + 0, ..., b*k + k-1``."""
    _require_positive("blocks_per_kv_block", blocks_per_kv_block)
    _ints("block_ids", block_ids)
    k = blocks_per_kv_block
    return tuple(b * k + j for b in block_ids for j in range(k))


def block_table_width(max_num_blocks_per_req: int, layout: BlockTableLayout) -> int:
    """Columns of the block table: manager blocks per request times kernel blocks each."""
    _require_positive("max_num_blocks_per_req", max_num_blocks_per_req)
    return max_num_blocks_per_req * _layout(layout).blocks_per_kv_block


def block_table_rows(
    block_ids_per_request: Sequence[Sequence[int]],
    layout: BlockTableLayout,
    *,
    max_num_blocks_per_req: int | None = None,
) -> tuple[tuple[int, ...], ...]:
    """One row of kernel block ids per request (unpadded).

    With ``max_num_blocks_per_req`` set, a request holding more manager
    blocks than a row can take raises :class:`BlockTableRowOverflowError`.
    """
    _rows("block_ids_per_request", block_ids_per_request)
    _layout(layout)
    if max_num_blocks_per_req is not None:
        _require_positive("max_num_blocks_per_req", max_num_blocks_per_req)
    rows = []
    for index, ids in enumerate(block_ids_per_request):
        if max_num_blocks_per_req is not None and len(ids) > max_num_blocks_per_req:
            raise BlockTableRowOverflowError(
                request_index=index,
                num_blocks=len(ids),
                max_num_blocks_per_req=max_num_blocks_per_req,
            )
        rows.append(map_to_kernel_blocks(ids, layout.blocks_per_kv_block))
    return tuple(rows)


def slot_for_position(kernel_row: Sequence[int], position: int, layout: BlockTableLayout) -> int:
    """The slot this rank stores token ``position`` in, or ``PAD_SLOT_ID`` if another rank does.

    ``kernel_row`` is the request's block-table row (kernel block ids).
    """
    check_int("position", position, minimum=0, maximum=MAX_INDEX)
    return _slot(_ints("kernel_row", kernel_row), position, _layout(layout))


def _slot(kernel_row: Sequence[int], position: int, layout: BlockTableLayout) -> int:
    """:func:`slot_for_position` on checked inputs."""
    interleave = layout.cp_kv_cache_interleave_size
    dcp = layout.dcp_world_size
    kernel_bs = layout.resolved_kernel_block_size
    virtual_index, virtual_offset = divmod(position, layout.virtual_block_size)
    if (virtual_offset // interleave) % dcp != layout.dcp_rank:
        return PAD_SLOT_ID
    local_offset = (virtual_offset // (dcp * interleave)) * interleave + virtual_offset % interleave
    column = virtual_index * layout.blocks_per_kv_block + local_offset // kernel_bs
    if column >= len(kernel_row):
        raise TokenPositionOutOfRangeError(
            position=position,
            block_table_column=column,
            num_kernel_blocks=len(kernel_row),
        )
    return kernel_row[column] * kernel_bs + local_offset % kernel_bs


def compute_slot_mapping(
    kernel_rows: Sequence[Sequence[int]],
    req_indices: Sequence[int],
    positions: Sequence[int],
    layout: BlockTableLayout,
    *,
    num_slots: int | None = None,
) -> tuple[int, ...]:
    """Slots of a batch's tokens: token ``t`` is request ``req_indices[t]`` at ``positions[t]``.

    ``kernel_rows`` are the requests' block-table rows (from
    :func:`block_table_rows`). With ``num_slots`` (vLLM's
    ``max_num_batched_tokens``) the result is padded with ``PAD_SLOT_ID`` to
    that length.
    """
    _rows("kernel_rows", kernel_rows)
    _ints("req_indices", req_indices)
    _ints("positions", positions)
    _layout(layout)
    if num_slots is not None:
        check_int("num_slots", num_slots, minimum=0, maximum=MAX_SIZE)
    if len(req_indices) != len(positions):
        raise InvalidFieldError(
            field="positions",
            value=len(positions),
            reason=f"must have one entry per token, as req_indices has ({len(req_indices)})",
        )
    if num_slots is not None and num_slots < len(positions):
        raise InvalidFieldError(
            field="num_slots",
            value=num_slots,
            reason=f"must be at least the number of tokens ({len(positions)})",
        )
    slots = []
    for req, pos in zip(req_indices, positions, strict=True):
        if not 0 <= req < len(kernel_rows):
            raise InvalidFieldError(
                field="req_indices",
                value=req,
                reason=f"must index one of the {len(kernel_rows)} block-table rows",
            )
        slots.append(_slot(kernel_rows[req], pos, layout))
    if num_slots is not None:
        slots.extend([PAD_SLOT_ID] * (num_slots - len(slots)))
    return tuple(slots)


def batch_token_positions(
    num_computed_tokens: Sequence[int], num_scheduled_tokens: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(req_indices, positions)`` of a batch in which request ``r`` schedules
    ``num_scheduled_tokens[r]`` tokens after its first ``num_computed_tokens[r]``.
    """
    _ints("num_computed_tokens", num_computed_tokens, minimum=-MAX_INDEX)
    _ints("num_scheduled_tokens", num_scheduled_tokens, minimum=-MAX_INDEX)
    if sum(num_scheduled_tokens) > MAX_SIZE:
        raise InvalidFieldError(
            field="num_scheduled_tokens",
            value=sum(num_scheduled_tokens),
            reason=f"schedules over {MAX_SIZE} tokens in one batch",
        )
    if len(num_computed_tokens) != len(num_scheduled_tokens):
        raise InvalidFieldError(
            field="num_scheduled_tokens",
            value=len(num_scheduled_tokens),
            reason=f"must have one entry per request ({len(num_computed_tokens)})",
        )
    req_indices: list[int] = []
    positions: list[int] = []
    for req, (start, count) in enumerate(
        zip(num_computed_tokens, num_scheduled_tokens, strict=True)
    ):
        if start < 0 or count < 0:
            raise InvalidFieldError(
                field="num_computed_tokens" if start < 0 else "num_scheduled_tokens",
                value=start if start < 0 else count,
                reason=f"request {req}: must be >= 0",
            )
        req_indices.extend([req] * count)
        positions.extend(range(start, start + count))
    return tuple(req_indices), tuple(positions)


@dataclass(frozen=True, slots=True, kw_only=True)
class MultipleOf:
    """A backend supports every kernel block size that is a multiple of ``base``."""

    base: int

    def __post_init__(self) -> None:
        _require_positive("base", self.base)


SupportedKernelBlockSizes = Sequence[int | MultipleOf]
"""What one attention backend accepts as kernel block sizes (vLLM's
``get_supported_kernel_block_sizes``)."""


def _supports(sizes: SupportedKernelBlockSizes, block_size: int) -> bool:
    return any(block_size == s if isinstance(s, int) else block_size % s.base == 0 for s in sizes)


def select_common_block_size(
    kv_manager_block_size: int, backends: Sequence[SupportedKernelBlockSizes]
) -> int:
    """The kernel block size for a KV-cache group, as vLLM's ``select_common_block_size``.

    The manager's block size if every backend supports it; otherwise the
    largest fixed size (an ``int`` some backend lists) that divides it and
    every backend supports; otherwise :class:`NoCommonKernelBlockSizeError`.
    """
    _require_positive("kv_manager_block_size", kv_manager_block_size)
    if not isinstance(backends, list | tuple):
        raise InvalidFieldError(
            field="backends", value=type(backends).__name__, reason="must be a list or tuple"
        )
    for index, sizes in enumerate(backends):
        if not isinstance(sizes, list | tuple):
            raise InvalidFieldError(
                field=f"backends[{index}]",
                value=type(sizes).__name__,
                reason="must be a list or tuple of sizes and MultipleOf",
            )
        for size in sizes:
            if not isinstance(size, MultipleOf):
                _require_positive(f"backends[{index}] size", size)
    if all(_supports(sizes, kv_manager_block_size) for sizes in backends):
        return kv_manager_block_size
    fixed = sorted({s for sizes in backends for s in sizes if isinstance(s, int)}, reverse=True)
    for size in fixed:
        if kv_manager_block_size % size == 0 and all(_supports(b, size) for b in backends):
            return size
    raise NoCommonKernelBlockSizeError(block_size=kv_manager_block_size)
