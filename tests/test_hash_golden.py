"""Every case of vLLM 0.26.0's and 0.33.0's hash goldens, for every algorithm and seed."""

from __future__ import annotations

import json
from array import array
from typing import Any

import pytest
from pyrsistent import pvector

from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    BlockHash,
    BlockHashListWithBlockSize,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
    VllmHashProfile,
    block_extra_keys,
    cbor_payload,
    get_block_hash,
    get_group_id,
    get_hash_fn_by_name,
    hash_block_tokens,
    hash_prompt,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    none_hash_from_seed,
    resolve_block_hashes,
)
from kvpure.interop.hashing import hash_case_from_json
from tests.conftest import GOLDEN_026, GOLDEN_033

ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
GOLDENS: dict[str, tuple[dict[str, Any], VllmHashProfile]] = {
    "0.26": (json.loads((GOLDEN_026 / "hashes.json").read_text()), VLLM_0_26),
    "0.33": (json.loads((GOLDEN_033 / "hashes.json").read_text()), VLLM_0_33),
}
CASES = [
    (version, case["name"], algo)
    for version, (golden, _) in GOLDENS.items()
    for case in golden["cases"]
    for algo in ALGORITHMS
]


def _case(version: str, name: str) -> dict[str, Any]:
    golden, _ = GOLDENS[version]
    matches = [case for case in golden["cases"] if case["name"] == name]
    assert len(matches) == 1
    found: dict[str, Any] = matches[0]
    return found


def _embeds_from_recipe(spec: dict[str, Any]) -> PromptEmbeds:
    # Rebuilt without torch: float32(i) / 7 rounded once (see the brief's note).
    assert spec["recipe"] == "torch.arange(40*8, dtype=float32).reshape(40, 8) / 7.0"
    rows, cols = spec["shape"]
    data = array("f", (i / 7.0 for i in range(rows * cols)))
    assert data.itemsize == 4
    return PromptEmbeds(data=data.tobytes(), row_size_bytes=cols * 4)


def _request(case: dict[str, Any], profile: VllmHashProfile) -> HashRequest:
    tokens = case["prompt_token_ids"]
    embeds = case["prompt_embeds"]
    return HashRequest(
        prompt_token_ids=None if tokens is None else tuple(tokens),
        lora_name=case["lora_name"],
        lora_path=case["lora_path"] or "",
        cache_salt=case["cache_salt"],
        mm_features=tuple(
            MultiModalFeature(identifier=f["identifier"], offset=f["offset"], length=f["length"])
            for f in case["mm_features"]
        ),
        prompt_embeds=None if embeds is None else _embeds_from_recipe(embeds),
    )


def _scheme(version: str, algo: str, block_size: int) -> HashScheme:
    golden, profile = GOLDENS[version]
    return HashScheme.from_seed(
        algorithm=algo, block_size=block_size, seed=golden["pythonhashseed"], profile=profile
    )


def _run(scheme: HashScheme, request: HashRequest, steps: list[list[int]]) -> RequestBlockHashes:
    state = RequestBlockHashes.start(scheme, request)
    for step in steps:
        state = state.append_output_token_ids(step)
    return state


def _jsonable(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    return value


@pytest.mark.parametrize(("version", "name", "algo"), CASES)
def test_case_block_hashes(version: str, name: str, algo: str) -> None:
    case = _case(version, name)
    _, profile = GOLDENS[version]
    expected = case["hashes"][algo]
    scheme = _scheme(version, algo, case["block_size"])
    request = _request(case, profile)
    prompt_hashes = hash_prompt(scheme, request)
    assert len(prompt_hashes) == expected["num_hashes_after_prompt"]
    state = _run(scheme, request, case["appended_output_tokens"])
    assert state.num_tokens == expected["num_tokens"]
    assert [h.hex() for h in state.block_hashes] == expected["block_hashes"]
    assert list(state.block_hashes[: len(prompt_hashes)]) == list(prompt_hashes)


@pytest.mark.parametrize(("version", "name", "algo"), CASES)
def test_case_through_the_json_reader(version: str, name: str, algo: str) -> None:
    case = _case(version, name)
    read = hash_case_from_json(case, ignore_unknown_keys=True)
    scheme = _scheme(version, algo, read.block_size)
    state = RequestBlockHashes.start(scheme, read.request)
    for step in read.appended_output_tokens:
        state = state.append_output_token_ids(step)
    assert [h.hex() for h in state.block_hashes] == case["hashes"][algo]["block_hashes"]


@pytest.mark.parametrize(
    ("version", "name"), [(v, c["name"]) for v, (g, _) in GOLDENS.items() for c in g["cases"]]
)
def test_case_extra_keys_cbor_payload_and_int_hash(version: str, name: str) -> None:
    case = _case(version, name)
    _, profile = GOLDENS[version]
    scheme = _scheme(version, "sha256_cbor", case["block_size"])
    request = _request(case, profile)
    state = _run(scheme, request, case["appended_output_tokens"])
    keys = block_extra_keys(scheme, request, state.num_tokens)
    assert _jsonable(keys) == case["extra_keys_per_block"]
    first_tokens = tuple(request.prompt_token_ids_for_hashing[: case["block_size"]])
    payload = cbor_payload((scheme.none_hash, first_tokens, keys[0]))
    assert payload.hex() == case["cbor_payload_hex_first_block"]
    assert maybe_convert_block_hash(state.block_hashes[0]) == case["int_block_hash_first_block"]


@pytest.mark.parametrize("version", GOLDENS)
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_none_hash_for_every_seed(version: str, algo: str) -> None:
    golden, profile = GOLDENS[version]
    assert none_hash_from_seed(algo, golden["pythonhashseed"]).hex() == golden["none_hash"][algo]
    for seed, by_algo in golden["none_hash_other_seeds"].items():
        scheme = HashScheme.from_seed(algorithm=algo, block_size=16, seed=seed, profile=profile)
        assert scheme.none_hash.hex() == by_algo[algo]


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_none_hash_without_seed_033(algo: str) -> None:
    expected = GOLDENS["0.33"][0]["none_hash_without_seed"][algo]
    if expected is None:
        # The golden's note: xxhash* stay random per process without a seed.
        first = HashScheme.from_seed(
            algorithm=algo, block_size=16, seed=None, profile=VLLM_0_33, random_none_hash=True
        )
        second = HashScheme.from_seed(
            algorithm=algo, block_size=16, seed=None, profile=VLLM_0_33, random_none_hash=True
        )
        assert first.none_hash != second.none_hash
        assert len(first.none_hash) == 16
    else:
        scheme = HashScheme.from_seed(algorithm=algo, block_size=16, seed=None, profile=VLLM_0_33)
        assert scheme.none_hash.hex() == expected


@pytest.mark.parametrize("version", GOLDENS)
def test_hash_block_tokens_direct_calls(version: str) -> None:
    golden, profile = GOLDENS[version]
    for call in golden["hash_block_tokens"]:
        scheme = HashScheme.from_seed(
            algorithm=call["hash_fn"], block_size=3, seed=golden["pythonhashseed"], profile=profile
        )
        parent = bytes.fromhex(call["parent"])
        extra = tuple(call["extra_keys"])
        got = hash_block_tokens(scheme, parent, call["tokens"], extra)
        assert got.hex() == call["hash"]
        # The golden's parent-less call passes no extra keys.
        assert hash_block_tokens(scheme, None, call["tokens"]).hex() == call["hash_parent_none"]
        fn = get_hash_fn_by_name(call["hash_fn"])
        bare = hash_block_tokens(fn, b"", call["tokens"], none_hash=scheme.none_hash)
        assert bare.hex() == call["hash_parent_none"]


@pytest.mark.parametrize("version", GOLDENS)
def test_block_hash_with_group_id(version: str) -> None:
    golden = GOLDENS[version][0]["block_hash_with_group_id"]
    block_hash = BlockHash(bytes.fromhex(golden["block_hash"]))
    key = make_block_hash_with_group_id(block_hash, golden["group_id"])
    assert key.hex() == golden["packed"]
    assert get_group_id(key) == golden["unpacked_group_id"]
    assert get_block_hash(key) == block_hash
    assert maybe_convert_block_hash(block_hash) == golden["int_64bit_conversion"]
    assert maybe_convert_block_hash(block_hash, use_int_block_hashes=False) == block_hash


@pytest.mark.parametrize("version", GOLDENS)
def test_get_hash_fn_by_name(version: str) -> None:
    golden = GOLDENS[version][0]["get_hash_fn_by_name"]
    for name, function_name in golden.items():
        assert get_hash_fn_by_name(name).__name__ == function_name


@pytest.mark.parametrize("version", GOLDENS)
def test_block_hash_list_with_block_size(version: str) -> None:
    golden = GOLDENS[version][0]["block_hash_list_with_block_size"]
    raw = pvector(BlockHash(bytes.fromhex(h)) for h in golden["raw"])
    view = BlockHashListWithBlockSize(raw, golden["hash_block_size"], golden["target_block_size"])
    assert len(view) == golden["len"]
    assert [h.hex() for h in view] == golden["view"]
    assert [view[i].hex() for i in range(len(view))] == golden["view"]
    assert [h.hex() for h in view[1:3]] == golden["slice_1_3"]
    resolved = resolve_block_hashes(raw, golden["hash_block_size"], golden["target_block_size"])
    assert [h.hex() for h in resolved] == golden["view"]
