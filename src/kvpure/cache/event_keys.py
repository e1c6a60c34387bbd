"""What a ``BlockStored`` event says of each stored block besides its hash.

The extra keys are the block hash's, computed as the release's hasher does
(``generate_block_hash_extra_keys`` of the hash profile; the event untags them
later, ``to_event_extra_keys``), and with lookahead hashes (0.33+, L > 0) over
the window ``[s, e + L)`` with the multimodal index rewound after each block
(vLLM's ``BlockPool.generate_event_extra_keys`` and
``generate_lookahead_block_hash_extra_keys``); ``lookahead_token_ids`` are the
L tokens after each block (``BlockPool.get_lookahead_token_ids``). As in vLLM,
each event's scan starts at multimodal index 0 at its first block.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvpure.cache.events import ExtraKeys
from kvpure.cache.request import CacheRequest
from kvpure.hashing import VllmHashProfile, generate_block_hash_extra_keys
from kvpure.hashing.extra_keys import steady_extra_keys, steady_extra_keys_start

__all__ = ["event_extra_keys", "lookahead_token_ids"]


def event_extra_keys(
    profile: VllmHashProfile,
    request: CacheRequest,
    block_indices: Iterable[int],
    block_size: int,
    lookahead: int = 0,
) -> list[ExtraKeys]:
    """The extra keys of each block ``i`` (tokens ``[i * block_size, (i + 1) * block_size)``),
    under ``lookahead`` L (0: none)."""
    if lookahead:
        return _lookahead_extra_keys(profile, request, block_indices, block_size, lookahead)
    keys: list[ExtraKeys] = []
    mm_idx = 0
    hash_request = request.hash_request
    # from the steady start on, vLLM's scan finds no multimodal item and no salt: every
    # block has the steady keys, and the scan's index does not move
    steady_start = steady_extra_keys_start(hash_request, block_size)
    steady = None if steady_start is None else steady_extra_keys(profile, hash_request)
    for i in block_indices:
        start = i * block_size
        if steady_start is not None and start >= steady_start:
            keys.append(steady)
            continue
        extra, mm_idx = generate_block_hash_extra_keys(
            profile, hash_request, start, start + block_size, mm_idx
        )
        keys.append(extra)
    return keys


def _lookahead_extra_keys(
    profile: VllmHashProfile,
    request: CacheRequest,
    block_indices: Iterable[int],
    block_size: int,
    lookahead: int,
) -> list[ExtraKeys]:
    """Each block's keys over ``[s, e + L)``; the multimodal index rewound after each block
    to the first item ending past ``e``."""
    hash_request = request.hash_request
    features = hash_request.mm_features
    keys: list[ExtraKeys] = []
    mm_idx = 0
    for i in block_indices:
        start = i * block_size
        end = start + block_size
        extra, mm_idx = generate_block_hash_extra_keys(
            profile, hash_request, start, end + lookahead, mm_idx
        )
        while mm_idx > 0 and features[mm_idx - 1].end > end:
            mm_idx -= 1
        keys.append(extra)
    return keys


def lookahead_token_ids(
    request: CacheRequest, block_indices: Iterable[int], block_size: int, lookahead: int
) -> tuple[tuple[int, ...], ...] | None:
    """The ``lookahead`` tokens after each block (None without lookahead hashes)."""
    if not lookahead:
        return None
    tokens = request.all_token_ids
    return tuple(
        tuple(tokens[(i + 1) * block_size : (i + 1) * block_size + lookahead])
        for i in block_indices
    )
