"""Appended output token ids are vocabulary indices: a negative or non-int id is refused.

vLLM's sampler only produces ids in ``[0, vocab_size)``; kvpure refuses the rest
with an InvalidFieldError naming ``token_ids``, and the state it was called on
stays usable (states are values; the cache's request keeps its tokens as they were).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from kvpure.cache.request import CacheRequest
from kvpure.errors import InvalidFieldError
from kvpure.hashing import VLLM_0_26, HashRequest, HashScheme, RequestBlockHashes

SCHEME = HashScheme.from_seed(algorithm="sha256_cbor", block_size=2, seed="0", profile=VLLM_0_26)


def _state() -> RequestBlockHashes:
    return RequestBlockHashes.start(SCHEME, HashRequest(prompt_token_ids=(1, 2, 3)))


@pytest.mark.parametrize(
    "step",
    [-1, [5, -1], (-7,), iter([4, -3]), [4, 5, 6, -(2**40)]],
    ids=["int", "list", "tuple", "iterator", "deep-in-a-list"],
)
def test_a_negative_appended_id_is_refused(step: int | Iterable[int]) -> None:
    state = _state()
    with pytest.raises(InvalidFieldError) as caught:
        state.append_output_token_ids(step)
    assert caught.value.field == "token_ids"
    assert "0 or more" in str(caught.value)
    assert state.append_output_token_ids([4, 5]).all_token_ids == [1, 2, 3, 4, 5]


def test_a_non_int_appended_id_is_refused() -> None:
    items: list[object] = [4, "x"]  # an iterator: not seen by the test-wide beartype hook
    with pytest.raises(InvalidFieldError) as caught:
        _state().append_output_token_ids(iter(items))  # type: ignore[arg-type]  # the misuse
    assert caught.value.field == "token_ids"


def test_zero_and_large_ids_are_appended() -> None:
    state = _state().append_output_token_ids(0).append_output_token_ids([2**31 - 1, 0])
    assert list(state.all_token_ids) == [1, 2, 3, 0, 2**31 - 1, 0]
    assert len(state.block_hashes) == 3


def test_the_cache_request_keeps_its_tokens_when_an_id_is_refused() -> None:
    request = CacheRequest(
        request_id="r", hash_request=HashRequest(prompt_token_ids=(1, 2, 3)), scheme=SCHEME
    )
    with pytest.raises(InvalidFieldError):
        request.append_output_token_ids(-1)
    assert request.all_token_ids == [1, 2, 3]
    request.append_output_token_ids(4)
    assert request.all_token_ids == [1, 2, 3, 4]
    assert len(request.block_hashes) == 2
