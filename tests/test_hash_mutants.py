"""Requests written to kill the extra-key mutants the goldens let live, against vLLM's hasher.

The expected hashes and extra keys are vLLM's own: ``tools/vllm_oracle/hash_cases_vllm.py``
ran the cases of ``tools/vllm_oracle/hash_mutant_cases.json`` through vLLM 0.26.0's and
0.33.0's ``Request`` and ``get_request_block_hasher`` (their sources' sha256 in each
file's ``meta``, equal to the goldens'). Each case targets one mutant of
``kvpure/hashing/extra_keys.py`` (docs/mutation.md):

- the cache salt of block 0 when no image is in block 0 (the uniform keys' start);
- an image ending one token into the block where 0.33 resumes (the ``bisect_left`` bound);
- prompt embeddings with two images, the first in block 0, on 0.26 (the scan starts at
  item 0 from token 0, not at the last item).

``hash_direct_calls.json`` holds vLLM's ``generate_block_hash_extra_keys`` itself,
called on every window ``[start, start + block_size)`` (every start token) with every
start index from -1 to the number of items, stale ones included
(``hash_cases_vllm.py --direct`` on ``tools/vllm_oracle/hash_direct_cases.json``), and
the extra keys vLLM's own request block hasher passes to its hash function when it
resumes at each block boundary (recorded by a recording hash function), which
``extra_keys_for_blocks`` must give for the same start and block count. For every
start token (aligned or not) and every block count, ``extra_keys_for_blocks`` must
also equal vLLM's calls chained from the index vLLM's hasher starts from there
(``resume_index``: -1 past token 0 on 0.26; ``get_mm_features_in_window`` on 0.33).
"""

from __future__ import annotations

import json
from array import array
from typing import Any

import pytest

from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
    VllmHashProfile,
    block_extra_keys,
    extra_keys_for_blocks,
    generate_block_hash_extra_keys,
    hash_prompt,
)
from kvpure.hashing.extra_keys import steady_extra_keys, steady_extra_keys_start
from tests.conftest import DATA_DIR

ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
ORACLE: dict[str, tuple[dict[str, Any], VllmHashProfile]] = {
    "0.26": (
        json.loads((DATA_DIR / "vllm-0.26.0-oracle" / "hash_mutant_cases.json").read_text()),
        VLLM_0_26,
    ),
    "0.33": (
        json.loads((DATA_DIR / "vllm-0.33.0-oracle" / "hash_mutant_cases.json").read_text()),
        VLLM_0_33,
    ),
}
SOURCE_SHA256 = {
    # kv_cache_utils.py of the vLLM wheels, as in the goldens' meta
    "0.26": "6add6f1d60634b0819833675d86be4adf00c13fe5d0a1605074353b55d3e2d39",
    "0.33": "de64494f8316d3e706802d1461cbf17ddbd421bb4c18946c085145aefd9846ea",
}
NAMES = [case["name"] for case in ORACLE["0.26"][0]["cases"]]
DIRECT: dict[str, dict[str, Any]] = {
    version: json.loads((DATA_DIR / folder / "hash_direct_calls.json").read_text())
    for version, folder in (("0.26", "vllm-0.26.0-oracle"), ("0.33", "vllm-0.33.0-oracle"))
}


def _case(version: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in ORACLE[version][0]["cases"] if c["name"] == name)
    return found


def _request(case: dict[str, Any]) -> HashRequest:
    embeds = None
    if case["prompt_embeds"] is not None:
        rows, cols = case["prompt_embeds"]["shape"]
        data = array("f", (i / 7.0 for i in range(rows * cols)))  # arange(...) / 7.0 in float32
        embeds = PromptEmbeds(data=data.tobytes(), row_size_bytes=cols * 4)
    return HashRequest(
        prompt_token_ids=tuple(case["prompt_token_ids"]),
        lora_name=case["lora_name"],
        lora_path=case["lora_path"] or "",
        cache_salt=case["cache_salt"],
        mm_features=tuple(
            MultiModalFeature(identifier=f["identifier"], offset=f["offset"], length=f["length"])
            for f in case["mm_features"]
        ),
        prompt_embeds=embeds,
    )


def _jsonable(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    return value


def test_the_oracle_ran_the_goldens_vllm_sources() -> None:
    for version, (data, _) in ORACLE.items():
        assert data["meta"]["kv_cache_utils_sha256"] == SOURCE_SHA256[version]
        assert data["pythonhashseed"] == "0"
        assert [c["name"] for c in data["cases"]] == NAMES


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("version", ORACLE)
def test_block_hashes_equal_vllms_through_every_step(version: str, name: str, algo: str) -> None:
    data, profile = ORACLE[version]
    case = _case(version, name)
    expected = case["hashes"][algo]
    scheme = HashScheme.from_seed(
        algorithm=algo, block_size=case["block_size"], seed=data["pythonhashseed"], profile=profile
    )
    request = _request(case)
    assert len(hash_prompt(scheme, request)) == expected["num_hashes_after_prompt"]
    state = RequestBlockHashes.start(scheme, request)
    for step in case["appended_output_tokens"]:
        state = state.append_output_token_ids(step)
    assert state.num_tokens == expected["num_tokens"]
    assert [h.hex() for h in state.block_hashes] == expected["block_hashes"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("version", ORACLE)
def test_extra_keys_from_token_0_equal_vllms(version: str, name: str) -> None:
    data, profile = ORACLE[version]
    case = _case(version, name)
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor",
        block_size=case["block_size"],
        seed=data["pythonhashseed"],
        profile=profile,
    )
    num_tokens = case["hashes"]["sha256_cbor"]["num_tokens"]
    keys = block_extra_keys(scheme, _request(case), num_tokens)
    assert _jsonable(keys) == case["extra_keys_per_block_from_token_0"]


def test_the_cases_hold_what_each_mutant_needs() -> None:
    """Guards the cases themselves: each keeps the shape that makes its mutant visible."""
    salt = _case("0.26", "salt_image_not_in_block_0_bs16")
    assert salt["cache_salt"]
    assert all(f["offset"] >= salt["block_size"] for f in salt["mm_features"])
    assert salt["extra_keys_per_block_from_token_0"][0] == [salt["cache_salt"]]
    resume = _case("0.33", "image_ends_one_token_into_resumed_block_bs16")
    bs = resume["block_size"]
    assert resume["hashes"]["sha256"]["num_hashes_after_prompt"] == 1
    assert any(f["offset"] + f["length"] == bs + 1 for f in resume["mm_features"])
    assert resume["extra_keys_per_block_from_token_0"][1] == [["mm", "img_b", -6]]
    embeds = _case("0.26", "embeds_two_images_first_in_block_0_bs16")
    assert embeds["prompt_embeds"] is not None
    assert len(embeds["mm_features"]) == 2
    assert embeds["extra_keys_per_block_from_token_0"][0][0] == ["img_a", 2]


@pytest.mark.parametrize("version", ORACLE)
def test_generate_block_hash_extra_keys_equals_vllms_for_every_window(version: str) -> None:
    _, profile = ORACLE[version]
    data = DIRECT[version]
    assert data["meta"]["kv_cache_utils_sha256"] == SOURCE_SHA256[version]
    assert len(data["cases"]) == 3
    for case in data["cases"]:
        request = _request(case)
        assert len(case["calls"]) >= 30
        for start, end, start_mm_idx, keys, next_idx in case["calls"]:
            got = generate_block_hash_extra_keys(profile, request, start, end, start_mm_idx)
            assert (_jsonable(got[0]), got[1]) == (keys, next_idx), (start, start_mm_idx)


@pytest.mark.parametrize("version", ORACLE)
def test_extra_keys_for_blocks_equals_vllms_hasher_on_every_resume(version: str) -> None:
    _, profile = ORACLE[version]
    for case in DIRECT[version]["cases"]:
        request = _request(case)
        size = case["block_size"]
        assert len(case["resumes"]) == len(case["prompt_token_ids"]) // size + 1
        for start, keys in case["resumes"]:
            got = extra_keys_for_blocks(profile, request, size, start, len(keys))
            assert _jsonable(got) == keys, start


@pytest.mark.parametrize("version", ORACLE)
def test_extra_keys_for_blocks_equals_vllms_chained_calls_from_every_token(version: str) -> None:
    _, profile = ORACLE[version]
    for case in DIRECT[version]["cases"]:
        request = _request(case)
        size = case["block_size"]
        table = {(start, index): (keys, after) for start, _, index, keys, after in case["calls"]}
        num_tokens = len(case["prompt_token_ids"])
        for start in range(num_tokens + 1):
            for count in range((num_tokens - start) // size + 1):
                expected: list[object] = []
                index = case["resume_index"][start]
                for block in range(count):
                    keys, index = table[(start + block * size, index)]
                    expected.append(keys)
                got = extra_keys_for_blocks(profile, request, size, start, count)
                assert _jsonable(got) == expected, (case["name"], start, count)


@pytest.mark.parametrize("version", ORACLE)
def test_steady_start_is_the_first_block_after_vllms_last_varying_keys(version: str) -> None:
    """From the steady start on every block has the LoRA key or nothing; not before it.

    Checked on vLLM's keys per block: the steady start is one block past the last
    block (block 0 included, for its salt) whose keys differ from the steady keys.
    """
    data, profile = ORACLE[version]
    checked = 0
    for case in data["cases"]:
        if case["prompt_embeds"] is not None:
            continue
        keys = case["extra_keys_per_block_from_token_0"]
        size = case["block_size"]
        if any(f["offset"] + f["length"] > len(keys) * size for f in case["mm_features"]):
            continue  # an item in the partial tail: vLLM hashed no block holding its end
        request = _request(case)
        steady = _jsonable(steady_extra_keys(profile, request))
        varying = [i for i, block in enumerate(keys) if i == 0 or block != steady]
        assert steady_extra_keys_start(request, size) == (max(varying) + 1) * size, case["name"]
        checked += 1
    assert checked >= 6
