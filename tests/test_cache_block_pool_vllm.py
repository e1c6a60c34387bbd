"""``BlockPool``'s construction as vLLM's: its defaults, the smallest pool, typed refusals.

Expected values are read from vLLM's ``vllm/v1/core/block_pool.py`` (0.26.0 lines 162-170,
0.34.0 lines 129-139: ``enable_kv_cache_events: bool = False``,
``num_hash_lookahead_tokens: int = 0``, ``assert ... num_gpu_blocks > 0``, and
``get_usage``'s ``if not total_gpu_blocks: return 0``), and from vLLM 0.26's own pool run on
CPU: ``BlockPool(1, True, 4, True)`` has 0 free blocks, a usage of 0, resets its prefix
cache (True) and publishes ``[AllBlocksCleared()]``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvpure.cache import block_pool
from kvpure.cache.block_pool import BlockPool
from kvpure.cache.errors import CacheStateError
from kvpure.cache.events import AllBlocksCleared, BlockStored
from kvpure.cache.request import CacheRequest
from kvpure.errors import InvalidFieldError
from kvpure.hashing import VLLM_0_34, HashRequest, HashScheme


def _request(block_size: int) -> CacheRequest:
    scheme = HashScheme.from_seed(
        algorithm="sha256", block_size=block_size, seed="0", profile=VLLM_0_34
    )
    return CacheRequest(
        request_id="r", hash_request=HashRequest(prompt_token_ids=tuple(range(9))), scheme=scheme
    )


def test_events_are_off_unless_asked_for() -> None:
    """vLLM's ``enable_kv_cache_events`` defaults to False: caching publishes nothing."""
    pool = BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=4, profile=VLLM_0_34)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(_request(4), blocks, 0, 2, 4, 0)
    assert pool.num_cached_hashes == 2
    assert pool.take_events() == []
    assert pool.reset_prefix_cache() is False  # two blocks held
    pool.free_blocks(blocks)
    assert pool.reset_prefix_cache() is True
    assert pool.take_events() == []


def test_lookahead_is_off_unless_asked_for() -> None:
    """vLLM 0.34's ``num_hash_lookahead_tokens`` defaults to 0: a BlockStored names no
    lookahead tokens (None, as the 0.33 and 0.34 block-pool goldens publish it)."""
    pool = BlockPool(
        num_gpu_blocks=8,
        enable_caching=True,
        hash_block_size=4,
        enable_kv_cache_events=True,
        profile=VLLM_0_34,
    )
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(_request(4), blocks, 0, 2, 4, 0)
    (event,) = pool.take_events()
    assert isinstance(event, BlockStored)
    assert event.lookahead_token_ids is None
    assert list(event.token_ids) == list(range(8))


def test_a_pool_of_one_block_is_vllms() -> None:
    """One block is the null block alone: vLLM accepts it (``num_gpu_blocks > 0``)."""
    pool = BlockPool(
        num_gpu_blocks=1, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True
    )
    assert pool.get_num_free_blocks() == 0
    assert pool.get_usage() == 0
    assert pool.reset_prefix_cache() is True
    assert pool.take_events() == [AllBlocksCleared()]


@pytest.mark.parametrize("bad", [0, -4, 2**32 + 1])
def test_a_hash_block_size_out_of_range_is_a_typed_error(bad: Any) -> None:
    with pytest.raises(InvalidFieldError) as info:
        BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=bad)
    assert info.value.field == "hash_block_size"


def test_the_null_block_never_joins_the_free_queue() -> None:
    """vLLM 0.26's pool run on CPU: ``BlockPool(4, True, 4, True)``, its null block (id 0,
    ``is_null``) touched then freed twice: ref counts 1, 0, -1, the free queue [1, 2, 3]
    throughout (touch takes a free block off the queue, free puts a block back, but
    neither for the null block), 3 free, usage 0.0."""
    pool = BlockPool(
        num_gpu_blocks=4, enable_caching=True, hash_block_size=4, enable_kv_cache_events=True
    )
    null = pool.null_block
    assert (null.block_id, null.is_null, null.ref_cnt) == (0, True, 0)
    pool.touch([null])
    assert null.ref_cnt == 1
    assert pool.free_block_queue.free_block_ids() == (1, 2, 3)
    pool.free_blocks([null])
    assert null.ref_cnt == 0
    assert pool.free_block_queue.free_block_ids() == (1, 2, 3)
    assert (pool.get_num_free_blocks(), pool.get_usage()) == (3, 0.0)
    pool.free_blocks([null])
    assert null.ref_cnt == -1
    assert pool.free_block_queue.free_block_ids() == (1, 2, 3)
    assert pool.take_events() == []


def test_the_block_cap_itself_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MAX_NUM_GPU_BLOCKS`` is the most blocks a pool is built with, that count included
    (the cap is lowered here so as not to build 2**22 blocks)."""
    monkeypatch.setattr(block_pool, "MAX_NUM_GPU_BLOCKS", 16)
    assert BlockPool(num_gpu_blocks=16, enable_caching=True, hash_block_size=4).num_gpu_blocks == 16
    with pytest.raises(CacheStateError, match="from 1 to 16"):
        BlockPool(num_gpu_blocks=17, enable_caching=True, hash_block_size=4)


def test_caching_no_new_full_block_publishes_nothing() -> None:
    """vLLM's ``cache_full_blocks`` returns at once when ``num_cached_blocks >=
    num_full_blocks`` (0.26.0 ``block_pool.py`` line 259): no hash, no BlockStored."""
    pool = BlockPool(
        num_gpu_blocks=8,
        enable_caching=True,
        hash_block_size=4,
        enable_kv_cache_events=True,
        profile=VLLM_0_34,
    )
    request = _request(4)
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(request, blocks, 0, 1, 4, 0)
    assert len(pool.take_events()) == 1
    pool.cache_full_blocks(request, blocks, 1, 1, 4, 0)
    pool.cache_full_blocks(request, blocks, 2, 1, 4, 0)
    assert pool.take_events() == []
    assert pool.num_cached_hashes == 1


@pytest.mark.parametrize("kind", [list, tuple, iter])
def test_touch_and_free_take_any_iterable(kind: Any) -> None:
    """vLLM 0.26's ``touch`` (``block_pool.py`` 702-717): a free block with no reference
    leaves the free queue and gains one; ``free_blocks`` (719-740): it loses it and, having
    no hash, is prepended to the queue in the given order. kvpure takes any iterable of
    blocks for both."""
    pool = BlockPool(num_gpu_blocks=5, enable_caching=True, hash_block_size=4)
    one, two = pool.blocks[1], pool.blocks[2]
    pool.touch(kind([two, one]))
    assert (one.ref_cnt, two.ref_cnt) == (1, 1)
    assert pool.free_block_queue.free_block_ids() == (3, 4)
    pool.free_blocks(kind([two, one]))
    assert (one.ref_cnt, two.ref_cnt) == (0, 0)
    assert pool.free_block_queue.free_block_ids() == (2, 1, 3, 4)


def test_a_reset_forgets_every_blocks_hash() -> None:
    """vLLM 0.26's ``reset_prefix_cache`` (``block_pool.py`` 761-795): refused while a
    block is held; else the map is emptied, every block's hash reset and AllBlocksCleared
    published. A block with no hash is evicted without a BlockRemoved, and freed again
    uncached it goes to the queue's head (``free_blocks``)."""
    pool = BlockPool(
        num_gpu_blocks=6,
        enable_caching=True,
        hash_block_size=4,
        enable_kv_cache_events=True,
        profile=VLLM_0_34,
    )
    blocks = pool.get_new_blocks(2)
    pool.cache_full_blocks(_request(4), blocks, 0, 2, 4, 0)
    pool.free_blocks(blocks)
    assert pool.free_block_queue.free_block_ids() == (3, 4, 5, 1, 2)
    assert pool.reset_prefix_cache() is True
    assert [type(e).__name__ for e in pool.take_events()] == ["BlockStored", "AllBlocksCleared"]
    assert all(block.block_hash is None for block in pool.blocks)
    assert pool.num_cached_hashes == 0
    taken = pool.get_new_blocks(5)
    assert [b.block_id for b in taken] == [3, 4, 5, 1, 2]
    assert pool.take_events() == []
    pool.free_blocks(taken[3:])
    pool.free_blocks(taken[:1])
    assert pool.free_block_queue.free_block_ids() == (3, 1, 2)
