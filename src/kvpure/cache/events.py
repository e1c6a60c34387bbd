"""vLLM's KV cache events as frozen values: BlockStored, BlockRemoved, AllBlocksCleared.

Fields and their order are those of ``vllm.distributed.kv_events``; a hash is
in vLLM's external form (an int, the digest's low 64 bits, or the digest
bytes), chosen by the pool's ``use_int_block_hashes``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kvpure.hashing import ExternalBlockHash

MEDIUM_GPU = "GPU"
"""The medium the scheduler's block pool reports."""

ExtraKeys = tuple[object, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStored:
    """Blocks newly cached by one ``cache_full_blocks`` call of one group (or reused ones)."""

    block_hashes: tuple[ExternalBlockHash, ...]
    parent_block_hash: ExternalBlockHash | None
    token_ids: tuple[int, ...]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: tuple[ExtraKeys, ...] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    """0.33+: who owns the block (None for the scheduler's own pool)."""
    session_id: str | None = None
    """0.33+: the request's session (None: requests here have none)."""
    lookahead_token_ids: tuple[tuple[int, ...], ...] | None = None
    """0.33+ with lookahead hashes: the L tokens after each stored block."""

    def with_spec_metadata(self, kind: str, sliding_window: int | None) -> BlockStored:
        """The event annotated with its group's spec kind and window (the manager's step)."""
        if self.kv_cache_spec_kind == kind and self.kv_cache_spec_sliding_window == sliding_window:
            return self  # already so: the same value
        return replace(self, kv_cache_spec_kind=kind, kv_cache_spec_sliding_window=sliding_window)


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockRemoved:
    """One block hash left the prefix cache (evicted, or replaced on promotion)."""

    block_hashes: tuple[ExternalBlockHash, ...]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None
    """0.33+: who owned the block (None for the scheduler's own pool)."""


# The slots' own setters: a frozen dataclass's __init__ goes through object.__setattr__ for
# every field, four times slower on the pool's per-eviction path.
_new_event = object.__new__
_Setter = Callable[[object, object], None]
_removed_slots = vars(BlockRemoved)  # the slot descriptors, by field name
_set_removed_hashes: _Setter = _removed_slots["block_hashes"].__set__
_set_removed_medium: _Setter = _removed_slots["medium"].__set__
_set_removed_group: _Setter = _removed_slots["group_idx"].__set__
_set_removed_locality: _Setter = _removed_slots["locality"].__set__
_set_removed_ownership: _Setter = _removed_slots["ownership"].__set__


def block_removed_on_gpu(block_hash: ExternalBlockHash, group_idx: int) -> BlockRemoved:
    """``BlockRemoved(block_hashes=(block_hash,), medium=MEDIUM_GPU, group_idx=group_idx)``,
    the same value, built without the dataclass's per-field ``object.__setattr__``."""
    event: BlockRemoved = _new_event(BlockRemoved)
    _set_removed_hashes(event, (block_hash,))
    _set_removed_medium(event, MEDIUM_GPU)
    _set_removed_group(event, group_idx)
    _set_removed_locality(event, None)
    _set_removed_ownership(event, None)
    return event


def blocks_removed_on_gpu(
    removed: Iterable[tuple[ExternalBlockHash, int]],
) -> list[BlockRemoved]:
    """:func:`block_removed_on_gpu` of each ``(block_hash, group_idx)``, in order."""
    events: list[BlockRemoved] = []
    append = events.append
    new, set_hashes, set_medium = _new_event, _set_removed_hashes, _set_removed_medium
    set_group, set_locality = _set_removed_group, _set_removed_locality
    set_ownership = _set_removed_ownership
    for block_hash, group_idx in removed:
        event: BlockRemoved = new(BlockRemoved)
        set_hashes(event, (block_hash,))
        set_medium(event, MEDIUM_GPU)
        set_group(event, group_idx)
        set_locality(event, None)
        set_ownership(event, None)
        append(event)
    return events


@dataclass(frozen=True, slots=True, kw_only=True)
class AllBlocksCleared:
    """The prefix cache was reset."""


KVCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared

__all__ = [
    "MEDIUM_GPU",
    "AllBlocksCleared",
    "BlockRemoved",
    "BlockStored",
    "KVCacheEvent",
    "block_removed_on_gpu",
    "blocks_removed_on_gpu",
]
