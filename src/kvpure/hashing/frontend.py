"""Prompt block hashes computed by a frontend or router, as vLLM 0.34 takes them.

A 0.34 engine tells its frontends how it hashes in its handshake
(``EngineCoreReadyResponse.prefix_hash_config``, a ``PrefixHashConfig``:
``hash_algo``, ``hash_block_size``, ``none_hash``, ``num_lookahead_tokens``;
:meth:`HashScheme.from_prefix_hash_config <kvpure.hashing.HashScheme.from_prefix_hash_config>`
reads it). A frontend may then send a prompt's block hashes with the request
(``EngineCoreRequest.block_hashes``). The engine checks only their *count*
(``vllm/v1/core/kv_cache_utils.py``: ``frontend_block_hashes``): it must be
``max(n - L, 0) // B`` for n prompt tokens, else the engine warns and hashes the
prompt itself. Their values are never checked, so a router must compute them with
the engine's exact scheme (``hash_prompt``).

``truncate_block_hashes`` is ``vllm/v1/request.py``'s ``Request.truncate_block_hashes``:
after a request's tokens are cut back, the hashes past ``max(0, n - L) // B`` go.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from pyrsistent import PVector, pvector

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.hashing.block_hasher import hash_prompt
from kvpure.hashing.request import HashRequest
from kvpure.hashing.scheme import HashScheme
from kvpure.hashing.types import BlockHash

__all__ = [
    "frontend_block_hashes",
    "num_frontend_block_hashes",
    "router_block_hashes",
    "truncate_block_hashes",
]


_MAX_COUNT = 2**63 - 1  # token counts and block sizes: what vLLM's int64 holds


def _count(value: object, field: str, minimum: int) -> int:
    if type(value) is not int or not minimum <= value <= _MAX_COUNT:
        raise InvalidFieldError(
            field=field, value=value, reason=f"must be an int from {minimum} to {_MAX_COUNT}"
        )
    return value


def _hash_list(block_hashes: object) -> Sequence[bytes]:
    """``block_hashes`` if it is a sequence of bytes (its type, first and last items)."""
    if not isinstance(block_hashes, Sequence) or isinstance(block_hashes, str | bytes | bytearray):
        raise FieldTypeError(
            field="block_hashes",
            value=block_hashes,
            reason="must be a sequence of block hashes (bytes)",
        )
    for index in (0, len(block_hashes) - 1) if block_hashes else ():
        if not isinstance(block_hashes[index], bytes):
            raise FieldTypeError(
                field=f"block_hashes[{index}]",
                value=block_hashes[index],
                reason="a block hash is bytes",
            )
    return block_hashes


def num_frontend_block_hashes(
    num_prompt_tokens: int, *, hash_block_size: int, num_lookahead_tokens: int = 0
) -> int:
    """How many block hashes a frontend sends (and a 0.34 engine accepts) for a prompt of
    ``num_prompt_tokens`` tokens: ``max(n - L, 0) // hash_block_size``."""
    n = _count(num_prompt_tokens, "num_prompt_tokens", 0)
    size = _count(hash_block_size, "hash_block_size", 1)
    lookahead = _count(num_lookahead_tokens, "num_lookahead_tokens", 0)
    return max(n - lookahead, 0) // size


def router_block_hashes(scheme: HashScheme, request: HashRequest) -> PVector[BlockHash]:
    """The prompt block hashes a router sends with ``request`` to an engine hashing with
    ``scheme``: :func:`~kvpure.hashing.hash_prompt` itself, whose length is
    :func:`num_frontend_block_hashes` of the prompt."""
    return hash_prompt(scheme, request)


def frontend_block_hashes(
    block_hashes: Sequence[bytes] | None,
    num_prompt_tokens: int,
    scheme: HashScheme | None,
) -> tuple[BlockHash, ...] | None:
    """What a 0.34 engine keeps of a frontend's prompt block hashes: all of them where their
    count is ``max(n - L, 0) // B`` under the engine's ``scheme``; None where none were sent,
    the engine has no prefix hash config (``scheme`` None) or the count differs (the engine
    then warns and hashes the prompt itself)."""
    if block_hashes is None:
        return None
    n = _count(num_prompt_tokens, "num_prompt_tokens", 0)
    if scheme is None:
        return None
    if not isinstance(scheme, HashScheme):
        raise FieldTypeError(field="scheme", value=scheme, reason="must be a HashScheme or None")
    _hash_list(block_hashes)
    for index, block_hash in enumerate(block_hashes):
        if not isinstance(block_hash, bytes):
            raise FieldTypeError(
                field=f"block_hashes[{index}]", value=block_hash, reason="a block hash is bytes"
            )
    expected = num_frontend_block_hashes(
        n, hash_block_size=scheme.block_size, num_lookahead_tokens=scheme.num_hash_lookahead_tokens
    )
    if len(block_hashes) != expected:
        return None
    return tuple(BlockHash(bytes(h)) for h in block_hashes)


def truncate_block_hashes(
    block_hashes: PVector[BlockHash] | Sequence[BlockHash],
    num_tokens: int,
    hash_block_size: int,
    num_hash_lookahead_tokens: int = 0,
) -> PVector[BlockHash]:
    """The hashes still valid for a request cut back to ``num_tokens`` tokens: the first
    ``max(0, num_tokens - L) // hash_block_size`` (vLLM 0.34's
    ``Request.truncate_block_hashes(hash_block_size, num_hash_lookahead_tokens)``)."""
    keep = num_frontend_block_hashes(
        num_tokens, hash_block_size=hash_block_size, num_lookahead_tokens=num_hash_lookahead_tokens
    )
    kept: PVector[BlockHash] = (
        block_hashes
        if isinstance(block_hashes, PVector)
        else pvector(cast("Sequence[BlockHash]", _hash_list(block_hashes)))
    )
    return kept if len(kept) <= keep else kept[:keep]
