"""Which hashes a server has cached, counted the way its block pool counts them.

A router that keeps a *set* of hashes gets this wrong: vLLM does not
de-duplicate cached blocks. A prompt that is fully cached still recomputes its
last block (a hit is capped at ``num_tokens - 1`` tokens), and that block is
cached again under the hash it already has: a second ``BlockStored`` for the
hash, two live blocks. When one of them is evicted, the ``BlockRemoved`` for
the hash does not mean the hash is gone: the other block still serves hits.

:class:`LiveBlocks` counts live copies per ``(medium, group_idx, hash)``:
``BlockStored`` adds one per hash, ``BlockRemoved`` takes one away,
``AllBlocksCleared`` empties it. Its :attr:`num_cached_hashes` is the
block pool's number of cached keys.

One case it cannot count: with ``kv_cache_report_mode="full"`` a request's
prefix-cache hits are announced again as ``BlockStored`` (parent None)
although no block was added, and nothing in the event tells a re-announcement
from a new copy. Counting those as copies keeps a hash alive after its last
block is evicted; servers whose requests use that mode need another source
of truth (a replay, or treating every store of a live hash as idempotent, which
loses the duplicate-block case instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pyrsistent import PMap, pmap

from kvpure.events.errors import KVEventArgumentTypeError
from kvpure.events.types import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventBatch,
)

LiveKey = tuple[str | None, int | None, int | bytes]
"""``(medium, group_idx, block hash)``."""

_EMPTY: PMap[LiveKey, int] = pmap()


def _key(block_hash: object, group_idx: object, medium: object) -> LiveKey:
    if isinstance(block_hash, bool) or not isinstance(block_hash, int | bytes):
        raise KVEventArgumentTypeError(
            argument="block_hash", expected="an int or the digest bytes", value=block_hash
        )
    if group_idx is not None and (isinstance(group_idx, bool) or not isinstance(group_idx, int)):
        raise KVEventArgumentTypeError(
            argument="group_idx", expected="int or None", value=group_idx
        )
    if medium is not None and not isinstance(medium, str):
        raise KVEventArgumentTypeError(argument="medium", expected="str or None", value=medium)
    return (medium, group_idx, block_hash)


@dataclass(frozen=True, slots=True)
class LiveBlocks:
    """Live block copies per ``(medium, group_idx, hash)``, from a stream of events."""

    copies: PMap[LiveKey, int] = field(default=_EMPTY)
    """Keys with at least one live copy, and how many."""
    unmatched_removals: int = 0
    """BlockRemoved hashes that had no live copy (the stream began after they were
    stored, an event was lost, or a full-mode re-announcement was counted)."""

    def apply(self, event: KVEvent) -> LiveBlocks:
        """The state after ``event``."""
        if isinstance(event, BlockStored):
            evolver = self.copies.evolver()
            for block_hash in event.block_hashes:
                key = (event.medium, event.group_idx, block_hash)
                evolver[key] = (evolver[key] + 1) if key in evolver else 1
            return LiveBlocks(evolver.persistent(), self.unmatched_removals)
        if isinstance(event, BlockRemoved):
            evolver = self.copies.evolver()
            unmatched = self.unmatched_removals
            for block_hash in event.block_hashes:
                key = (event.medium, event.group_idx, block_hash)
                if key not in evolver:
                    unmatched += 1
                elif evolver[key] > 1:
                    evolver[key] -= 1
                else:
                    evolver.remove(key)
            return LiveBlocks(evolver.persistent(), unmatched)
        if isinstance(event, AllBlocksCleared):
            return LiveBlocks(_EMPTY, self.unmatched_removals)
        raise KVEventArgumentTypeError(argument="event", expected="a KV event", value=event)

    def apply_all(
        self, events: KVEvent | KVEventBatch | Iterable[KVEvent | KVEventBatch]
    ) -> LiveBlocks:
        """The state after every event: one event, one batch, or an iterable of both.

        A batch stands for its events, in order.
        """
        items: Iterable[KVEvent | KVEventBatch]
        if isinstance(events, KVEventBatch | BlockStored | BlockRemoved | AllBlocksCleared):
            items = (events,)
        elif isinstance(events, Iterable):
            items = events
        else:
            raise KVEventArgumentTypeError(
                argument="events", expected="an event, a batch or an iterable of them", value=events
            )
        state = self
        for item in items:
            for event in item.events if isinstance(item, KVEventBatch) else (item,):
                state = state.apply(event)
        return state

    def copies_of(
        self, block_hash: int | bytes, *, group_idx: int | None, medium: str | None = "GPU"
    ) -> int:
        """How many live blocks hold ``block_hash`` in that group and medium."""
        return self.copies.get(_key(block_hash, group_idx, medium), 0)

    def is_cached(
        self, block_hash: int | bytes, *, group_idx: int | None, medium: str | None = "GPU"
    ) -> bool:
        """Whether some live block holds ``block_hash`` in that group and medium."""
        return _key(block_hash, group_idx, medium) in self.copies

    @property
    def num_cached_hashes(self) -> int:
        """Distinct cached keys (vLLM's ``len(cached_block_hash_to_block)``)."""
        return len(self.copies)
