"""Hash-id traces (Mooncake, NVIDIA aiperf, InferenceX): requests as chained block ids.

A line is ``{"timestamp": T, "input_length": N, "output_length": M, "hash_ids": [...]}``:
``hash_ids`` holds one id per trace block of ``block_size`` tokens (512 in
Mooncake's traces, 64 in InferenceX's), the last one covering the partial
block when ``N`` is not a multiple; ids are chained, as block hashes are: two
requests with the same id at the same place share everything before it.

The trace gives no tokens, so kvpure gives each id tokens of its own
(:func:`block_token_ids`), deterministic, so equal ids are equal tokens:

- full block ``i`` of a request is the block of ``hash_ids[i]``;
- the last, partial block (``N % block_size`` tokens) is unique to the request
  (made from its place in the file), as its id stands for a block that was
  never full: a later request cannot hit it;
- a block of id ``h`` starts with token ``2h`` and a request's own tail with
  an odd token, so blocks of different ids differ from their first token on.

vLLM's hash block size must divide the trace's block size (16 and 32 divide
512 and 64): a trace block is then a whole number of vLLM blocks. What the
trace cannot show: sharing inside a trace block. Two prompts that share 700
tokens share one 512-token block in the trace, so their hits count 512 (or
the vLLM blocks of one trace block), never the 688 vLLM would hit.

Because blocks of different ids differ at their first token, a vLLM block's
hash depends only on the ids up to its trace block and its place in it. The
analyzer therefore keys blocks by :func:`derived_block_hashes` (a digest of the
id chain and the place) instead of hashing synthesized tokens: equal keys for
exactly the blocks whose token hashes are equal, so every count is the token
path's (``tests/test_cache_hash_trace.py`` checks it against the token path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, cast

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_optional_seconds
from kvpure.hashing import BlockHash

__all__ = [
    "DEFAULT_TRACE_BLOCK_SIZE",
    "MAX_HASH_ID",
    "TRACE_KEYS",
    "TraceRequest",
    "block_token_ids",
    "derived_block_hashes",
    "is_trace_line",
    "parse_trace_line",
]

DEFAULT_TRACE_BLOCK_SIZE: Final = 512
"""Tokens per hash id in Mooncake's traces (``--trace-block-size``)."""
MAX_HASH_ID: Final = 2**62 - 1
"""Largest id read (its tokens stay below 2**63)."""
TRACE_KEYS: Final = frozenset({"timestamp", "input_length", "output_length", "hash_ids"})
"""The keys of a hash-id trace line (``hash_ids`` and ``input_length`` required)."""

_CHAIN_BYTES = 28
_BLOCK_PERSON = b"kvpure-trace-blk"
_TAIL_PERSON = b"kvpure-trace-own"


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceRequest:
    """One line of a hash-id trace."""

    hash_ids: tuple[int, ...]
    input_length: int
    output_len: int
    block_size: int
    """Tokens per id (``--trace-block-size``)."""
    unique: int
    """The line's place among the requests (0 first): what makes its tail its own."""
    arrival_time: float | None = None
    """The ``timestamp`` (the trace's unit, milliseconds in Mooncake's); orders admission."""
    source: str = ""

    lora_name: None = None
    cache_salt: None = None

    @property
    def num_prompt_tokens(self) -> int:
        """``input_length``."""
        return self.input_length

    @property
    def full_blocks(self) -> int:
        """Trace blocks the prompt fills (each one id's block)."""
        return self.input_length // self.block_size

    def head_token_ids(self, count: int) -> tuple[int, ...]:
        """The first ``count`` tokens of the synthesized prompt (at most the prompt)."""
        count = min(count, self.input_length)
        out: list[int] = []
        index = 0
        while len(out) < count:
            take = min(count - len(out), self.block_size)
            if index < self.full_blocks:
                out.extend(block_token_ids(2 * self.hash_ids[index], take))
            else:
                out.extend(block_token_ids(2 * self.unique + 1, take))
            index += 1
        return tuple(out)

    @property
    def prompt_token_ids(self) -> tuple[int, ...]:
        """Every synthesized prompt token (the token path; the analyzer avoids it)."""
        return self.head_token_ids(self.input_length)


def block_token_ids(first: int, count: int) -> list[int]:
    """The tokens of a block starting with token ``first``: ``first, 1, 2, ..., count-1``."""
    out = list(range(count))
    if out:
        out[0] = first
    return out


def _chain(parent: bytes, hash_id: int, person: bytes) -> bytes:
    return hashlib.blake2b(
        parent + hash_id.to_bytes(8, "little"), digest_size=_CHAIN_BYTES, person=person
    ).digest()


def derived_block_hashes(request: TraceRequest, hash_block_size: int) -> list[BlockHash]:
    """A key per full hash block of the prompt, equal between two blocks exactly when
    their token-path block hashes are (``hash_block_size`` divides the trace's)."""
    per_block = request.block_size // hash_block_size
    places = [j.to_bytes(4, "big") for j in range(per_block)]
    keys: list[bytes] = []  # each a BlockHash: chain + place, joined in C by map
    chain = b""
    for hash_id in request.hash_ids[: request.full_blocks]:
        chain = _chain(chain, hash_id, _BLOCK_PERSON)
        keys.extend(map(chain.__add__, places))
    tail = (request.input_length % request.block_size) // hash_block_size
    if tail:
        own = _chain(chain, request.unique, _TAIL_PERSON)
        keys.extend(map(own.__add__, places[:tail]))
    return cast("list[BlockHash]", keys)


def trace_block_chains(request: TraceRequest) -> list[bytes]:
    """The chain digest of each full trace block (what the unbounded count keys on)."""
    chains: list[bytes] = []
    chain = b""
    for hash_id in request.hash_ids[: request.full_blocks]:
        chain = _chain(chain, hash_id, _BLOCK_PERSON)
        chains.append(chain)
    return chains


def is_trace_line(data: object) -> bool:
    """Whether ``data`` is an object carrying ``hash_ids`` (a hash-id trace line)."""
    return isinstance(data, dict) and "hash_ids" in data


def _field(where: str, value: object, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=where, value=value, reason=reason)


def _count(data: dict[str, object], key: str, where: str, least: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _field(f"{where}.{key}", value, f"must be an int >= {least}")
    return value


def parse_trace_line(data: object, where: str, block_size: int, unique: int) -> TraceRequest:
    """One trace line's parsed JSON as a request; ``where`` names the line in errors."""
    if not isinstance(data, dict):
        raise _field(where, type(data).__name__, "must be a JSON object")
    unknown = sorted(set(data) - TRACE_KEYS)
    if unknown:
        raise _field(
            f"{where}.{unknown[0]}",
            data[unknown[0]],
            "unknown key in a hash-id trace (known: timestamp, input_length, "
            "output_length, hash_ids)",
        )
    length = _count(data, "input_length", where, 1)
    output = _count(data, "output_length", where, 0) if "output_length" in data else 0
    ids = data.get("hash_ids")
    if not isinstance(ids, list):
        raise _field(f"{where}.hash_ids", ids, "must be a list of block ids")
    for i, item in enumerate(ids):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= MAX_HASH_ID:
            raise _field(f"{where}.hash_ids[{i}]", item, f"must be an int in [0, {MAX_HASH_ID}]")
    expected = -(-length // block_size)
    if len(ids) != expected:
        raise _field(
            f"{where}.hash_ids",
            f"{len(ids)} ids for {length} tokens",
            f"must hold one id per {block_size}-token block ({expected}); give the trace's "
            "block size with --trace-block-size (512 for Mooncake, 64 for InferenceX)",
        )
    stamp = data.get("timestamp")
    check_optional_seconds(f"{where}.timestamp", stamp, reason="must be a number >= 0")
    return TraceRequest(
        hash_ids=tuple(ids),
        input_length=length,
        output_len=output,
        block_size=block_size,
        unique=unique,
        arrival_time=None if stamp is None else float(stamp),
        source=where,
    )
