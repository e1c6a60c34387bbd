"""kvpure.block_table: block-table rows and slot mappings, checked against oracles.

The oracles are written independently of the module: the no-DCP formula
``bt[r, p // bs] * bs + p % bs`` from vLLM's docstring, and a simulation that
deals the tokens of each virtual block to the DCP ranks one interleave run at
a time and counts each rank's tokens in order.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.block_table import (
    PAD_SLOT_ID,
    BlockTableLayout,
    MultipleOf,
    batch_token_positions,
    block_table_rows,
    block_table_width,
    compute_slot_mapping,
    map_to_kernel_blocks,
    select_common_block_size,
    slot_for_position,
)
from kvpure.errors import (
    BlockTableRowOverflowError,
    InvalidFieldError,
    KVPureError,
    KVPureValueError,
    NoCommonKernelBlockSizeError,
    TokenPositionOutOfRangeError,
)
from kvpure_gpu.errors import (
    DeviceUnavailableError,
    KernelBlockSizeError,
    LayerWithoutGroupError,
    LayerWithoutTensorError,
    LayoutCannotExpressPageError,
    PackedTensorMismatchError,
    TensorSizeNotPageMultipleError,
    UnsupportedDtypeError,
    UnsupportedViewError,
)


def test_map_to_kernel_blocks_expands_each_block() -> None:
    assert map_to_kernel_blocks([0, 3, 1], 2) == (0, 1, 6, 7, 2, 3)
    assert map_to_kernel_blocks([5, 9], 1) == (5, 9)
    assert map_to_kernel_blocks([], 4) == ()


def test_layout_derived_sizes() -> None:
    layout = BlockTableLayout(block_size=64, kernel_block_size=16, dcp_world_size=2)
    assert layout.blocks_per_kv_block == 4
    assert layout.virtual_block_size == 128
    assert block_table_width(10, layout) == 40
    assert BlockTableLayout(block_size=16).resolved_kernel_block_size == 16


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"block_size": 0}, "block_size"),
        ({"block_size": 16, "kernel_block_size": 6}, "kernel_block_size"),
        ({"block_size": 16, "kernel_block_size": 0}, "kernel_block_size"),
        ({"block_size": 16, "dcp_world_size": 0}, "dcp_world_size"),
        ({"block_size": 16, "dcp_world_size": 2, "dcp_rank": 2}, "dcp_rank"),
        ({"block_size": 16, "dcp_rank": -1}, "dcp_rank"),
        ({"block_size": 16, "cp_kv_cache_interleave_size": 3}, "cp_kv_cache_interleave_size"),
    ],
)
def test_layout_rejects_bad_fields(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        BlockTableLayout(**kwargs)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_worked_example_without_dcp() -> None:
    # block size 4: request 0 holds blocks [7, 2]; request 1 holds [5].
    layout = BlockTableLayout(block_size=4)
    rows = block_table_rows([[7, 2], [5]], layout)
    req, pos = batch_token_positions([3, 0], [3, 2])
    assert req == (0, 0, 0, 1, 1)
    assert pos == (3, 4, 5, 0, 1)
    slots = compute_slot_mapping(rows, req, pos, layout, num_slots=8)
    # p=3 -> 7*4+3; p=4 -> 2*4+0; p=5 -> 2*4+1; request 1: 5*4+0, 5*4+1; then padding.
    assert slots == (31, 8, 9, 20, 21, -1, -1, -1)


def test_worked_example_with_kernel_blocks() -> None:
    # Manager block 16 split into kernel blocks of 8: block 3 -> kernel ids 6, 7.
    layout = BlockTableLayout(block_size=16, kernel_block_size=8)
    rows = block_table_rows([[3]], layout)
    assert rows == ((6, 7),)
    slots = compute_slot_mapping(rows, [0, 0], [7, 8], layout)
    assert slots == (6 * 8 + 7, 7 * 8 + 0)


def test_worked_example_with_dcp_interleave() -> None:
    # bs 4, dcp 2, interleave 2: a virtual block covers 8 positions; rank 0
    # owns positions 0,1,4,5 (local offsets 0,1,2,3), rank 1 owns 2,3,6,7.
    rank0 = BlockTableLayout(block_size=4, dcp_world_size=2, cp_kv_cache_interleave_size=2)
    rank1 = BlockTableLayout(
        block_size=4, dcp_world_size=2, dcp_rank=1, cp_kv_cache_interleave_size=2
    )
    rows = block_table_rows([[9, 1]], rank0)
    positions = list(range(10))
    req = [0] * 10
    assert compute_slot_mapping(rows, req, positions, rank0) == (
        36, 37, -1, -1, 38, 39, -1, -1, 4, 5,
    )  # fmt: skip
    assert compute_slot_mapping(rows, req, positions, rank1) == (
        -1, -1, 36, 37, -1, -1, 38, 39, -1, -1,
    )  # fmt: skip


def test_pad_slot_id_is_vllms() -> None:
    assert PAD_SLOT_ID == -1


def test_row_overflow_is_typed() -> None:
    layout = BlockTableLayout(block_size=16)
    with pytest.raises(BlockTableRowOverflowError) as info:
        block_table_rows([[1], [1, 2, 3]], layout, max_num_blocks_per_req=2)
    assert info.value.request_index == 1
    assert info.value.num_blocks == 3
    assert "request 1" in str(info.value)
    again = pickle.loads(pickle.dumps(info.value))
    assert again.max_num_blocks_per_req == 2


def test_position_beyond_blocks_is_typed() -> None:
    layout = BlockTableLayout(block_size=16)
    with pytest.raises(TokenPositionOutOfRangeError) as info:
        slot_for_position((4,), 16, layout)
    assert info.value.position == 16
    assert isinstance(info.value, KVPureValueError)


def test_bad_batch_inputs_are_typed() -> None:
    layout = BlockTableLayout(block_size=16)
    with pytest.raises(InvalidFieldError):
        compute_slot_mapping(((1,),), [0, 0], [0], layout)
    with pytest.raises(InvalidFieldError):
        compute_slot_mapping(((1,),), [1], [0], layout)
    with pytest.raises(InvalidFieldError):
        compute_slot_mapping(((1,),), [0, 0], [0, 1], layout, num_slots=1)
    with pytest.raises(InvalidFieldError):
        slot_for_position((1,), -1, layout)
    with pytest.raises(InvalidFieldError):
        batch_token_positions([0], [1, 2])
    with pytest.raises(InvalidFieldError):
        batch_token_positions([-1], [1])


# --- properties --------------------------------------------------------------

block_sizes = st.sampled_from([1, 2, 4, 8, 16, 32])


@st.composite
def batches(
    draw: st.DrawFn, *, dcp: int = 1
) -> tuple[BlockTableLayout, list[list[int]], list[int], list[int]]:
    """A layout, distinct block ids per request and each request's token positions."""
    block_size = draw(block_sizes)
    kernel = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if block_size % d == 0]))
    interleave = draw(st.sampled_from([d for d in (1, 2, 4, 8) if block_size % d == 0]))
    rank = draw(st.integers(0, dcp - 1))
    layout = BlockTableLayout(
        block_size=block_size,
        kernel_block_size=kernel,
        dcp_world_size=dcp,
        dcp_rank=rank,
        cp_kv_cache_interleave_size=interleave,
    )
    num_blocks = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    pool = draw(st.permutations(range(sum(num_blocks) + 3)))
    ids: list[list[int]] = []
    start = 0
    for n in num_blocks:
        ids.append(list(pool[start : start + n]))
        start += n
    req: list[int] = []
    pos: list[int] = []
    for r, n in enumerate(num_blocks):
        capacity = n * layout.virtual_block_size
        for p in draw(st.lists(st.integers(0, capacity - 1), unique=True, max_size=12)):
            req.append(r)
            pos.append(p)
    return layout, ids, req, pos


@given(batches())
def test_without_dcp_slot_is_the_manager_formula(
    batch: tuple[BlockTableLayout, list[list[int]], list[int], list[int]],
) -> None:
    layout, ids, req, pos = batch
    rows = block_table_rows(ids, layout)
    slots = compute_slot_mapping(rows, req, pos, layout)
    bs = layout.block_size
    assert slots == tuple(ids[r][p // bs] * bs + p % bs for r, p in zip(req, pos, strict=True))
    # The same formula read off the kernel table with the kernel block size.
    kbs = layout.resolved_kernel_block_size
    assert slots == tuple(rows[r][p // kbs] * kbs + p % kbs for r, p in zip(req, pos, strict=True))


@given(batches())
def test_every_local_token_gets_a_distinct_slot(
    batch: tuple[BlockTableLayout, list[list[int]], list[int], list[int]],
) -> None:
    layout, ids, req, pos = batch
    slots = compute_slot_mapping(block_table_rows(ids, layout), req, pos, layout)
    local = [s for s in slots if s != PAD_SLOT_ID]
    assert len(local) == len(slots)  # without DCP every token is local
    assert len(set(local)) == len(local)
    assert all(s >= 0 for s in local)


def _oracle_dcp_slots(
    layout: BlockTableLayout, ids: list[int], positions: list[int], rank: int
) -> list[int]:
    """Deal each virtual block's positions to the ranks by interleave runs and count."""
    bs = layout.block_size
    vbs = layout.virtual_block_size
    owner: dict[int, tuple[int, int]] = {}
    for vi in range(len(ids)):
        filled = [0] * layout.dcp_world_size
        for vo in range(vbs):
            r = (vo // layout.cp_kv_cache_interleave_size) % layout.dcp_world_size
            owner[vi * vbs + vo] = (r, ids[vi] * bs + filled[r])
            filled[r] += 1
        assert filled == [bs] * layout.dcp_world_size
    return [owner[p][1] if owner[p][0] == rank else PAD_SLOT_ID for p in positions]


@given(st.integers(2, 4).flatmap(lambda dcp: batches(dcp=dcp)))
def test_with_dcp_exactly_one_rank_owns_each_token(
    batch: tuple[BlockTableLayout, list[list[int]], list[int], list[int]],
) -> None:
    layout, ids, req, pos = batch
    per_rank = []
    for rank in range(layout.dcp_world_size):
        rank_layout = BlockTableLayout(
            block_size=layout.block_size,
            kernel_block_size=layout.kernel_block_size,
            dcp_world_size=layout.dcp_world_size,
            dcp_rank=rank,
            cp_kv_cache_interleave_size=layout.cp_kv_cache_interleave_size,
        )
        rows = block_table_rows(ids, rank_layout)
        slots = compute_slot_mapping(rows, req, pos, rank_layout, num_slots=len(pos) + 2)
        assert slots[len(pos) :] == (PAD_SLOT_ID, PAD_SLOT_ID)
        expected = [
            _oracle_dcp_slots(rank_layout, ids[r], [p], rank)[0]
            for r, p in zip(req, pos, strict=True)
        ]
        assert list(slots[: len(pos)]) == expected
        local = [s for s in slots if s != PAD_SLOT_ID]
        assert len(set(local)) == len(local)
        per_rank.append(slots[: len(pos)])
    for t in range(len(pos)):
        owners = [r for r in range(layout.dcp_world_size) if per_rank[r][t] != PAD_SLOT_ID]
        assert len(owners) == 1


@given(st.lists(st.integers(0, 50), max_size=8), st.integers(1, 8))
def test_kernel_blocks_partition(ids: list[int], k: int) -> None:
    kernel = map_to_kernel_blocks(ids, k)
    assert len(kernel) == len(ids) * k
    assert tuple(b // k for b in kernel) == tuple(b for b in ids for _ in range(k))
    assert tuple(b % k for b in kernel) == tuple(j for _ in ids for j in range(k))


@pytest.mark.parametrize(
    "err",
    [
        BlockTableRowOverflowError(request_index=1, num_blocks=3, max_num_blocks_per_req=2),
        TokenPositionOutOfRangeError(position=9, block_table_column=2, num_kernel_blocks=1),
        UnsupportedDtypeError(dtype="qint8", direction="kvpure KVDtype"),
        LayerWithoutTensorError(layer_name="l"),
        LayerWithoutGroupError(layer_name="l", tensor_index=0),
        TensorSizeNotPageMultipleError(layer_name="l", size_bytes=10, page_size_bytes=4),
        PackedTensorMismatchError(layer_name="l", field="size", value=1, expected=2),
        LayoutCannotExpressPageError(layer_name="l", layout="kv_first", reason="r"),
        KernelBlockSizeError(layer_name="l", block_size=16, kernel_block_size=6),
        UnsupportedViewError(layer_name="l", reason="r"),
        DeviceUnavailableError(device="cuda"),
        NoCommonKernelBlockSizeError(block_size=8),
    ],
)
def test_gpu_area_errors_pickle_and_keep_their_inputs(err: KVPureError) -> None:
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.__dict__ == err.__dict__
    if hasattr(err, "layer_name"):
        assert "'l'" in str(err)


@pytest.mark.parametrize(
    ("block_size", "backends", "expected"),
    [
        (16, [[MultipleOf(base=16)]], 16),
        (528, [[MultipleOf(base=16)]], 528),  # the Mamba-hybrid attention block
        (128, [[MultipleOf(base=16)], [64]], 64),  # FlashMLA-style fixed 64 with FA
        (96, [[32, 16], [MultipleOf(base=16)]], 32),  # largest fixed size that fits all
        (64, [], 64),  # no attention backend (a Mamba group)
    ],
)
def test_select_common_block_size(
    block_size: int, backends: list[list[int | MultipleOf]], expected: int
) -> None:
    assert select_common_block_size(block_size, backends) == expected


@pytest.mark.parametrize(
    ("block_size", "backends"),
    [(8, [[MultipleOf(base=16)]]), (32, [[MultipleOf(base=16)], [64]])],
)
def test_no_common_kernel_block_size_is_typed(
    block_size: int, backends: list[list[int | MultipleOf]]
) -> None:
    with pytest.raises(NoCommonKernelBlockSizeError) as info:
        select_common_block_size(block_size, backends)
    assert info.value.block_size == block_size
    assert isinstance(info.value, ValueError)
