"""A request as the KV cache manager sees it: tokens, block hashes, progress.

vLLM's manager reads a handful of ``Request`` fields; :class:`CacheRequest`
holds exactly those, mutable as the scheduler's request is. Its block hashes
come from kvpure's exact hasher (:class:`kvpure.hashing.RequestBlockHashes`),
extended token by token as vLLM's ``append_output_token_ids`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_bool, check_optional_int, check_str
from kvpure.hashing import BlockHash, HashRequest, HashScheme, RequestBlockHashes


def _check_request_arguments(
    request_id: object,
    hash_request: object,
    scheme: object,
    lora_int_id: object,
    kv_cache_report_mode: object,
    skip_reading_prefix_cache: object,
) -> None:
    """:class:`CacheRequest`'s arguments: typed errors naming the one at fault."""
    check_str("request_id", request_id)
    if not isinstance(hash_request, HashRequest):
        raise FieldTypeError(
            field="hash_request", value=hash_request, reason="must be a HashRequest"
        )
    if scheme is not None and not isinstance(scheme, HashScheme):
        raise FieldTypeError(field="scheme", value=scheme, reason="must be a HashScheme or None")
    check_optional_int("lora_int_id", lora_int_id, minimum=0, maximum=2**63 - 1)
    if kv_cache_report_mode not in ("incremental", "full"):
        raise InvalidFieldError(
            field="kv_cache_report_mode",
            value=kv_cache_report_mode,
            reason='must be "incremental" or "full"',
        )
    check_bool("skip_reading_prefix_cache", skip_reading_prefix_cache)


__all__ = ["CacheRequest", "RequestStatus"]


class RequestStatus(enum.Enum):
    """The two states the replay models (vLLM's WAITING and RUNNING)."""

    WAITING = "waiting"
    RUNNING = "running"


class CacheRequest:
    """One request: its prompt and output tokens, block hashes and computed tokens.

    ``scheme`` None means prefix caching is off: no hashes are computed, as
    vLLM builds no block hasher then.
    """

    __slots__ = (
        "_hashes",
        "all_token_ids",
        "hash_request",
        "kv_cache_report_mode",
        "lora_int_id",
        "num_computed_tokens",
        "num_preemptions",
        "num_prompt_tokens",
        "request_id",
        "shared_prefix_boundary",
        "skip_reading_prefix_cache",
        "status",
    )

    def __init__(
        self,
        *,
        request_id: str,
        hash_request: HashRequest,
        scheme: HashScheme | None,
        lora_int_id: int | None = None,
        kv_cache_report_mode: str = "incremental",
        skip_reading_prefix_cache: bool = False,
    ) -> None:
        _check_request_arguments(
            request_id,
            hash_request,
            scheme,
            lora_int_id,
            kv_cache_report_mode,
            skip_reading_prefix_cache,
        )
        self.request_id = request_id
        self.hash_request = hash_request
        self.lora_int_id = lora_int_id
        self.kv_cache_report_mode = kv_cache_report_mode
        self.skip_reading_prefix_cache = skip_reading_prefix_cache
        self.all_token_ids: list[int] = list(hash_request.prompt_token_ids_for_hashing)
        self.num_prompt_tokens = len(self.all_token_ids)
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.shared_prefix_boundary = 0
        self.status = RequestStatus.WAITING
        self._hashes: RequestBlockHashes | None = (
            None if scheme is None else RequestBlockHashes.start(scheme, hash_request)
        )

    @property
    def num_tokens(self) -> int:
        """Prompt plus output tokens so far."""
        return len(self.all_token_ids)

    @property
    def block_hashes(self) -> Sequence[BlockHash]:
        """The hashes of the full hash blocks so far (empty without prefix caching)."""
        hashes = self._hashes
        return () if hashes is None else hashes.block_hashes

    @property
    def lora_name(self) -> str | None:
        """The LoRA adapter's name, or None."""
        return self.hash_request.lora_name

    def append_output_token_ids(self, token_id: int) -> None:
        """Append one output token and hash any block it completes (a bad id changes nothing)."""
        if self._hashes is not None:
            self._hashes = self._hashes.append_output_token_ids(token_id)
        self.all_token_ids.append(token_id)
