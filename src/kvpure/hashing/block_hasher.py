"""Chained block hashes of a request, and their extension as tokens are appended.

Block ``i`` covers tokens ``[i*B, (i+1)*B)`` of the request (``B`` the scheme's
block size) and its hash is ``hash_fn((parent, tuple(tokens), extra_keys))``
where ``parent`` is the previous block's hash, or NONE_HASH for block 0. Only
full blocks are hashed. Hashing a prompt and extending step by step share one
path: work out the extra keys of every new full block
(:func:`~kvpure.hashing.extra_keys.extra_keys_for_blocks`), then chain-hash
the token blocks with a :data:`TokenBlockChainHasher`. :func:`hash_token_blocks`
is the reference chain hasher; the public paths default to
:func:`kvpure.hashing.fast_prompt.fast_hash_token_blocks`,
which returns the same bytes for every input, much faster on long prompts. Pass
``chain_hasher=hash_token_blocks`` to use the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

from pyrsistent import PVector, pvector

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.hashing.algorithms import HashAlgorithm, HashFunction, get_hash_fn_by_name
from kvpure.hashing.cbor_text import check_cbor_text
from kvpure.hashing.chain_checks import check_chain_arguments
from kvpure.hashing.extra_keys import (
    ExtraKeys,
    extra_keys_for_blocks,
    lookahead_base_keys,
    steady_extra_keys,
    steady_extra_keys_start,
    uniform_prompt_extra_keys,
    with_lookahead_tokens,
)
from kvpure.hashing.fast_prompt import (
    fast_hash_lookahead_blocks,
    fast_hash_token_blocks,
    fast_hash_uniform_blocks,
)
from kvpure.hashing.request import HashRequest
from kvpure.hashing.scheme import HashScheme, VllmHashProfile
from kvpure.hashing.token_checks import check_token_ids
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
    check_chain_arguments(algo_name, parent, token_ids, block_size, extra_keys)
    hash_fn = get_hash_fn_by_name(algo_name)
    digests: list[bytes] = []
    for index, keys in enumerate(extra_keys):
        start = index * block_size
        parent = hash_fn((parent, tuple(token_ids[start : start + block_size]), keys))
        digests.append(parent)
    return digests


def _check_block_arguments(
    profile: VllmHashProfile | None,
    parent_block_hash: object,
    token_ids: object,
    extra_keys: object,
    none_hash: object,
) -> None:
    """The argument checks of :func:`hash_block_tokens` (one block: cheap next to the hash)."""
    for field, value in (("parent_block_hash", parent_block_hash), ("none_hash", none_hash)):
        if value is not None and not isinstance(value, bytes):
            raise FieldTypeError(field=field, value=value, reason="must be bytes or None")
    if type(token_ids) is not list and type(token_ids) is not tuple:
        if not isinstance(token_ids, Sequence) or isinstance(token_ids, str | bytes | bytearray):
            raise FieldTypeError(
                field="curr_block_token_ids",
                value=token_ids,
                reason="must be a list or tuple of token ids (ints)",
            )
        token_ids = list(token_ids)
    check_token_ids(profile, token_ids, field="curr_block_token_ids")
    if extra_keys is not None and type(extra_keys) is not tuple and type(extra_keys) is not list:
        raise FieldTypeError(
            field="extra_keys", value=extra_keys, reason="must be a tuple of extra keys or None"
        )


def _is_token_sequence(value: object) -> bool:
    """A list, tuple or PVector in one test each; else any sequence but a str or bytes."""
    kind = type(value)
    if kind is tuple or kind is list or kind is _PVECTOR:
        return True
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def check_scheme_and_request(scheme: object, request: object) -> None:
    """Refuse a ``scheme`` that is no HashScheme or a ``request`` that is no HashRequest."""
    if not isinstance(scheme, HashScheme):
        raise FieldTypeError(
            field="scheme", value=scheme, reason="must be a HashScheme (HashScheme.from_seed)"
        )
    if not isinstance(request, HashRequest):
        raise FieldTypeError(field="request", value=request, reason="must be a HashRequest")


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
    profile = None
    if isinstance(hash_fn_or_scheme, HashScheme):
        hash_fn = get_hash_fn_by_name(hash_fn_or_scheme.algorithm)
        default_parent: bytes | None = hash_fn_or_scheme.none_hash
        profile = hash_fn_or_scheme.profile
    elif callable(hash_fn_or_scheme):
        hash_fn = hash_fn_or_scheme
        default_parent = none_hash
    else:
        raise FieldTypeError(
            field="hash_fn_or_scheme",
            value=hash_fn_or_scheme,
            reason="must be a HashScheme or a hash function (get_hash_fn_by_name)",
        )
    _check_block_arguments(profile, parent_block_hash, curr_block_token_ids, extra_keys, none_hash)
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
    token_field: str = "all_token_ids",
) -> PVector[BlockHash]:
    """``block_hashes`` extended by the hashes of the new full blocks of ``all_token_ids``.

    ``all_token_ids`` is the request's prompt (zeros for embeddings) followed by
    its output tokens so far; ``block_hashes`` the hashes it already has. The
    result is a new PVector sharing ``block_hashes``; it is ``block_hashes``
    itself when no new block is full. This is one run of vLLM's request block
    hasher, including where it resumes its multimodal scan. With the scheme's
    ``num_hash_lookahead_tokens`` L > 0 a block ``[s, e)`` is hashed once tokens up to
    ``e + L`` exist, with the extra keys of
    :func:`~kvpure.hashing.extra_keys.lookahead_extra_keys_for_blocks`.

    Under a profile with int32 token ids, every token not yet hashed is checked first
    (``token_field[i]`` names one out of range).
    """
    if type(scheme) is not HashScheme or type(request) is not HashRequest:  # one test when right
        check_scheme_and_request(scheme, request)
    if type(block_hashes) is not _PVECTOR:
        raise FieldTypeError(
            field="block_hashes", value=block_hashes, reason="must be a PVector of block hashes"
        )
    if not _is_token_sequence(all_token_ids):
        raise FieldTypeError(
            field=token_field, value=all_token_ids, reason="must be a sequence of token ids"
        )
    block_size = scheme.block_size
    lookahead = scheme.num_hash_lookahead_tokens
    start = len(block_hashes) * block_size
    if (
        scheme.profile.int32_token_ids
        and len(all_token_ids) > start
        # a request's own prompt was scanned when the request was built
        and not (all_token_ids is request.prompt_token_ids and request.prompt_fits_int32)
    ):
        unhashed = all_token_ids[start:]
        if type(unhashed) is not tuple and type(unhashed) is not list:
            unhashed = list(unhashed)
        check_token_ids(scheme.profile, unhashed, field=token_field, offset=start)
    num_new_blocks = (len(all_token_ids) - lookahead - start) // block_size
    if num_new_blocks <= 0:
        return block_hashes
    if _USES_CBOR[scheme.algorithm]:
        check_cbor_text(request)
    end = start + num_new_blocks * block_size
    parent: bytes = block_hashes[-1] if block_hashes else scheme.none_hash
    extra_keys: Sequence[ExtraKeys]
    if lookahead:
        window = all_token_ids[start : end + lookahead]
        if type(window) is not tuple and type(window) is not list:
            window = tuple(window)  # a PVector's slice: the hashers index it
        bases = lookahead_base_keys(
            scheme.profile, request, block_size, start, num_new_blocks, lookahead
        )
        if chain_hasher is fast_hash_token_blocks:  # the keys' tuples built only if needed
            digests = fast_hash_lookahead_blocks(
                scheme.algorithm, parent, window, block_size, bases, lookahead
            )
        else:
            extra_keys = with_lookahead_tokens(bases, window, block_size, lookahead)
            digests = chain_hasher(
                scheme.algorithm, parent, window[: end - start], block_size, extra_keys
            )
    elif (
        start == 0
        and chain_hasher is fast_hash_token_blocks
        and (uniform := uniform_prompt_extra_keys(scheme.profile, request)) is not None
        and (type(all_token_ids) is tuple or type(all_token_ids) is list)
    ):  # a prompt without multimodal items: no list of extra keys, no slice of the tokens
        digests = fast_hash_uniform_blocks(
            scheme.algorithm, parent, all_token_ids, block_size, num_new_blocks, *uniform
        )
    else:
        steady_start = steady_extra_keys_start(request, block_size)
        if steady_start is not None and start >= steady_start:  # decoding: no scan needed
            extra_keys = [steady_extra_keys(scheme.profile, request)] * num_new_blocks
        else:
            extra_keys = extra_keys_for_blocks(
                scheme.profile, request, block_size, start, num_new_blocks
            )
        new_token_ids = all_token_ids[start:end]
        if type(new_token_ids) is not tuple and type(new_token_ids) is not list:
            new_token_ids = tuple(new_token_ids)  # a PVector's slice: the hashers index it
        digests = chain_hasher(scheme.algorithm, parent, new_token_ids, block_size, extra_keys)
    # BlockHash is a NewType of bytes: the digests are BlockHashes as they are
    if len(digests) == 1:  # decoding: appending is cheaper than extending
        return block_hashes.append(cast("BlockHash", digests[0]))
    return block_hashes.extend(cast("list[BlockHash]", digests))


_USES_CBOR = {algorithm: algorithm.uses_cbor for algorithm in HashAlgorithm}

_MAX_NUM_TOKENS = 2**63 - 1
_PVECTOR: type[object] = type(pvector())  # the concrete class (pvectorc.PVector)

NO_BLOCK_HASHES: PVector[BlockHash] = pvector()
"""The block hashes of a request before any block is full."""


def hash_prompt(
    scheme: HashScheme,
    request: HashRequest,
    *,
    chain_hasher: TokenBlockChainHasher = fast_hash_token_blocks,
) -> PVector[BlockHash]:
    """The block hashes vLLM computes for ``request`` when it arrives (full blocks only;
    with lookahead L, ``max(n - L, 0) // block_size`` of them for n prompt tokens)."""
    if type(scheme) is not HashScheme or type(request) is not HashRequest:  # one test when right
        check_scheme_and_request(scheme, request)
    elif (
        request.plain_prompt
        and not scheme.num_hash_lookahead_tokens
        and chain_hasher is fast_hash_token_blocks
    ):  # token ids alone (no extra keys, ids checked): straight to the chain
        prompt = cast("tuple[int, ...]", request.prompt_token_ids)
        block_size = scheme.block_size
        num_blocks = len(prompt) // block_size
        if not num_blocks:
            return NO_BLOCK_HASHES
        digests = fast_hash_uniform_blocks(
            scheme.algorithm, scheme.none_hash, prompt, block_size, num_blocks, None, None
        )
        if num_blocks == 1:
            return NO_BLOCK_HASHES.append(cast("BlockHash", digests[0]))
        return NO_BLOCK_HASHES.extend(cast("list[BlockHash]", digests))
    return extend_block_hashes(
        scheme,
        request,
        request.prompt_token_ids_for_hashing,
        NO_BLOCK_HASHES,
        chain_hasher=chain_hasher,
        token_field="prompt_token_ids",
    )


def block_extra_keys(scheme: HashScheme, request: HashRequest, num_tokens: int) -> list[ExtraKeys]:
    """The extra keys of every full block of the first ``num_tokens`` tokens, in one scan."""
    check_scheme_and_request(scheme, request)
    check_int("num_tokens", num_tokens, minimum=0, maximum=_MAX_NUM_TOKENS)
    return extra_keys_for_blocks(
        scheme.profile, request, scheme.block_size, 0, num_tokens // scheme.block_size
    )


__all__ = [
    "NO_BLOCK_HASHES",
    "TokenBlockChainHasher",
    "block_extra_keys",
    "check_scheme_and_request",
    "extend_block_hashes",
    "hash_block_tokens",
    "hash_prompt",
    "hash_token_blocks",
]
