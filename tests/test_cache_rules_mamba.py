"""The prefix cache's Mamba "align" rules per release (``kvpure.cache.rules``), both sides.

Split from ``test_cache_rules.py``. Expected values are read from vLLM's source, named
at each test: 0.26.0 and 0.34.0 (``/work/vllm/<version>/vllm``); 0.33.0 is 0.34.0 on
all of them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.cache.errors import ManagerRefusedError
from kvpure.cache.rules import (
    CACHE_RULES_0_26,
    CACHE_RULES_0_34,
    mamba_align_chunk_end,
    mamba_last_cache_position,
)
from tests.conftest import DATA_DIR

OLD, NEW = CACHE_RULES_0_26, CACHE_RULES_0_34
EVICTION = DATA_DIR / "vllm-0.34.0" / "cache_replay" / "eviction_lru.json"


@pytest.mark.parametrize(
    ("num_tokens", "lookahead", "drop", "old", "new"),
    [
        (16, 0, False, 16, 12),  # block-aligned prompt: 0.34 stops one block early
        (17, 0, False, 16, 16),
        (17, 1, False, 16, 16),
        (16, 1, False, 16, 12),
        (18, 3, False, 16, 12),  # (18 - 3) // 4 * 4
        (16, 0, True, 12, 12),  # EAGLE drop: one block less on both
        (3, 0, True, 0, 0),
        (3, 1, False, 0, 0),
    ],
)
def test_mamba_last_cache_position(
    num_tokens: int, lookahead: int, drop: bool, old: int, new: int
) -> None:
    """0.26 ``Scheduler._mamba_block_aligned_split``: ``n - n % block`` (one block less with
    EAGLE); 0.34 ``kv_cache_interface.get_mamba_prefill_checkpoint_position``:
    ``(n - max(1, L)) // block * block``, or ``n // block * block - block`` with the drop."""
    kwargs: dict[str, Any] = {
        "num_tokens": num_tokens,
        "block_size": 4,
        "drop_eagle_block": drop,
        "num_lookahead_hashes": lookahead,
    }
    assert mamba_last_cache_position(OLD, **kwargs) == old
    assert mamba_last_cache_position(NEW, **kwargs) == new


@pytest.mark.parametrize(
    ("start", "end", "last", "prefill_end", "max_prefill", "old", "new"),
    [
        (0, 10, 16, 20, 100, 8, 8),  # before both bounds: floored
        (0, 18, 16, 20, 100, 18, 16),  # past the last position, before the prefill end
        (0, 20, 16, 20, 100, 20, 20),  # the prompt's last chunk is not floored
        (1, 3, 16, 20, 2, 0, 3),  # 0.34: a block wider than a chunk advances sub-block
    ],
)
def test_mamba_align_chunk_end(
    start: int, end: int, last: int, prefill_end: int, max_prefill: int, old: int, new: int
) -> None:
    """``Scheduler._mamba_block_aligned_split``: 0.26 floors when ``end <
    last_cache_position``; 0.34 when ``end < prefill_end``, unless that leaves nothing and
    the block is wider than the prefill budget."""
    kwargs: dict[str, Any] = {
        "start": start,
        "end": end,
        "block_size": 4,
        "last_cache_position": last,
        "prefill_end": prefill_end,
        "max_prefill_tokens": max_prefill,
    }
    assert mamba_align_chunk_end(OLD, **kwargs) == old
    assert mamba_align_chunk_end(NEW, **kwargs) == new


def _mamba_trace(mode: str) -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(EVICTION.read_text(encoding="utf-8"))["trace"]
    layer = {
        "type": "MambaSpec",
        "block_size": 4,
        "shapes": [[16]],
        "dtypes": ["float32"],
        "page_size_padded": 256,
        "mamba_type": "MAMBA2",
        "mamba_cache_mode": mode,
        "num_speculative_blocks": 0,
    }
    trace["plan_input"]["kv_cache_specs"] = [{"model.layers.0.mixer": layer}]
    trace["plan_input"]["vllm_config"]["cache_config"]["mamba_cache_mode"] = mode
    trace["ops"] = [{"op": "arrive", "request_id": "a", "prompt_token_ids": list(range(16))}]
    return trace


def test_mamba_prefix_caching_needs_align_from_033() -> None:
    """0.34 ``MambaManager.__init__`` asserts ``mamba_cache_mode == "align" or not
    enable_caching``; 0.26 builds the manager."""
    trace = _mamba_trace("none")
    with pytest.raises(ManagerRefusedError, match="requires mamba_cache_mode='align'"):
        replay_trace(trace, vllm_version="0.34")
    assert replay_trace(trace, vllm_version="0.26")["records"]


def test_a_block_aligned_mamba_prompt_is_split_at_the_last_hittable_boundary() -> None:
    """A 16-token prompt, block 4: 0.26 prefills it in one step (16 tokens); 0.34 stops at
    ``get_mamba_prefill_checkpoint_position(16, 4, False) = 12``, then the last 4."""
    trace = _mamba_trace("align")
    old: Any = replay_trace(trace, vllm_version="0.26")
    new: Any = replay_trace(trace, vllm_version="0.34")
    steps_old = old["records"][0]["outcome"]["steps"]
    steps_new = new["records"][0]["outcome"]["steps"]
    assert [s["num_new_tokens"] for s in steps_old] == [16]
    assert [s["num_new_tokens"] for s in steps_new] == [12, 4]
