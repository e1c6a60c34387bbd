"""The block pool's events: BlockStored for reused blocks, removed keys, the event queue.

:class:`BlockPoolEvents` is a base of :class:`kvpure.cache.block_pool.BlockPool`
(methods found on the class as before: no call goes through another layer). It
builds the events vLLM 0.26's ``BlockPool`` publishes: ``BlockStored`` with the
request's tokens, LoRA and extra keys as the release writes them, and
``(hash, group id)`` pairs for ``BlockRemoved``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from kvpure.cache.event_keys import event_extra_keys, lookahead_token_ids
from kvpure.cache.events import MEDIUM_GPU, BlockStored, ExtraKeys, KVCacheEvent
from kvpure.cache.request import CacheRequest
from kvpure.hashing import (
    ExternalBlockHash,
    VllmHashProfile,
    resolve_block_hashes,
    to_event_extra_keys,
)
from kvpure.hashing.types import GROUP_ID_NUM_BYTES

__all__ = ["BlockPoolEvents"]


class BlockPoolEvents:
    """The event side of a block pool (``BlockPool`` sets these attributes)."""

    enable_kv_cache_events: bool
    use_int_block_hashes: bool
    hash_block_size: int
    profile: VllmHashProfile
    num_hash_lookahead_tokens: int
    kv_event_queue: list[KVCacheEvent]
    _to_external: Callable[[bytes], ExternalBlockHash]

    def external(self, block_hash: bytes) -> ExternalBlockHash:
        return self._to_external(block_hash)

    def stored_event(
        self,
        request: CacheRequest,
        *,
        block_hashes: list[ExternalBlockHash],
        parent_block_hash: ExternalBlockHash | None,
        start_token_idx: int,
        end_token_idx: int,
        block_size: int,
        group_id: int,
        extra_keys: list[ExtraKeys],
        lookahead_token_ids: tuple[tuple[int, ...], ...] | None,
    ) -> BlockStored:
        lora_name = request.lora_name
        return BlockStored(
            block_hashes=tuple(block_hashes),
            parent_block_hash=parent_block_hash,
            token_ids=tuple(request.all_token_ids[start_token_idx:end_token_idx]),
            block_size=block_size,
            lora_id=request.lora_int_id if lora_name is not None else None,
            medium=MEDIUM_GPU,
            lora_name=lora_name,
            extra_keys=to_event_extra_keys(self.profile, extra_keys),
            group_idx=group_id,
            lookahead_token_ids=lookahead_token_ids,
        )

    def emit_cached_block_events(
        self, request: CacheRequest, num_cached_blocks: int, block_size: int, group_id: int
    ) -> None:
        """A BlockStored for the first ``num_cached_blocks`` reused blocks (report mode "full")."""
        if not self.enable_kv_cache_events or num_cached_blocks == 0:
            return
        block_hashes = resolve_block_hashes(request.block_hashes, self.hash_block_size, block_size)
        lookahead = self.num_hash_lookahead_tokens
        self.kv_event_queue.append(
            self.stored_event(
                request,
                block_hashes=[self.external(block_hashes[i]) for i in range(num_cached_blocks)],
                parent_block_hash=None,
                start_token_idx=0,
                end_token_idx=num_cached_blocks * block_size,
                block_size=block_size,
                group_id=group_id,
                extra_keys=event_extra_keys(
                    self.profile, request, range(num_cached_blocks), block_size, lookahead
                ),
                lookahead_token_ids=lookahead_token_ids(
                    request, range(num_cached_blocks), block_size, lookahead
                ),
            )
        )

    def split_keys(self, keys: list[bytes]) -> Iterable[tuple[ExternalBlockHash, int]]:
        """``(external form of the hash, group id)`` of each key (a hash and its 4-byte
        group id: get_block_hash and get_group_id, without their length check)."""
        size = len(keys[0])
        if self.use_int_block_hashes and size >= 12 and len(set(map(len, keys))) == 1:
            # the hash's low 64 bits and the group id, read in C for every key at once
            return struct.iter_unpack(f">{size - 12}xQI", b"".join(keys))
        to_external = self._to_external
        return [
            (
                to_external(key[:-GROUP_ID_NUM_BYTES]),
                int.from_bytes(key[-GROUP_ID_NUM_BYTES:], "big"),
            )
            for key in keys
        ]

    def take_events(self) -> list[KVCacheEvent]:
        """The queued events, oldest first; the queue is emptied."""
        if not self.enable_kv_cache_events:
            return []
        events = self.kv_event_queue
        self.kv_event_queue = []
        return events
