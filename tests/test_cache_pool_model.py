"""The block pool as a hypothesis state machine, checked against plain models after every rule.

Requests (holders) arrive with prompts drawn from a few shared prefixes, hit
the prefix cache as vLLM's full-attention lookup does (at most
``num_tokens - 1`` tokens, so some blocks are cached twice under one hash),
take new blocks, cache their full blocks and are freed; the cache is reset
now and then. After every rule:

- every block is exactly one of free (in the queue), held (ref_cnt > 0) or null;
- each ref count equals the number of holders' references to the block;
- a cached hash maps only to blocks that hold it, and every hashed block is mapped;
- the events, replayed in order as a count per hash, rebuild the cached set;
- the free queue is in the order of a plain list model of vLLM's rules.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvpure.cache import AllBlocksCleared, BlockPool, BlockRemoved, BlockStored, CacheRequest
from kvpure.cache.pool_loops import holders_by_id
from kvpure.free_queue import KVCacheBlock
from kvpure.hashing import (
    VLLM_0_26,
    BlockHashWithGroupId,
    HashRequest,
    HashScheme,
    get_block_hash,
    make_block_hash_with_group_id,
)

BLOCK_SIZE = 2
NUM_BLOCKS = 10
PREFIXES = ((1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 3, 4, 9, 9, 9, 9), (5, 5, 5, 5, 5, 5, 5, 5))
SCHEME = HashScheme.from_seed(
    algorithm="sha256_cbor", block_size=BLOCK_SIZE, seed="0", profile=VLLM_0_26
)


@dataclass
class Holder:
    request: CacheRequest
    blocks: list[KVCacheBlock] = field(default_factory=list)


class BlockPoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(
            num_gpu_blocks=NUM_BLOCKS,
            enable_caching=True,
            hash_block_size=BLOCK_SIZE,
            enable_kv_cache_events=True,
            use_int_block_hashes=False,
        )
        self.holders: dict[int, Holder] = {}
        self.next_id = 0
        self.queue_model: list[int] = list(range(1, NUM_BLOCKS))
        self.event_counts: Counter[bytes] = Counter()

    # -- rules ------------------------------------------------------------------------------

    @rule(
        prefix=st.sampled_from(PREFIXES),
        num_tokens=st.integers(min_value=1, max_value=len(PREFIXES[0])),
    )
    def arrive(self, prefix: tuple[int, ...], num_tokens: int) -> None:
        request = CacheRequest(
            request_id=str(self.next_id),
            hash_request=HashRequest(prompt_token_ids=prefix[:num_tokens]),
            scheme=SCHEME,
        )
        self.next_id += 1
        hits: list[KVCacheBlock] = []
        for block_hash in list(request.block_hashes)[: (num_tokens - 1) // BLOCK_SIZE]:
            cached = self.pool.get_cached_block(block_hash, [0])
            if cached is None:
                break
            hits.append(cached[0])
        num_needed = -(-num_tokens // BLOCK_SIZE) - len(hits)
        evictable = sum(b.ref_cnt == 0 for b in hits)
        if num_needed + evictable > self.pool.get_num_free_blocks():
            return
        self.pool.touch(hits)
        for block in hits:
            if block.block_id in self.queue_model:
                self.queue_model.remove(block.block_id)
        new_blocks = self.pool.get_new_blocks(num_needed)
        assert [b.block_id for b in new_blocks] == self.queue_model[:num_needed]
        del self.queue_model[:num_needed]
        holder = Holder(request, hits + new_blocks)
        self.pool.cache_full_blocks(
            request, holder.blocks, len(hits), num_tokens // BLOCK_SIZE, BLOCK_SIZE, 0
        )
        self.holders[int(request.request_id)] = holder

    @precondition(lambda self: bool(self.holders))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.holders)))
        holder = self.holders.pop(key)
        ordered = list(reversed(holder.blocks))
        self.pool.free_blocks(ordered)
        freed = [b for b in dict.fromkeys(ordered) if b.ref_cnt == 0]
        without = [b.block_id for b in ordered if b in freed and b.block_hash is None]
        with_hash = [b.block_id for b in ordered if b in freed and b.block_hash is not None]
        self.queue_model = without + self.queue_model + with_hash

    @rule()
    def reset_prefix_cache(self) -> None:
        held = bool(self.holders)
        assert self.pool.reset_prefix_cache() is (not held)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def events_rebuild_the_cached_set(self) -> None:
        for event in self.pool.take_events():
            if isinstance(event, AllBlocksCleared):
                self.event_counts.clear()
            elif isinstance(event, BlockStored):
                for h in event.block_hashes:
                    assert isinstance(h, bytes)
                    self.event_counts[make_block_hash_with_group_id(h, 0)] += 1
            elif isinstance(event, BlockRemoved):
                for h in event.block_hashes:
                    assert isinstance(h, bytes)
                    self.event_counts[make_block_hash_with_group_id(h, 0)] -= 1
        live = {key: n for key, n in self.event_counts.items() if n}
        cached = self.pool.cached_block_hash_to_block
        assert live == {key: len(holders_by_id(blocks)) for key, blocks in cached.items()}

    @invariant()
    def every_block_is_free_held_or_null(self) -> None:
        free = {b.block_id for b in self.pool.free_block_queue.get_all_free_blocks()}
        for block in self.pool.blocks:
            states = [block.block_id in free, block.ref_cnt > 0, block.is_null]
            assert states.count(True) == 1, block

    @invariant()
    def ref_counts_match_holders(self) -> None:
        refs = Counter(b.block_id for h in self.holders.values() for b in h.blocks)
        for block in self.pool.blocks[1:]:
            assert block.ref_cnt == refs[block.block_id]

    @invariant()
    def cached_hashes_map_to_blocks_holding_them(self) -> None:
        cached = self.pool.cached_block_hash_to_block
        for key, blocks in cached.items():
            assert blocks
            for block_id, block in holders_by_id(blocks).items():
                assert block.block_id == block_id
                assert block.block_hash == key
                assert get_block_hash(key)
        for block in self.pool.blocks:
            if block.block_hash is not None:
                held = holders_by_id(cached[BlockHashWithGroupId(block.block_hash)])
                assert block.block_id in held

    @invariant()
    def free_queue_follows_the_model(self) -> None:
        got = [b.block_id for b in self.pool.free_block_queue.get_all_free_blocks()]
        assert got == self.queue_model
        assert self.pool.get_num_free_blocks() == len(got)
        assert self.pool.get_usage() == 1.0 - len(got) / (NUM_BLOCKS - 1)


TestBlockPoolMachine = BlockPoolMachine.TestCase
