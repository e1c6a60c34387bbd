"""Chained block hashes of a request, and their extension as tokens are appended.

Block ``i`` covers tokens ``[i*B, (i+1)*B)`` of the request (``B`` the scheme's
block size) and its hash is ``hash_fn((parent, tuple(tokens), extra_keys))``
where ``parent`` is the previous block's hash, or NONE_HASH for block 0. Only
full blocks are hashed. Hashing a prompt and extending step by step share one
path: work out the extra keys of every new full block
(:func:`~kvpure.hashing.extra_keys.extra_keys_for_blocks`), then chain-hash
the token blocks with a :data:`TokenBlockChainHasher`. :func:`hash_token_blocks`
is the reference chain hasher; the public paths default to
:func:`kvpure.hashing.fast_prompt.hash_token_blocks` (``fast_hash_token_blocks``),
which returns the same bytes for every input, much faster on long prompts. Pass
``chain_hasher=hash_token_blocks`` to use the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast, runtime_checkable

from pyrsistent import PVector, pvector

from kvpure.errors import InvalidFieldError
from kvpure.hashing.extra_keys import (
    ExtraKeys,
    extra_keys_for_blocks,
    steady_extra_keys,
    steady_extra_keys_start,
)
from kvpure.hashing.fast_prompt import hash_token_blocks as fast_hash_token_blocks
from kvpure.hashing.fast_prompt import one_block_hasher
from kvpure.hashing.functions import HashFunction, get_hash_fn_by_name
from kvpure.hashing.request import HashRequest
from kvpure.hashing.scheme import HashScheme
from kvpure.hashing.types import BlockHash


@runtime_checkable
class TokenBlockChainHasher(Protocol):
    """Chain-hashes consecutive full token blocks (the signature of :func:`hash_token_blocks`)."""

    def __call__(
        self,
        algo_name: str,
        parent: bytes,
        token_ids: Sequence[int],
        block_size: int,
        extra_keys: Sequence[tuple[object, ...] | None],
    ) -> list[bytes]: ...


def hash_token_blocks(
    algo_name: str,
    parent: bytes,
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: Sequence[tuple[object, ...] | None],
) -> list[bytes]:
    """The reference chain hasher: one digest per entry of ``extra_keys``.

    Block ``i`` covers ``token_ids[i*block_size:(i+1)*block_size]``; the parent
    of block 0 is ``parent`` and of block ``i`` the digest of block ``i-1``.
    """
    hash_fn = get_hash_fn_by_name(algo_name)
    digests: list[bytes] = []
    for index, keys in enumerate(extra_keys):
        start = index * block_size
        parent = hash_fn((parent, tuple(token_ids[start : start + block_size]), keys))
        digests.append(parent)
    return digests


def hash_block_tokens(
    hash_fn_or_scheme: HashScheme | HashFunction,
    parent_block_hash: bytes | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[object, ...] | None = None,
    *,
    none_hash: bytes | None = None,
) -> BlockHash:
    """The hash of one block given its parent's hash, as vLLM's function of that name.

    A falsy parent (None or ``b""``) stands for NONE_HASH: the scheme's, or
    ``none_hash`` when a bare hash function is given.
    """
    if isinstance(hash_fn_or_scheme, HashScheme):
        hash_fn = get_hash_fn_by_name(hash_fn_or_scheme.algorithm)
        default_parent: bytes | None = hash_fn_or_scheme.none_hash
    else:
        hash_fn = hash_fn_or_scheme
        default_parent = none_hash
    if not parent_block_hash:
        if not default_parent:
            raise InvalidFieldError(
                field="none_hash",
                value=default_parent,
                reason="a block without a parent needs NONE_HASH: pass a HashScheme or none_hash",
            )
        parent_block_hash = default_parent
    return BlockHash(hash_fn((parent_block_hash, tuple(curr_block_token_ids), extra_keys)))


def extend_block_hashes(
    scheme: HashScheme,
    request: HashRequest,
    all_token_ids: Sequence[int],
    block_hashes: PVector[BlockHash],
    *,
    chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
) -> PVector[BlockHash]:
    """``block_hashes`` extended by the hashes of the new full blocks of ``all_token_ids``.

    ``all_token_ids`` is the request's prompt (zeros for embeddings) followed by
    its output tokens so far; ``block_hashes`` the hashes it already has. The
    result is a new PVector sharing ``block_hashes``; it is ``block_hashes``
    itself when no new block is full. This is one run of vLLM's request block
    hasher, including where it resumes its multimodal scan.
    """
    block_size = scheme.block_size
    start = len(block_hashes) * block_size
    num_new_blocks = (len(all_token_ids) - start) // block_size
    if num_new_blocks <= 0:
        return block_hashes
    extra_keys = extra_keys_for_blocks(scheme.profile, request, block_size, start, num_new_blocks)
    parent: bytes = block_hashes[-1] if block_hashes else scheme.none_hash
    end = start + num_new_blocks * block_size
    new_token_ids = all_token_ids[start:end]
    if type(new_token_ids) is not tuple and type(new_token_ids) is not list:
        new_token_ids = tuple(new_token_ids)  # a PVector's slice: the hashers index it
    digests = chain_hasher(scheme.algorithm, parent, new_token_ids, block_size, extra_keys)
    # BlockHash is a NewType of bytes: the digests are BlockHashes as they are
    return block_hashes.extend(cast("list[BlockHash]", digests))


_EMPTY: PVector[BlockHash] = pvector()


def hash_prompt(
    scheme: HashScheme,
    request: HashRequest,
    *,
    chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
) -> PVector[BlockHash]:
    """The block hashes vLLM computes for ``request`` when it arrives (full blocks only)."""
    return extend_block_hashes(
        scheme, request, request.prompt_token_ids_for_hashing, _EMPTY, chain_hasher=chain_hasher
    )


def block_extra_keys(scheme: HashScheme, request: HashRequest, num_tokens: int) -> list[ExtraKeys]:
    """The extra keys of every full block of the first ``num_tokens`` tokens, in one scan."""
    return extra_keys_for_blocks(
        scheme.profile, request, scheme.block_size, 0, num_tokens // scheme.block_size
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _DecodePlan:
    """What one-block extension needs, worked out once per request state chain."""

    steady_start: int
    """Blocks starting here or later all have the same extra keys."""
    hash_block: Callable[[bytes, Sequence[int]], BlockHash]
    """Hashes one such block given its parent."""


def _decode_plan(scheme: HashScheme, request: HashRequest) -> _DecodePlan | None:
    steady_start = steady_extra_keys_start(request, scheme.block_size)
    if steady_start is None:
        return None
    keys = steady_extra_keys(scheme.profile, request)
    hasher = one_block_hasher(scheme.algorithm, scheme.block_size, keys)
    # BlockHash is a NewType of bytes: the digests are BlockHashes as they are
    as_block_hash = cast("Callable[[bytes, Sequence[int]], BlockHash]", hasher)
    return _DecodePlan(steady_start=steady_start, hash_block=as_block_hash)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestBlockHashes:
    """A request's tokens so far and their block hashes, extended as output arrives.

    ``start`` hashes the prompt; ``append_output_token_ids`` returns a new value
    whose ``block_hashes`` share the old ones, exactly as vLLM's
    ``Request.append_output_token_ids`` extends ``Request.block_hashes``. The
    blocks past the prompt's multimodal items have the same extra keys (unless
    the prompt has embeddings), so the value builds their one-block hasher once,
    at construction, and hands it on to the values it returns.
    """

    scheme: HashScheme
    request: HashRequest
    all_token_ids: PVector[int]
    block_hashes: PVector[BlockHash]
    _plan: _DecodePlan | None = field(init=False, repr=False, compare=False, hash=False)
    _pending: tuple[int, ...] = field(init=False, repr=False, compare=False, hash=False)
    """The tokens after the last hashed block (the start of the next one)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_plan", _decode_plan(self.scheme, self.request))
        start = len(self.block_hashes) * self.scheme.block_size
        object.__setattr__(self, "_pending", tuple(self.all_token_ids[start:]))

    @classmethod
    def start(
        cls,
        scheme: HashScheme,
        request: HashRequest,
        *,
        chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
    ) -> RequestBlockHashes:
        """The state right after vLLM builds the request (prompt blocks hashed)."""
        tokens: PVector[int] = pvector(request.prompt_token_ids_for_hashing)
        hashes = extend_block_hashes(scheme, request, tokens, _EMPTY, chain_hasher=chain_hasher)
        return cls(scheme=scheme, request=request, all_token_ids=tokens, block_hashes=hashes)

    def append_output_token_ids(
        self,
        token_ids: int | Iterable[int],
        *,
        chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
    ) -> RequestBlockHashes:
        """The state after appending ``token_ids`` (one step) and hashing new full blocks."""
        new_tokens = (token_ids,) if isinstance(token_ids, int) else tuple(token_ids)
        tokens = self.all_token_ids.extend(new_tokens)
        pending = self._pending + new_tokens
        hashes = self.block_hashes
        block_size = self.scheme.block_size
        if len(pending) < block_size:  # no new full block
            return self._evolve(tokens, hashes, pending)
        plan = self._plan
        start = len(hashes) * block_size
        if plan is not None and start >= plan.steady_start and chain_hasher is _FAST:
            hash_block = plan.hash_block
            parent = hashes[-1]  # start >= steady_start >= block_size: a block before
            while len(pending) >= block_size:
                parent = hash_block(parent, pending[:block_size])
                hashes = hashes.append(parent)
                pending = pending[block_size:]
        else:
            hashes = extend_block_hashes(
                self.scheme, self.request, tokens, hashes, chain_hasher=chain_hasher
            )
            pending = pending[len(pending) // block_size * block_size :]
        return self._evolve(tokens, hashes, pending)

    def _evolve(
        self,
        all_token_ids: PVector[int],
        block_hashes: PVector[BlockHash],
        pending: tuple[int, ...],
    ) -> RequestBlockHashes:
        """This state with new tokens and hashes; the checked fields and plan carried over."""
        new = object.__new__(RequestBlockHashes)
        set_field = object.__setattr__
        set_field(new, "scheme", self.scheme)
        set_field(new, "request", self.request)
        set_field(new, "all_token_ids", all_token_ids)
        set_field(new, "block_hashes", block_hashes)
        set_field(new, "_plan", self._plan)
        set_field(new, "_pending", pending)
        return new

    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens so far."""
        return len(self.all_token_ids)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled by its public fields; the decode plan (a closure) is rebuilt."""
        return (_rebuild, (self.scheme, self.request, self.all_token_ids, self.block_hashes))


def _rebuild(
    scheme: HashScheme,
    request: HashRequest,
    all_token_ids: PVector[int],
    block_hashes: PVector[BlockHash],
) -> RequestBlockHashes:
    return RequestBlockHashes(
        scheme=scheme, request=request, all_token_ids=all_token_ids, block_hashes=block_hashes
    )


_FAST = fast_hash_token_blocks
