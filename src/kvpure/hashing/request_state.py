"""A request's block hashes as output tokens arrive: :class:`RequestBlockHashes`.

The value vLLM keeps in ``Request.block_hashes``/``Request.all_token_ids``, made
immutable: each append returns a new value sharing the old one's hashed blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, cast, overload

from pyrsistent import PVector, pvector

from kvpure.errors import FieldTypeError
from kvpure.hashing.accelerator import install_decode_append
from kvpure.hashing.block_hasher import (
    TokenBlockChainHasher,
    check_scheme_and_request,
    extend_block_hashes,
    hash_prompt,
)
from kvpure.hashing.cbor_text import check_cbor_text
from kvpure.hashing.extra_keys import steady_extra_keys, steady_extra_keys_start
from kvpure.hashing.fast_prompt import fast_hash_token_blocks, one_block_hasher
from kvpure.hashing.request import HashRequest
from kvpure.hashing.scheme import INT32_MAX, HashScheme
from kvpure.hashing.token_checks import check_token_ids, token_id_error
from kvpure.hashing.types import BlockHash


@dataclass(frozen=True, slots=True, kw_only=True)
class _DecodePlan:
    """What one-block extension needs, worked out once per request state chain."""

    steady_start: int
    """Blocks starting here or later all have the same extra keys."""
    hash_block: Callable[[bytes, Sequence[int]], BlockHash]
    """Hashes one such block given its parent (and, with lookahead L, the L tokens after it:
    ``hash_block(parent, block + next_L)``)."""
    lookahead: int = 0
    """The scheme's ``num_hash_lookahead_tokens`` (the C append reads it here)."""


def _decode_plan(scheme: HashScheme, request: HashRequest) -> _DecodePlan | None:
    if scheme.algorithm.uses_cbor:
        check_cbor_text(request)  # before the plan encodes the request's keys
    steady_start = steady_extra_keys_start(request, scheme.block_size)
    if steady_start is None:
        return None
    keys = steady_extra_keys(scheme.profile, request)
    lookahead = scheme.num_hash_lookahead_tokens
    hasher = one_block_hasher(scheme.algorithm, scheme.block_size, keys, lookahead)
    # BlockHash is a NewType of bytes: the digests are BlockHashes as they are
    as_block_hash = cast("Callable[[bytes, Sequence[int]], BlockHash]", hasher)
    return _DecodePlan(steady_start=steady_start, hash_block=as_block_hash, lookahead=lookahead)


@dataclass(frozen=True, slots=True, kw_only=True)
class _RequestContext:
    """What every state of one request shares: its scheme, request and decode plan."""

    scheme: HashScheme
    request: HashRequest
    block_size: int
    plan: _DecodePlan | None = field(compare=False, hash=False)
    lookahead: int = 0
    """The scheme's ``num_hash_lookahead_tokens``."""
    int32: bool = False
    """Whether the profile holds token ids as signed int32."""


_Chunks = tuple[object, ...]
"""Token blocks appended after the first hashed tokens, newest first, as nested pairs
``(rest, block)`` (``()`` when none): one pair per hashed block, joined when read."""

_Hashed = tuple[_RequestContext, int, PVector[BlockHash], Sequence[int], _Chunks, int]
"""The hashed blocks of a request state, shared by the states until the next block:
``(context, block_size, block_hashes, first_token_ids, chunks, num_hashed_tokens)``;
``first_token_ids`` is a PVector or a tuple (a prompt's: building a PVector of a long
prompt costs as much as hashing it, so it is built when ``all_token_ids`` is read)."""

_State = tuple[Any, ...]
"""A request state: its hashed blocks and the tokens after them, newest first, as a
chain of small tuples ``(hashed, count, token, rest)``, ``count`` the number of tokens
up to ``token``; the chain ends in ``(hashed, 0, None, None)``. Appending one token is
one such tuple, whatever the block size."""


def _state_of(hashed: _Hashed, tokens: Sequence[int]) -> _State:
    node: _State = (hashed, 0, None, None)
    if not tokens:
        return node
    for count, token in enumerate(tokens, 1):
        node = (hashed, count, token, node)
    return node


def _pending_tokens(node: _State) -> list[int]:
    tokens: list[int] = []
    append = tokens.append
    while node[1]:
        _, _, token, node = node
        append(token)
    tokens.reverse()
    return tokens


def _hashed_token_ids(hashed: _Hashed) -> PVector[int]:
    first, chunks = hashed[3], hashed[4]
    if not isinstance(first, PVector):
        first = pvector(first)
    if not chunks:
        return first
    blocks: list[tuple[int, ...]] = []
    while chunks:
        chunks, block = cast("tuple[_Chunks, tuple[int, ...]]", chunks)
        blocks.append(block)
    return first.extend([token for block in reversed(blocks) for token in block])


def _token_list(token_ids: object) -> list[Any]:  # checked by the caller
    """An iterable of token ids as a list; anything else (None, a dict, ...) a typed error."""
    if isinstance(token_ids, Mapping | AbstractSet) or not isinstance(token_ids, Iterable):
        raise FieldTypeError(
            field="token_ids",
            value=token_ids,
            reason="must be a token id (int) or a list, tuple or iterable of them",
        )
    return list(token_ids)


@dataclass(frozen=True, slots=True, init=False, repr=False, eq=False)
class RequestBlockHashes:
    """A request's tokens so far and their block hashes, extended as output arrives.

    ``start`` hashes the prompt; ``append_output_token_ids`` returns a new value
    whose ``block_hashes`` share the old ones, exactly as vLLM's
    ``Request.append_output_token_ids`` extends ``Request.block_hashes``. The
    blocks past the prompt's multimodal items have the same extra keys (unless
    the prompt has embeddings), so the value builds their one-block hasher once,
    at construction, and hands it on to the values it returns.

    Built as ``RequestBlockHashes(scheme=, request=, all_token_ids=, block_hashes=)``;
    equal when those four are. Inside, the hashed blocks are one value shared
    by the states until the next block, and the tokens after them a chain of
    small tuples, so that appending one token costs one tuple and one new value
    of one field, and a full block one hash and one PVector append;
    ``all_token_ids`` is built from them when read.
    """

    _state: _State

    def __init__(
        self,
        *,
        scheme: HashScheme,
        request: HashRequest,
        all_token_ids: Sequence[int],
        block_hashes: PVector[BlockHash],
    ) -> None:
        block_size = scheme.block_size
        context = _RequestContext(
            scheme=scheme,
            request=request,
            block_size=block_size,
            plan=_decode_plan(scheme, request),
            lookahead=scheme.num_hash_lookahead_tokens,
            int32=scheme.profile.int32_token_ids,
        )
        if not isinstance(all_token_ids, PVector | list | tuple):
            all_token_ids = pvector(all_token_ids)  # any other sequence, read once
        start = len(block_hashes) * block_size
        pending = all_token_ids[start:]
        first: Sequence[int]  # a PVector as given, else a tuple (made a PVector when read)
        if isinstance(all_token_ids, PVector):
            first = all_token_ids[:start] if pending else all_token_ids
        else:
            first = tuple(all_token_ids[:start] if pending else all_token_ids)
        hashed: _Hashed = (context, block_size, block_hashes, first, (), len(first))
        object.__setattr__(self, "_state", _state_of(hashed, pending))

    @property
    def _hashed(self) -> _Hashed:
        return cast("_Hashed", self._state[0])

    @property
    def scheme(self) -> HashScheme:
        """The hashing scheme."""
        return self._hashed[0].scheme

    @property
    def request(self) -> HashRequest:
        """The request (its prompt and extra keys)."""
        return self._hashed[0].request

    @property
    def block_hashes(self) -> PVector[BlockHash]:
        """The hashes of the full blocks so far."""
        return self._hashed[2]

    @property
    def all_token_ids(self) -> PVector[int]:
        """Prompt (zeros for embeddings) plus output tokens so far (built when read)."""
        state = self._state
        hashed_tokens = _hashed_token_ids(self._hashed)
        if not state[1]:
            return hashed_tokens
        return hashed_tokens.extend(_pending_tokens(state))

    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens so far."""
        return self._hashed[5] + cast("int", self._state[1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestBlockHashes):
            return NotImplemented
        return self._public_fields() == other._public_fields()

    def __hash__(self) -> int:
        return hash(self._public_fields())

    def _public_fields(self) -> tuple[object, ...]:
        return (self.scheme, self.request, self.all_token_ids, self.block_hashes)

    @classmethod
    def start(
        cls,
        scheme: HashScheme,
        request: HashRequest,
        *,
        chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
    ) -> RequestBlockHashes:
        """The state right after vLLM builds the request (prompt blocks hashed)."""
        if type(scheme) is not HashScheme or type(request) is not HashRequest:
            check_scheme_and_request(scheme, request)
        tokens = request.prompt_token_ids_for_hashing  # a tuple: hashed and split as it is
        hashes = hash_prompt(scheme, request, chain_hasher=chain_hasher)
        return cls(scheme=scheme, request=request, all_token_ids=tokens, block_hashes=hashes)

    def append_output_token_ids(
        self,
        token_ids: int | Iterable[int],
        *,
        chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
    ) -> RequestBlockHashes:
        """The state after appending ``token_ids`` (one step) and hashing new full blocks."""
        node = self._state
        hashed: _Hashed = node[0]  # the chain's first item
        if type(token_ids) is int:
            if token_ids < 0 or (token_ids > INT32_MAX and hashed[0].int32):
                raise token_id_error("token_ids", token_ids, hashed[0].scheme.profile)
            count = node[1] + 1  # the chain's second item: the count
            if count < hashed[1]:  # no new full block: the common step
                new = _new_object(RequestBlockHashes)
                _set_field(new, "_state", (hashed, count, token_ids, node))
                return new
            pending = _pending_tokens(node)
            pending.append(token_ids)
            return _hash_pending(hashed, pending, chain_hasher)
        if isinstance(token_ids, int | float | str | bytes):  # a bool, an int subclass, ...
            token_ids = [token_ids]  # type: ignore[list-item]  # refused or read just below
        elif type(token_ids) is not list and type(token_ids) is not tuple:
            token_ids = _token_list(token_ids)
        context = hashed[0]
        check_token_ids(
            context.scheme.profile if context.int32 else None, token_ids, field="token_ids"
        )
        if not node[1]:
            return _hash_pending(hashed, token_ids, chain_hasher)  # read, never kept
        pending = _pending_tokens(node)
        pending.extend(token_ids)
        return _hash_pending(hashed, pending, chain_hasher)

    def __repr__(self) -> str:
        return (
            f"RequestBlockHashes(scheme={self.scheme!r}, request={self.request!r}, "
            f"all_token_ids={self.all_token_ids!r}, block_hashes={self.block_hashes!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled by its public fields; the decode plan (a closure) is rebuilt."""
        return (_rebuild, (self.scheme, self.request, self.all_token_ids, self.block_hashes))


def _hash_pending(
    hashed: _Hashed, pending: Sequence[int], chain_hasher: TokenBlockChainHasher
) -> RequestBlockHashes:
    """The state whose tokens after ``hashed`` are ``pending``, its full blocks hashed."""
    context, block_size, hashes, first, chunks, num_hashed = hashed
    num_full = max(len(pending) - context.lookahead, 0) // block_size * block_size
    if num_full:
        plan = context.plan
        if plan is not None and num_hashed >= plan.steady_start and (chain_hasher is _FAST):
            hash_block = plan.hash_block
            parent = hashes[-1]  # num_hashed >= steady_start >= block_size: a block before
            lookahead = plan.lookahead
            if num_full == block_size and not lookahead:  # the decoding step: one block
                block = tuple(pending) if len(pending) == block_size else tuple(pending[:num_full])
                hashes = hashes.append(hash_block(parent, block))
                chunks = (chunks, block)
            else:
                for block_start in range(0, num_full, block_size):
                    window = tuple(pending[block_start : block_start + block_size + lookahead])
                    parent = hash_block(parent, window)
                    hashes = hashes.append(parent)
                    chunks = (chunks, window[:block_size] if lookahead else window)
        else:
            hashes = extend_block_hashes(
                context.scheme,
                context.request,
                _Joined(hashed, pending),
                hashes,
                chain_hasher=chain_hasher,
            )  # the pending tokens were checked as they came
            chunks = (chunks, tuple(pending[:num_full]))
        hashed = (context, block_size, hashes, first, chunks, num_hashed + num_full)
    new = _new_object(RequestBlockHashes)
    _set_field(
        new, "_state", _state_of(hashed, pending[num_full:] if len(pending) > num_full else ())
    )
    return new


class _Joined(Sequence[int]):
    """The hashed tokens followed by the pending ones, without joining them: what
    :func:`extend_block_hashes` slices is past the hashed blocks; reading one of those
    (a type checker might) builds them."""

    __slots__ = ("_hashed", "_tail")

    def __init__(self, hashed: _Hashed, tail: Sequence[int]) -> None:
        self._hashed = hashed
        self._tail = tail

    def __len__(self) -> int:
        return self._hashed[5] + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        head = self._hashed[5]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if start >= head and step == 1:
                return self._tail[start - head : stop - head]
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if index < head:
            return _hashed_token_ids(self._hashed)[index]
        return self._tail[index - head]


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
_new_object = object.__new__
_set_field = object.__setattr__

# Where the C extension is built, append_output_token_ids becomes its C body, which does
# what the method above does for one int or a list/tuple of tokens whose new full blocks all
# have the steady extra keys, and calls the method above for everything else (and while the
# extension is switched off).
install_decode_append(
    RequestBlockHashes, RequestBlockHashes.__dict__["append_output_token_ids"], _FAST
)
