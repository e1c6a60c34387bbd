"""The argument checks of the public chain hashers (``hash_token_blocks``,
``fast_hash_token_blocks``): typed errors naming the argument.

The reference hasher runs them on every call; the fast one only where its compiled chain
did not take the call or an argument's type is off, so the decoding path pays nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvpure.errors import FieldTypeError
from kvpure.field_checks import check_int
from kvpure.hashing.algorithms import HashAlgorithm

__all__ = ["MAX_CHAIN_BLOCK_SIZE", "check_chain_arguments", "plain_chain_arguments"]

MAX_CHAIN_BLOCK_SIZE = 2**32
"""Tokens per block, at most (vLLM's block sizes are small powers of two)."""


def plain_chain_arguments(
    parent: object, token_ids: object, block_size: object, extra_keys: object
) -> bool:
    """Whether the arguments have the plain types (bytes, list/tuple, int, list/tuple): the
    fast hasher's one test before its Python path; anything else goes to the full check."""
    kind = type(token_ids)
    keys = type(extra_keys)
    return (
        type(parent) is bytes
        and type(block_size) is int
        and (kind is list or kind is tuple)
        and (keys is list or keys is tuple)
    )


def check_chain_arguments(
    algo_name: object,
    parent: object,
    token_ids: object,
    block_size: object,
    extra_keys: object,
) -> None:
    """Refuse an unknown algorithm, a parent that is not bytes, token ids that are not a
    sequence of ints (any int: the chain hashers are vLLM's hash of what they are given;
    a request's ids are range-checked where it is built), a block size that is not a
    positive int, or extra keys that are not a sequence of tuples or None (one per block)."""
    HashAlgorithm.from_name(algo_name)
    if not isinstance(parent, bytes):
        raise FieldTypeError(
            field="parent", value=parent, reason="must be bytes (the parent's hash or NONE_HASH)"
        )
    check_int("block_size", block_size, minimum=1, maximum=MAX_CHAIN_BLOCK_SIZE)
    if not isinstance(token_ids, Sequence) or isinstance(token_ids, str | bytes | bytearray):
        raise FieldTypeError(
            field="token_ids", value=token_ids, reason="must be a list or tuple of token ids"
        )
    for index, token in enumerate(token_ids):  # any int: these hash what they are given
        if type(token) is not int:
            raise FieldTypeError(
                field=f"token_ids[{index}]",
                value=token,
                reason="a token id is an int (not a bool, float or str)",
            )
    if not isinstance(extra_keys, list | tuple):
        raise FieldTypeError(
            field="extra_keys",
            value=extra_keys,
            reason="must be a list of extra keys (a tuple or None) per block",
        )
    for index, keys in enumerate(extra_keys):
        if keys is not None and not isinstance(keys, tuple):
            raise FieldTypeError(
                field=f"extra_keys[{index}]", value=keys, reason="must be a tuple or None"
            )
