"""Block-table and slot-mapping tensors for a batch, from ``kvpure.block_table``.

The numbers come from the pure core; this module only writes them into the
tensors vLLM's ``BlockTable`` keeps: an int32 table
``[num_reqs, max_num_blocks_per_req * blocks_per_kv_block]`` (unused entries
0, as vLLM's zero-initialised buffer) and an int64 slot mapping padded with
``PAD_SLOT_ID`` to ``num_slots`` (vLLM's ``max_num_batched_tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvpure.block_table import (
    BlockTableLayout,
    block_table_rows,
    block_table_width,
    compute_slot_mapping,
)
from kvpure.runtime_types import typed
from kvpure_gpu.allocate import DeviceLike
from kvpure_gpu.checks import check_device


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchBlockTables:
    """One KV-cache group's block table and slot mapping for a batch."""

    block_table: torch.Tensor
    slot_mapping: torch.Tensor
    layout: BlockTableLayout


@typed
def block_table_tensor(
    block_ids_per_request: Sequence[Sequence[int]],
    layout: BlockTableLayout,
    *,
    max_num_blocks_per_req: int,
    device: DeviceLike = "cpu",
) -> torch.Tensor:
    """The int32 block table of kernel block ids, one zero-padded row per request."""
    device = check_device("device", device)
    width = block_table_width(max_num_blocks_per_req, layout)
    rows = block_table_rows(
        block_ids_per_request, layout, max_num_blocks_per_req=max_num_blocks_per_req
    )
    padded = [list(row) + [0] * (width - len(row)) for row in rows]
    if not padded:
        return torch.zeros((0, width), dtype=torch.int32, device=device)
    return torch.tensor(padded, dtype=torch.int32, device=device)


@typed
def slot_mapping_tensor(
    block_ids_per_request: Sequence[Sequence[int]],
    req_indices: Sequence[int],
    positions: Sequence[int],
    layout: BlockTableLayout,
    *,
    num_slots: int | None = None,
    device: DeviceLike = "cpu",
) -> torch.Tensor:
    """The int64 slot of every token, ``PAD_SLOT_ID`` for padding and other ranks' tokens."""
    device = check_device("device", device)
    rows = block_table_rows(block_ids_per_request, layout)
    slots = compute_slot_mapping(rows, req_indices, positions, layout, num_slots=num_slots)
    return torch.tensor(slots, dtype=torch.int64, device=device)


@typed
def batch_block_tables(
    block_ids_per_request: Sequence[Sequence[int]],
    req_indices: Sequence[int],
    positions: Sequence[int],
    layout: BlockTableLayout,
    *,
    max_num_blocks_per_req: int,
    num_slots: int | None = None,
    device: DeviceLike = "cpu",
) -> BatchBlockTables:
    """Both tensors of one group for a batch (tokens given as request index + position)."""
    device = check_device("device", device)
    return BatchBlockTables(
        block_table=block_table_tensor(
            block_ids_per_request,
            layout,
            max_num_blocks_per_req=max_num_blocks_per_req,
            device=device,
        ),
        slot_mapping=slot_mapping_tensor(
            block_ids_per_request,
            req_indices,
            positions,
            layout,
            num_slots=num_slots,
            device=device,
        ),
        layout=layout,
    )
