"""ShareGPT conversations as a workload, sampled the way vLLM 0.26's benchmark samples them.

The ShareGPT format (``ShareGPT_V3_unfiltered_cleaned_split.json``) is a JSON
array of ``{"id": ..., "conversations": [{"from": "human", "value": ...},
{"from": "gpt", "value": ...}, ...]}``. kvpure also reads the same objects one
per line (JSON lines), which vLLM's benchmark does not.

The sampling follows ``ShareGPTDataset.load_data`` and ``ShareGPTDataset.sample``
with ``is_valid_sequence`` in vLLM 0.26's ``vllm/benchmarks/datasets/datasets.py``:

- an entry without ``conversations`` or with fewer than two turns is skipped;
- the request's prompt is the first turn's ``value`` (whoever wrote it) and its
  output length is the token count of the second turn's ``value``, both
  encoded with special tokens added (the tokenizer called on the text); the
  prompt reaches the server as a completions-API text, so its ids are the
  ones the server hashes;
- a request is dropped when its prompt has fewer than 4 tokens, its output
  fewer than 4, its prompt more than 1024, or prompt plus output more than
  2048 (the benchmark's defaults);
- entries keep their file order, as ``vllm bench serve --disable-shuffle``
  keeps them (by default the benchmark shuffles them with seed 0).

Later turns are not modelled: the benchmark sends only the first.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.cache.workload_input import PromptEncoder, WorkloadRequest
from kvpure.errors import InvalidFieldError

__all__ = [
    "MAX_TOTAL_LEN",
    "MIN_LEN",
    "MAX_PROMPT_LEN",
    "ShareGPTSampler",
    "ShareGPTWorkload",
    "is_sharegpt_entry",
]

MIN_LEN = 4
"""Fewest prompt (and output) tokens a sampled request has (``is_valid_sequence``'s ``min_len``)."""
MAX_PROMPT_LEN = 1024
"""Most prompt tokens (``max_prompt_len``)."""
MAX_TOTAL_LEN = 2048
"""Most prompt plus output tokens (``max_total_len``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGPTWorkload:
    """How many ShareGPT entries were read, sampled and skipped."""

    requests: int
    """Requests sampled."""
    entries: int
    """Entries read (skipped ones included)."""
    skipped_short_conversations: int
    """Entries without ``conversations`` or with fewer than two turns."""
    skipped_by_length: int
    """Entries dropped by the benchmark's length filter."""


def is_sharegpt_entry(data: object) -> bool:
    """Whether ``data`` is an object carrying ``conversations``."""
    return isinstance(data, dict) and "conversations" in data


def _field(where: str, value: object, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=where, value=value, reason=reason)


def _turn_text(turn: object, where: str) -> str:
    if not isinstance(turn, dict):
        raise _field(where, type(turn).__name__, 'must be an object {"from": ..., "value": ...}')
    value = turn.get("value")
    if not isinstance(value, str):
        raise _field(f"{where}.value", value, "must be a string")
    return value


class ShareGPTSampler:
    """Samples entries one at a time, as they are read (mutable; counts as it goes)."""

    __slots__ = ("by_length", "encoder", "entries", "requests", "short")

    def __init__(self, encoder: PromptEncoder | None) -> None:
        self.encoder = encoder
        self.entries = self.requests = self.short = self.by_length = 0

    def take(self, where: str, entry: object) -> WorkloadRequest | None:
        """The request of ``entry`` (named ``where`` in errors), or None when it is skipped."""
        self.entries += 1
        if not isinstance(entry, dict):
            raise _field(where, type(entry).__name__, 'must be an object with "conversations"')
        turns = entry.get("conversations", [])
        if not isinstance(turns, list):
            raise _field(f"{where}.conversations", type(turns).__name__, "must be a list of turns")
        if len(turns) < 2:
            self.short += 1
            return None
        prompt = _turn_text(turns[0], f"{where}.conversations[0]")
        completion = _turn_text(turns[1], f"{where}.conversations[1]")
        if self.encoder is None:
            raise _field(
                f"{where}.conversations",
                "text",
                "needs a tokenizer: give --tokenizer PATH (a tokenizer.json or its model folder)",
            )
        prompt_ids = self.encoder.encode_prompt(prompt)
        output_len = len(self.encoder.encode_prompt(completion))
        prompt_len = len(prompt_ids)
        if (
            prompt_len < MIN_LEN
            or output_len < MIN_LEN
            or prompt_len > MAX_PROMPT_LEN
            or prompt_len + output_len > MAX_TOTAL_LEN
        ):
            self.by_length += 1
            return None
        self.requests += 1
        return WorkloadRequest(prompt_token_ids=prompt_ids, output_len=output_len, source=where)

    def counts(self) -> ShareGPTWorkload:
        """The counts so far."""
        return ShareGPTWorkload(
            requests=self.requests,
            entries=self.entries,
            skipped_short_conversations=self.short,
            skipped_by_length=self.by_length,
        )
