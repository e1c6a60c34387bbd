"""Live block copies from events, against vLLM's block pool (cache_replay goldens).

After every operation of every trace, the number of distinct cached keys
counted from the events equals vLLM's ``num_cached_hashes``; a hash stored
twice survives one BlockRemoved.
"""

from __future__ import annotations

import json

import pytest

from kvpure.events import AllBlocksCleared, BlockRemoved, BlockStored, LiveBlocks
from kvpure.interop.kv_events import event_from_json
from tests.conftest import GOLDEN_026

REPLAYS = sorted((GOLDEN_026 / "cache_replay").glob("*.json"))


@pytest.mark.parametrize("path", REPLAYS, ids=[p.stem for p in REPLAYS])
def test_cached_hashes_follow_the_block_pool(path: object) -> None:
    golden = json.loads(path.read_text())  # type: ignore[attr-defined]
    state = LiveBlocks()
    for number, record in enumerate(golden["records"]):
        state = state.apply_all(event_from_json(e) for e in record["events"])
        assert state.num_cached_hashes == record["pool"]["num_cached_hashes"], number
    assert state.unmatched_removals == 0


def test_a_hash_stored_twice_survives_one_removal() -> None:
    golden = json.loads((GOLDEN_026 / "cache_replay" / "shared_system_prompt.json").read_text())
    stored = [
        event_from_json(e)
        for record in golden["records"]
        for e in record["events"]
        if e["type"] == "BlockStored"
    ]
    hashes = [h for event in stored for h in event.block_hashes]  # type: ignore[union-attr]
    twice = {h for h in hashes if hashes.count(h) > 1}
    assert twice == {5481630094754830088}  # request d recomputed a's last prompt block
    state = LiveBlocks().apply_all(stored)
    assert state.copies_of(5481630094754830088, group_idx=0) == 2
    removed = BlockRemoved(block_hashes=(5481630094754830088,), medium="GPU", group_idx=0)
    state = state.apply(removed)
    assert state.is_cached(5481630094754830088, group_idx=0)
    assert not state.apply(removed).is_cached(5481630094754830088, group_idx=0)
    assert not state.is_cached(5481630094754830088, group_idx=1)
    assert not state.is_cached(5481630094754830088, group_idx=0, medium="CPU")


def test_clear_and_unmatched_removals() -> None:
    event = BlockStored(
        block_hashes=(1, 2),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=1,
        lora_id=None,
        medium="GPU",
        lora_name=None,
    )
    state = LiveBlocks().apply(event).apply(BlockRemoved(block_hashes=(3,), medium="GPU"))
    assert (state.num_cached_hashes, state.unmatched_removals) == (2, 1)
    cleared = state.apply(AllBlocksCleared())
    assert (cleared.num_cached_hashes, cleared.unmatched_removals) == (0, 1)
    assert state.num_cached_hashes == 2  # values are persistent
