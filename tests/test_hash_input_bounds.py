"""Hashing inputs kvpure refuses with a typed error naming the field.

- Appended output token ids are vocabulary indices: vLLM's sampler only produces ids
  in ``[0, vocab_size)``; a negative or non-int id is refused naming ``token_ids``,
  and the state it was called on stays usable (states are values; the cache's
  request keeps its tokens as they were).
- A multimodal item ends inside the prompt: vLLM's input processor places each item's
  placeholder tokens in the prompt, so an item past its end is refused naming it.
- A ``prompt_embeds`` recipe builds at most ``MAX_RECIPE_ELEMENTS`` elements, checked
  before anything is allocated (a 10**10-element recipe used to exhaust memory).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from kvpure.cache.request import CacheRequest
from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.hashing import (
    VLLM_0_26,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
)
from kvpure.interop.hashing import MAX_RECIPE_ELEMENTS, hash_case_from_json

ROOT = Path(__file__).resolve().parents[1]
SCHEME = HashScheme.from_seed(algorithm="sha256_cbor", block_size=2, seed="0", profile=VLLM_0_26)


def _state() -> RequestBlockHashes:
    return RequestBlockHashes.start(SCHEME, HashRequest(prompt_token_ids=(1, 2, 3)))


@pytest.mark.parametrize(
    ("step", "field"),
    [
        (-1, "token_ids"),
        ([5, -1], "token_ids[1]"),
        ((-7,), "token_ids[0]"),
        (iter([4, -3]), "token_ids[1]"),
        ([4, 5, 6, -(2**40)], "token_ids[3]"),
    ],
    ids=["int", "list", "tuple", "iterator", "deep-in-a-list"],
)
def test_a_negative_appended_id_is_refused(step: int | Iterable[int], field: str) -> None:
    state = _state()
    with pytest.raises(InvalidFieldError) as caught:
        state.append_output_token_ids(step)
    assert caught.value.field == field
    assert "0 or more" in str(caught.value)
    assert state.append_output_token_ids([4, 5]).all_token_ids == [1, 2, 3, 4, 5]


def test_a_non_int_appended_id_is_refused() -> None:
    items: list[object] = [4, "x"]  # an iterator: not seen by the test-wide beartype hook
    with pytest.raises(InvalidFieldError) as caught:
        _state().append_output_token_ids(iter(items))  # type: ignore[arg-type]  # the misuse
    assert caught.value.field == "token_ids[1]"


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


def _embeds_case(recipe: str, shape: list[int]) -> dict[str, object]:
    return {
        "block_size": 16,
        "prompt_token_ids": None,
        "prompt_embeds": {"recipe": recipe, "shape": shape},
    }


@pytest.mark.parametrize(
    ("count", "rows", "cols"),
    [("100000*100000", 100000, 100000), ("33554433", 1, 2**25 + 1)],
)
def test_a_huge_embeddings_recipe_is_refused_before_it_is_built(
    count: str, rows: int, cols: int
) -> None:
    recipe = f"torch.arange({count}, dtype=float32).reshape({rows}, {cols}) / 7.0"
    with pytest.raises(InvalidFieldError) as caught:
        hash_case_from_json(_embeds_case(recipe, [rows, cols]))
    assert caught.value.field == "prompt_embeds.recipe"
    assert f"at most {MAX_RECIPE_ELEMENTS}" in str(caught.value)


def test_a_recipe_with_a_5000_digit_count_is_refused() -> None:
    recipe = "torch.arange(" + "9" * 5000 + ", dtype=float32).reshape(1, 1)"
    with pytest.raises(InvalidFieldError) as caught:
        hash_case_from_json(_embeds_case(recipe, [1, 1]))
    assert caught.value.field == "prompt_embeds.recipe"


def test_a_multimodal_item_past_the_prompt_is_refused() -> None:
    inside = MultiModalFeature(identifier="img_a", offset=0, length=2)
    assert HashRequest(prompt_token_ids=(1, 2, 3), mm_features=(inside,)).num_prompt_tokens == 3
    ends_at_the_end = MultiModalFeature(identifier="img_b", offset=1, length=2)
    HashRequest(prompt_token_ids=(1, 2, 3), mm_features=(ends_at_the_end,))  # accepted
    past = MultiModalFeature(identifier="img_b", offset=2, length=2)
    with pytest.raises(InvalidFieldError) as caught:
        HashRequest(prompt_token_ids=(1, 2, 3), mm_features=(inside, past))
    assert caught.value.field == "mm_features[1].length"
    assert "ends at token 4, past the prompt's 3 tokens" in str(caught.value)


def test_the_hash_cli_refuses_an_item_past_the_prompt_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = json.loads((ROOT / "examples" / "request.json").read_text())
    case["mm_features"][-1]["offset"] = len(case["prompt_token_ids"]) - 1
    path = tmp_path / "request.json"
    path.write_text(json.dumps(case))
    assert main(["hash", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "mm_features[1].length" in err


def test_a_one_byte_embedding_row_is_the_smallest_accepted() -> None:
    assert PromptEmbeds(data=b"ab", row_size_bytes=1).num_rows == 2
    with pytest.raises(InvalidFieldError) as caught:
        PromptEmbeds(data=b"", row_size_bytes=0)
    assert caught.value.field == "prompt_embeds.row_size_bytes"
