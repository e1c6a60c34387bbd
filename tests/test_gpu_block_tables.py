"""kvpure_gpu.block_tables: the tensors vLLM's BlockTable keeps, from the pure core."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the gpu extra (torch) is not installed")
import torch
from hypothesis import given
from hypothesis import strategies as st

from kvpure.block_table import PAD_SLOT_ID, BlockTableLayout, batch_token_positions
from kvpure_gpu.block_tables import batch_block_tables, block_table_tensor, slot_mapping_tensor


def test_block_table_tensor_dtype_shape_and_padding() -> None:
    layout = BlockTableLayout(block_size=32, kernel_block_size=16)
    table = block_table_tensor([[3, 1], [7]], layout, max_num_blocks_per_req=4)
    assert table.dtype == torch.int32
    assert tuple(table.shape) == (2, 8)
    assert table.tolist() == [[6, 7, 2, 3, 0, 0, 0, 0], [14, 15, 0, 0, 0, 0, 0, 0]]


def test_empty_batch_has_a_zero_row_table() -> None:
    table = block_table_tensor([], BlockTableLayout(block_size=16), max_num_blocks_per_req=3)
    assert tuple(table.shape) == (0, 3)
    assert table.dtype == torch.int32


def test_slot_mapping_tensor_is_int64_and_padded() -> None:
    layout = BlockTableLayout(block_size=4)
    slots = slot_mapping_tensor([[2]], [0, 0], [0, 3], layout, num_slots=5)
    assert slots.dtype == torch.int64
    assert slots.tolist() == [8, 11, PAD_SLOT_ID, PAD_SLOT_ID, PAD_SLOT_ID]


def test_tensors_on_meta() -> None:
    layout = BlockTableLayout(block_size=16)
    both = batch_block_tables(
        [[1, 2]], [0], [17], layout, max_num_blocks_per_req=2, num_slots=8, device="meta"
    )
    assert both.block_table.device.type == "meta"
    assert tuple(both.slot_mapping.shape) == (8,)


@given(
    st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=5), min_size=1, max_size=4),
    st.sampled_from([(16, 16), (16, 8), (32, 16), (8, 1)]),
)
def test_slots_read_off_the_tensor_table(blocks: list[list[int]], sizes: tuple[int, int]) -> None:
    block_size, kernel = sizes
    layout = BlockTableLayout(block_size=block_size, kernel_block_size=kernel)
    req, pos = batch_token_positions([0] * len(blocks), [len(b) * block_size for b in blocks])
    both = batch_block_tables(
        blocks, req, pos, layout, max_num_blocks_per_req=5, num_slots=len(pos) + 3
    )
    bt = both.block_table
    slots = both.slot_mapping.tolist()
    # vLLM's formula without DCP, read off the int32 tensor with the kernel block size.
    expected = [
        int(bt[r, p // kernel]) * kernel + p % kernel for r, p in zip(req, pos, strict=True)
    ]
    assert slots[: len(pos)] == expected
    assert slots[len(pos) :] == [PAD_SLOT_ID] * 3
    # And the manager-level formula on the block ids themselves.
    bs = block_size
    assert expected == [blocks[r][p // bs] * bs + p % bs for r, p in zip(req, pos, strict=True)]
