"""The top shared prefixes of a workload run: which prompt prefixes the cache served most.

A request's *hit prefix* is the exact run of prompt tokens the prefix cache
served it at admission: its first ``hits`` tokens (a whole number of hash
blocks), in its LoRA adapter's and cache salt's namespace. Requests served
the same run are one shared prefix; it is told by the hash of its last block,
which chains every token before it and the namespace, as vLLM's block hashes
do. A request served 48 tokens of a prompt another request was served 32 of
counts under the 48-token prefix only. The top prefixes are those with the
most hit tokens (length times requests), ties broken by the earliest request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["PREVIEW_TOKENS", "TOP_PREFIXES", "PrefixTally", "PromptHead", "SharedPrefix"]

TOP_PREFIXES = 5
"""How many prefixes a report lists."""
PREVIEW_TOKENS = 16
"""How many of a prefix's first token ids a report shows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedPrefix:
    """One prompt prefix the cache served, and to how many requests."""

    length: int
    """Tokens in the prefix."""
    requests: int
    """Requests served exactly this prefix."""
    first_request: int
    """The workload index (admission order) of the first request served it."""
    first_source: str
    """Where that request was read (``FILE line N``), or ''."""
    preview_token_ids: tuple[int, ...]
    """The prefix's first :data:`PREVIEW_TOKENS` token ids."""

    @property
    def hit_tokens(self) -> int:
        """Tokens served from this prefix over the run: length times requests."""
        return self.length * self.requests


@runtime_checkable
class PromptHead(Protocol):
    """What a tally reads of a request: where it was read and its first tokens."""

    @property
    def source(self) -> str: ...

    def head_token_ids(self, count: int) -> tuple[int, ...]: ...


class PrefixTally:
    """Counts the requests served each hit prefix during one run (mutable, run-local).

    Only what a report shows is kept per prefix (its first request's place and
    first tokens), never a request, so a streamed workload is not held.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[object, list[Any]] = {}

    def add(self, index: int, hits: int, last_block_hash: object, request: PromptHead) -> None:
        """Request ``index`` was served ``hits`` tokens ending in the block ``last_block_hash``."""
        key = (hits, last_block_hash)
        entry = self._seen.get(key)
        if entry is None:
            preview = request.head_token_ids(min(hits, PREVIEW_TOKENS))
            self._seen[key] = [hits, 1, index, request.source, preview]
        else:
            entry[1] += 1

    def top(self, count: int = TOP_PREFIXES) -> tuple[SharedPrefix, ...]:
        """The ``count`` prefixes with the most hit tokens (ties: earliest first request)."""
        ranked = sorted(self._seen.values(), key=lambda e: (-e[0] * e[1], e[2]))[:count]
        return tuple(
            SharedPrefix(
                length=length,
                requests=served,
                first_request=first,
                first_source=source,
                preview_token_ids=preview,
            )
            for length, served, first, source, preview in ranked
        )
