"""vLLM's own BlockPool trace (goldens ``block_pool_traces.json``, 0.26.0, 0.33.0, 0.34.0) replayed.

The goldens recorded vLLM's ``BlockPool`` step by step: the free queue's order, the
free count, the cached hashes, every block's ref count, the blocks each call
returned, and the KV events. kvpure's :class:`kvpure.cache.BlockPool` (over its
:class:`kvpure.FreeKVCacheBlockQueue`) is driven through the same calls and must
show the same state after each, and publish the same events, every field the golden
records (0.33+'s ``lookahead_token_ids`` included: None, as a pool built without
``num_hash_lookahead_tokens`` publishes them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache.block_pool import BlockPool
from kvpure.cache.events import BlockRemoved, BlockStored
from kvpure.cache.request import CacheRequest
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    VLLM_0_34,
    HashRequest,
    HashScheme,
    VllmHashProfile,
)
from tests.conftest import DATA_DIR, GOLDEN_026, GOLDEN_033

VERSIONS: dict[str, tuple[Path, VllmHashProfile]] = {
    "0.26.0": (GOLDEN_026, VLLM_0_26),
    "0.33.0": (GOLDEN_033, VLLM_0_33),
    "0.34.0": (DATA_DIR / "vllm-0.34.0", VLLM_0_34),
}
OPS = [
    "init (null block = 0 popped)",
    "get_new_blocks(4)",
    "cache_full_blocks(r0 14 tokens, 3 full)",
    "free_blocks(reversed) -> uncached tail prepended, cached appended",
    "get_cached_block(hash0, [0])",
    "touch(hit)",
    "get_new_blocks(7) (evicts cached blocks)",
]


def _trace(version: str) -> dict[str, Any]:
    golden, _ = VERSIONS[version]
    found: dict[str, Any] = json.loads((golden / "block_pool_traces.json").read_text())[
        "block_pool"
    ]
    return found


def _assert_state(pool: BlockPool, step: dict[str, Any]) -> None:
    order = [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
    assert order == step["free_order"], step["op"]
    assert pool.get_num_free_blocks() == step["num_free"], step["op"]
    assert pool.num_cached_hashes == step["num_cached_hashes"], step["op"]
    ref_cnts = {str(b.block_id): b.ref_cnt for b in pool.blocks}
    assert ref_cnts == step["ref_cnts"], step["op"]


@pytest.mark.parametrize("version", VERSIONS)
def test_block_pool_trace_replays_step_by_step(version: str) -> None:
    trace = _trace(version)
    _, profile = VERSIONS[version]
    steps: list[dict[str, Any]] = trace["trace"]
    assert [s["op"] for s in steps] == OPS
    params = trace["params"]
    pool = BlockPool(
        num_gpu_blocks=params["num_gpu_blocks"],
        enable_caching=params["enable_caching"],
        hash_block_size=params["hash_block_size"],
        enable_kv_cache_events=True,
        use_int_block_hashes=trace["use_int_block_hashes"],
        profile=profile,
    )
    block_size = params["hash_block_size"]
    assert pool.null_block.block_id == steps[0]["null_block_id"]
    _assert_state(pool, steps[0])

    blocks = pool.get_new_blocks(4)
    assert [b.block_id for b in blocks] == steps[1]["got"]
    _assert_state(pool, steps[1])

    scheme = HashScheme.from_seed(
        algorithm=trace["hash_fn"],
        block_size=block_size,
        seed=trace["pythonhashseed"],
        profile=profile,
    )
    tokens = tuple(trace["request_tokens"])
    request = CacheRequest(
        request_id="r0", hash_request=HashRequest(prompt_token_ids=tokens), scheme=scheme
    )
    num_full = len(tokens) // block_size
    pool.cache_full_blocks(request, blocks, 0, num_full, block_size, 0)
    stored = [None if b.block_hash is None else b.block_hash.hex() for b in blocks]
    assert stored == steps[2]["block_hashes"]
    _assert_state(pool, steps[2])

    pool.free_blocks(reversed(blocks))
    _assert_state(pool, steps[3])

    hit = pool.get_cached_block(request.block_hashes[0], [0])
    assert hit is not None
    assert [b.block_id for b in hit] == steps[4]["hit"]
    _assert_state(pool, steps[4])

    pool.touch(hit)
    _assert_state(pool, steps[5])

    evicting: list[KVCacheBlock] = pool.get_new_blocks(7)
    assert [b.block_id for b in evicting] == steps[6]["got"]
    _assert_state(pool, steps[6])

    _assert_events(pool, trace["events"])


def _assert_events(pool: BlockPool, expected: list[dict[str, Any]]) -> None:
    events = pool.take_events()
    assert [type(e).__name__ for e in events] == [e["type"] for e in expected]
    for got, want in zip(events, expected, strict=True):
        assert isinstance(got, BlockStored | BlockRemoved)
        assert list(got.block_hashes) == want["block_hashes"]
        assert got.medium == want["medium"]
        assert got.group_idx == want["group_idx"]
        if isinstance(got, BlockStored):
            assert got.parent_block_hash == want["parent_block_hash"]
            assert list(got.token_ids) == want["token_ids"]
            assert got.block_size == want["block_size"]
            assert (got.lora_id, got.lora_name) == (want["lora_id"], want["lora_name"])
            assert got.extra_keys is not None
            assert list(got.extra_keys) == want["extra_keys"]
        # the fields every release's golden records beyond those above (0.33+: ownership,
        # session_id, lookahead_token_ids), each as vLLM published it
        for name, value in want.items():
            if name in ("type", "block_hashes", "token_ids", "extra_keys"):
                continue
            assert getattr(got, name) == value, name
