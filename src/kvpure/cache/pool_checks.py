"""The argument checks of :class:`kvpure.cache.block_pool.BlockPool` (typed errors)."""

from __future__ import annotations

from kvpure.errors import FieldTypeError
from kvpure.field_checks import check_bool, check_int
from kvpure.hashing import VllmHashProfile

__all__ = ["MAX_BLOCK_SIZE", "check_pool_arguments"]

MAX_BLOCK_SIZE = 2**32
"""Tokens per hash block, at most (vLLM's block sizes are small powers of two)."""


def check_pool_arguments(
    enable_caching: object,
    enable_kv_cache_events: object,
    use_int_block_hashes: object,
    hash_block_size: object,
    profile: object,
) -> None:
    """The pool's switches are bools, its hash block size a positive int, its profile one of
    kvpure's hash profiles; else an error naming the argument."""
    check_bool("enable_caching", enable_caching)
    check_bool("enable_kv_cache_events", enable_kv_cache_events)
    check_bool("use_int_block_hashes", use_int_block_hashes)
    check_int("hash_block_size", hash_block_size, minimum=1, maximum=MAX_BLOCK_SIZE)
    if not isinstance(profile, VllmHashProfile):
        raise FieldTypeError(
            field="profile", value=profile, reason="must be a VllmHashProfile (VLLM_0_26...)"
        )
