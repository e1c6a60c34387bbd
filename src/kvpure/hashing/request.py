"""The inputs of a request that its block hashes depend on, as a frozen value.

The fields are the ones vLLM's hasher reads from ``vllm.v1.request.Request``:
the prompt token ids, the LoRA adapter's name (and path, hashed since 0.33),
the cache salt, the multimodal placeholders and the prompt embeddings. The
embeddings are raw bytes plus the size of one token row in bytes (what
``tensor.flatten().view(torch.uint8)`` gives): the core never sees a tensor.

The value keeps the very objects it is given (no copies of strings), because
pickle writes a repeated object differently from two equal ones and vLLM
hashes the request's own objects; see :mod:`kvpure.hashing.algorithms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.hashing.token_checks import check_token_ids
from kvpure.runtime_types import typed_init

MAX_TOKEN_INDEX = 2**63 - 1
"""The largest token position or count a request may name (vLLM's int64 positions)."""


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MultiModalFeature:
    """One multimodal item: its identifier (vLLM's ``mm_hash``) and placeholder range."""

    identifier: str
    offset: int
    """First token of the placeholder range."""
    length: int
    """Number of placeholder tokens."""

    def __post_init__(self) -> None:
        check_int("mm_features.offset", self.offset, minimum=0, maximum=MAX_TOKEN_INDEX)
        check_int("mm_features.length", self.length, minimum=0, maximum=MAX_TOKEN_INDEX)
        if self.offset < 0:
            raise InvalidFieldError(
                field="mm_features.offset", value=self.offset, reason="must not be negative"
            )
        if self.length < 1:
            raise InvalidFieldError(
                field="mm_features.length",
                value=self.length,
                reason="a placeholder range covers at least 1 token",
            )

    @property
    def end(self) -> int:
        """One past the last placeholder token."""
        return self.offset + self.length


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PromptEmbeds:
    """Prompt embeddings as raw little-endian bytes, one row of ``row_size_bytes`` per token."""

    data: bytes
    row_size_bytes: int

    def __post_init__(self) -> None:
        check_int("prompt_embeds.row_size_bytes", self.row_size_bytes, minimum=0)
        if self.row_size_bytes < 1:
            raise InvalidFieldError(
                field="prompt_embeds.row_size_bytes",
                value=self.row_size_bytes,
                reason="a token row has at least 1 byte",
            )
        if len(self.data) % self.row_size_bytes:
            raise InvalidFieldError(
                field="prompt_embeds.data",
                value=f"{len(self.data)} bytes",
                reason=(
                    f"the byte length must be num_rows * row_size_bytes "
                    f"({self.row_size_bytes} bytes per token row)"
                ),
            )

    @property
    def num_rows(self) -> int:
        """Number of token rows."""
        return len(self.data) // self.row_size_bytes

    def rows_bytes(self, start_row: int, end_row: int) -> bytes:
        """The bytes of rows ``[start_row, end_row)``, clamped like a tensor slice."""
        size = self.row_size_bytes
        return self.data[start_row * size : end_row * size]


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HashRequest:
    """What a request's block hashes depend on besides the hash scheme.

    ``prompt_token_ids`` is None for an embeddings-only prompt (its tokens then
    hash as zeros, as in vLLM). ``lora_name`` None means no LoRA adapter;
    ``lora_path`` is vLLM's ``LoRARequest.lora_path`` (default ``""``), hashed
    by the 0.33 profile only. ``mm_features`` must be sorted by offset and not
    overlap, as vLLM assumes.
    """

    prompt_token_ids: tuple[int, ...] | None
    lora_name: str | None = None
    lora_path: str = ""
    cache_salt: str | None = None
    mm_features: tuple[MultiModalFeature, ...] = ()
    prompt_embeds: PromptEmbeds | None = None
    prompt_fits_int32: bool = field(init=False, repr=False, compare=False, hash=False)
    """Whether every prompt token id is at most ``2**31 - 1`` (worked out by the same scan
    that checks the ids, so that hashing under ``VLLM_0_34`` need not scan the prompt again)."""
    plain_prompt: bool = field(init=False, repr=False, compare=False, hash=False)
    """Whether the prompt is token ids alone that fit int32, with no LoRA (name or path),
    cache salt, multimodal item or embeddings: every block's extra keys are None, so
    :func:`~kvpure.hashing.block_hasher.hash_prompt` hashes it without working them out."""

    def __post_init__(self) -> None:
        fits = True
        if self.prompt_token_ids is not None:
            fits = check_token_ids(None, self.prompt_token_ids, field="prompt_token_ids")
        object.__setattr__(self, "prompt_fits_int32", fits)
        plain = (
            fits
            and self.prompt_embeds is None  # then the prompt is token ids
            and self.lora_name is None
            and self.lora_path == ""
            and self.cache_salt is None
            and not self.mm_features
        )
        object.__setattr__(self, "plain_prompt", plain)
        if self.prompt_token_ids is None and self.prompt_embeds is None:
            raise InvalidFieldError(
                field="prompt_token_ids",
                value=None,
                reason="a request needs prompt_token_ids, prompt_embeds or both",
            )
        if (
            self.prompt_token_ids is not None
            and self.prompt_embeds is not None
            and len(self.prompt_token_ids) != self.prompt_embeds.num_rows
        ):
            raise InvalidFieldError(
                field="prompt_embeds",
                value=f"{self.prompt_embeds.num_rows} rows",
                reason=(
                    f"prompt_token_ids has {len(self.prompt_token_ids)} tokens; "
                    "prompt embeddings need one row per prompt token"
                ),
            )
        previous_end = 0
        num_prompt_tokens = self.num_prompt_tokens
        for index, feature in enumerate(self.mm_features):
            if feature.offset < previous_end:
                raise InvalidFieldError(
                    field=f"mm_features[{index}].offset",
                    value=feature.offset,
                    reason=(
                        "multimodal features must be sorted by offset and must not "
                        f"overlap; the previous one ends at token {previous_end}"
                    ),
                )
            previous_end = feature.end
            if previous_end > num_prompt_tokens:
                raise InvalidFieldError(
                    field=f"mm_features[{index}].length",
                    value=feature.length,
                    reason=(
                        f"the item ends at token {previous_end}, past the prompt's "
                        f"{num_prompt_tokens} tokens; vLLM places every item's "
                        "placeholder tokens inside the prompt"
                    ),
                )

    @property
    def num_prompt_tokens(self) -> int:
        """Number of prompt tokens (token ids, or embedding rows)."""
        if self.prompt_token_ids is not None:
            return len(self.prompt_token_ids)
        embeds = self.prompt_embeds
        return 0 if embeds is None else embeds.num_rows

    @property
    def prompt_token_ids_for_hashing(self) -> tuple[int, ...]:
        """The prompt's token ids as vLLM hashes them: zeros for embeddings-only prompts."""
        if self.prompt_token_ids is not None:
            return self.prompt_token_ids
        return (0,) * self.num_prompt_tokens
