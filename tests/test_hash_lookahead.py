"""vLLM 0.33/0.34 lookahead hashes and the 0.34 profile, against vLLM 0.34.0's goldens.

Expected values: ``tests/data/vllm-0.34.0/hashes.json`` (vLLM 0.34's hasher on the 11
requests of 0.26's goldens) and ``hashes_lookahead.json`` (6 requests x 4 algorithms x
L = 1 and 3, vLLM 0.34's ``get_request_block_hasher(B, fn, L)`` with
``append_output_token_ids`` per step). The property tests compare with a transcription of
vLLM's per-block loop (``get_request_block_hasher`` /
``generate_lookahead_block_hash_extra_keys``) built on kvpure's per-window extra keys,
which the goldens check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from beartype.roar import BeartypeCallHintViolation
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpure.errors import InvalidFieldError, KVPureTypeError
from kvpure.hashing import (
    DEFAULT_HASH_PROFILE,
    HASH_PROFILES,
    VLLM_0_26,
    VLLM_0_33,
    VLLM_0_34,
    HashAlgorithm,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
    VllmHashProfile,
    accelerator,
    generate_block_hash_extra_keys,
    get_hash_fn_by_name,
    get_hash_profile,
    hash_profile_for_version,
    hash_prompt,
    resume_mm_index,
)
from kvpure.hashing.block_hasher import hash_token_blocks
from tests.conftest import DATA_DIR
from tests.test_hash_golden import _request

GOLDEN_034 = DATA_DIR / "vllm-0.34.0"
HASHES_034: dict[str, Any] = json.loads((GOLDEN_034 / "hashes.json").read_text())
LOOKAHEAD: dict[str, Any] = json.loads((GOLDEN_034 / "hashes_lookahead.json").read_text())
ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
LOOKAHEAD_CASES = [
    (case["name"], key) for case in LOOKAHEAD["cases"] for key in sorted(case["hashes"])
]


@pytest.fixture(autouse=True)
def _extension_as_it_was() -> Iterator[None]:
    was = accelerator.accelerated()
    yield
    accelerator.set_enabled(was)


def _case(golden: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [case for case in golden["cases"] if case["name"] == name]
    return dict(found)


def _run(
    scheme: HashScheme, request: HashRequest, steps: Sequence[Sequence[int]], *, one_by_one: bool
) -> RequestBlockHashes:
    state = RequestBlockHashes.start(scheme, request)
    for step in steps:
        if one_by_one:
            for token in step:
                state = state.append_output_token_ids(token)
        else:
            state = state.append_output_token_ids(list(step))
    return state


# --- the profile ----------------------------------------------------------------------------


def test_the_034_profile_is_033s_rules_plus_int32_and_the_default() -> None:
    assert DEFAULT_HASH_PROFILE is VLLM_0_34
    assert get_hash_profile("vllm-0.34") is VLLM_0_34
    assert HASH_PROFILES["vllm-0.34"] is VLLM_0_34
    assert hash_profile_for_version("0.34.0") is VLLM_0_34
    assert hash_profile_for_version("0.26") is VLLM_0_26
    assert (VLLM_0_34.name, VLLM_0_34.vllm_version) == ("vllm-0.34", "0.34.0")
    assert VLLM_0_34.int32_token_ids
    assert not VLLM_0_33.int32_token_ids
    assert not VLLM_0_26.int32_token_ids
    assert VLLM_0_34.lookahead_hashes
    assert VLLM_0_33.lookahead_hashes
    assert not VLLM_0_26.lookahead_hashes
    for rule in ("extra_key_style", "mm_resume_rule", "unseeded_seed", "random_none_hash_form"):
        assert getattr(VLLM_0_34, rule) == getattr(VLLM_0_33, rule)
    import kvpure

    assert kvpure.VLLM_0_34 is VLLM_0_34
    assert HashScheme.from_seed(algorithm="sha256", block_size=4, seed="0").profile is VLLM_0_34


@pytest.mark.parametrize("name", [case["name"] for case in HASHES_034["cases"]])
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_034_hashes_golden(name: str, algo: str) -> None:
    case = _case(HASHES_034, name)
    expected = case["hashes"][algo]
    scheme = HashScheme.from_seed(
        algorithm=algo,
        block_size=case["block_size"],
        seed=HASHES_034["pythonhashseed"],
        profile=VLLM_0_34,
    )
    request = _request(case, VLLM_0_34)
    assert len(hash_prompt(scheme, request)) == expected["num_hashes_after_prompt"]
    state = _run(scheme, request, case["appended_output_tokens"], one_by_one=False)
    assert [h.hex() for h in state.block_hashes] == expected["block_hashes"]
    assert state.num_tokens == expected["num_tokens"]


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_034_none_hash_golden(algo: str) -> None:
    assert (
        HashScheme.from_seed(algorithm=algo, block_size=16, seed="0").none_hash.hex()
        == HASHES_034["none_hash"][algo]
    )


# --- the lookahead goldens ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "key"), LOOKAHEAD_CASES)
@pytest.mark.parametrize("profile", [VLLM_0_33, VLLM_0_34], ids=["0.33", "0.34"])
@pytest.mark.parametrize("extension", [True, False], ids=["C", "python"])
def test_lookahead_golden(name: str, key: str, profile: VllmHashProfile, extension: bool) -> None:
    accelerator.set_enabled(extension)
    case = _case(LOOKAHEAD, name)
    expected = case["hashes"][key]
    lookahead = expected["num_hash_lookahead_tokens"]
    assert key.startswith(f"L{lookahead}/")
    scheme = HashScheme.from_seed(
        algorithm=key.split("/")[1],
        block_size=case["block_size"],
        seed=LOOKAHEAD["pythonhashseed"],
        profile=profile,
        num_hash_lookahead_tokens=lookahead,
    )
    request = _request(case, profile)
    prompt = hash_prompt(scheme, request)
    assert len(prompt) == expected["num_hashes_after_prompt"]
    assert len(prompt) == max(request.num_prompt_tokens - lookahead, 0) // case["block_size"]
    for one_by_one in (False, True):
        state = _run(scheme, request, case["appended_output_tokens"], one_by_one=one_by_one)
        assert [h.hex() for h in state.block_hashes] == expected["block_hashes"]
        assert state.num_tokens == expected["num_tokens"]
        assert list(state.block_hashes[: len(prompt)]) == list(prompt)


def test_lookahead_example_of_the_contract() -> None:
    """64 tokens, block 16, L = 1: 3 hashes (block 4 would need token 64)."""
    case = _case(LOOKAHEAD, "plain_64_tokens_bs16")
    scheme = HashScheme.from_seed(
        algorithm="sha256", block_size=16, seed="0", num_hash_lookahead_tokens=1
    )
    hashes = hash_prompt(scheme, _request(case, VLLM_0_34))
    assert [h.hex() for h in hashes] == case["hashes"]["L1/sha256"]["block_hashes"]
    assert len(hashes) == 3
    plain = HashScheme.from_seed(algorithm="sha256", block_size=16, seed="0")
    assert len(hash_prompt(plain, _request(case, VLLM_0_34))) == 4


def test_lookahead_under_026_is_refused() -> None:
    with pytest.raises(InvalidFieldError) as caught:
        HashScheme.from_seed(
            algorithm="sha256",
            block_size=16,
            seed="0",
            profile=VLLM_0_26,
            num_hash_lookahead_tokens=1,
        )
    assert caught.value.field == "num_hash_lookahead_tokens"
    assert "vllm-0.26" in str(caught.value)
    none_hash = HashScheme.from_seed(algorithm="sha256", block_size=16, seed="0").none_hash
    with pytest.raises(InvalidFieldError):
        HashScheme(
            algorithm=HashAlgorithm.SHA256,
            block_size=16,
            none_hash=none_hash,
            profile=VLLM_0_26,
            num_hash_lookahead_tokens=3,
        )
    for bad in (-1, True, 2**20):
        with pytest.raises(InvalidFieldError):
            HashScheme.from_seed(
                algorithm="sha256",
                block_size=16,
                seed="0",
                num_hash_lookahead_tokens=bad,
            )


# --- int32 token ids (0.34) -----------------------------------------------------------------


def _scheme(profile: VllmHashProfile, lookahead: int = 0, algo: str = "sha256") -> HashScheme:
    return HashScheme.from_seed(
        algorithm=algo, block_size=4, seed="0", profile=profile, num_hash_lookahead_tokens=lookahead
    )


@pytest.mark.parametrize("extension", [True, False], ids=["C", "python"])
def test_034_refuses_a_prompt_id_past_int32_naming_it(extension: bool) -> None:
    accelerator.set_enabled(extension)
    request = HashRequest(prompt_token_ids=(1, 2, 3, 2**31, 5, 6, 7, 8))
    for call in (hash_prompt, RequestBlockHashes.start):
        with pytest.raises(InvalidFieldError) as caught:
            call(_scheme(VLLM_0_34), request)
        assert caught.value.field == "prompt_token_ids[3]"
        assert caught.value.value == 2**31
        assert "int32" in str(caught.value)
    # 0.33 holds any Python int and hashes it (as 0.33 does)
    assert len(hash_prompt(_scheme(VLLM_0_33), request)) == 2
    edge = HashRequest(prompt_token_ids=(0, 2**31 - 1, 3, 4))
    assert hash_prompt(_scheme(VLLM_0_34), edge) == hash_prompt(_scheme(VLLM_0_33), edge)


@pytest.mark.parametrize("extension", [True, False], ids=["C", "python"])
@pytest.mark.parametrize("lookahead", [0, 1])
def test_034_refuses_an_appended_id_past_int32(extension: bool, lookahead: int) -> None:
    accelerator.set_enabled(extension)
    request = HashRequest(prompt_token_ids=(1, 2, 3, 4, 5))
    state = RequestBlockHashes.start(_scheme(VLLM_0_34, lookahead), request)
    with pytest.raises(InvalidFieldError) as caught:
        state.append_output_token_ids(2**31)
    assert caught.value.field == "token_ids"
    with pytest.raises(InvalidFieldError) as caught:
        state.append_output_token_ids([6, 7, 2**40])
    assert caught.value.field == "token_ids[2]"
    longer = state.append_output_token_ids([6, 7, 2**31 - 1])
    assert longer.num_tokens == 8
    older = RequestBlockHashes.start(_scheme(VLLM_0_33, lookahead), request)
    assert older.append_output_token_ids([6, 7, 2**40]).num_tokens == 8
    assert older.append_output_token_ids(2**40).num_tokens == 6


@pytest.mark.parametrize("extension", [True, False], ids=["C", "python"])
@pytest.mark.parametrize("bad", [True, False, 1.0, -1, "7", None])
def test_bools_floats_and_negative_ids_are_refused(extension: bool, bad: object) -> None:
    accelerator.set_enabled(extension)
    # the runtime type check may see the item first (it samples a tuple): a TypeError then
    with pytest.raises((InvalidFieldError, KVPureTypeError, BeartypeCallHintViolation)) as raised:
        HashRequest(prompt_token_ids=(1, 2, bad))  # type: ignore[arg-type]  # the misuse
    if isinstance(raised.value, InvalidFieldError):
        assert raised.value.field == "prompt_token_ids[2]"
    state = RequestBlockHashes.start(_scheme(VLLM_0_33), HashRequest(prompt_token_ids=(1, 2, 3)))
    with pytest.raises(InvalidFieldError) as caught:  # an iterator: past the test-wide hook
        state.append_output_token_ids(iter([4, bad]))  # type: ignore[arg-type]  # the misuse
    assert caught.value.field == "token_ids[1]"


# --- the property: prompt == step by step, C == Python, both == vLLM's loop -----------------


def _vllm_loop(
    scheme: HashScheme, request: HashRequest, tokens: Sequence[int], have: int
) -> list[bytes]:
    """vLLM 0.34's request_block_hasher, one call (blocks from ``have``), as its source reads."""
    size, lookahead = scheme.block_size, scheme.num_hash_lookahead_tokens
    start = have * size
    num_tokens = len(tokens) - lookahead
    hash_fn = get_hash_fn_by_name(scheme.algorithm)
    mm_idx = 0
    if start > 0:
        mm_idx = resume_mm_index(scheme.profile, request, start)
    parent: bytes = scheme.none_hash
    out: list[bytes] = []
    while start + size <= num_tokens:
        end = start + size
        keys, mm_idx = generate_block_hash_extra_keys(
            scheme.profile, request, start, end + lookahead, mm_idx
        )
        while mm_idx > 0 and request.mm_features[mm_idx - 1].end > end:
            mm_idx -= 1
        extra = (keys, tokens[end]) if lookahead == 1 else (keys, *tokens[end : end + lookahead])
        parent = hash_fn((parent, tuple(tokens[start:end]), extra))
        out.append(parent)
        start = end
    return out


@st.composite
def _requests(draw: st.DrawFn) -> tuple[HashRequest, list[list[int]]]:
    n = draw(st.integers(0, 40))
    tokens = tuple(draw(st.lists(st.integers(0, 2**31 - 1), min_size=n, max_size=n)))
    features: list[MultiModalFeature] = []
    position = 0
    for index in range(draw(st.integers(0, 3))):
        offset = position + draw(st.integers(0, 6))
        length = draw(st.integers(1, 6))
        if offset + length > n:
            break
        features.append(
            MultiModalFeature(identifier=f"img{index % 2}", offset=offset, length=length)
        )
        position = offset + length
    embeds = None
    if n and draw(st.booleans()) and draw(st.booleans()):
        embeds = PromptEmbeds(
            data=draw(st.binary(min_size=2 * n, max_size=2 * n)), row_size_bytes=2
        )
    request = HashRequest(
        prompt_token_ids=tokens if embeds is None or draw(st.booleans()) else None,
        lora_name=draw(st.sampled_from([None, "lora-a"])),
        lora_path=draw(st.sampled_from(["", "/p"])),
        cache_salt=draw(st.sampled_from([None, "", "tenant"])),
        mm_features=tuple(features),
        prompt_embeds=embeds,
    )
    steps = draw(st.lists(st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=7), max_size=6))
    return request, steps


@settings(max_examples=150, deadline=None)
@given(
    _requests(),
    st.sampled_from(ALGORITHMS),
    st.integers(1, 5),
    st.integers(1, 4),
    st.sampled_from([VLLM_0_33, VLLM_0_34]),
)
def test_lookahead_prompt_equals_step_by_step_and_vllms_loop(
    drawn: tuple[HashRequest, list[list[int]]],
    algo: str,
    block_size: int,
    lookahead: int,
    profile: VllmHashProfile,
) -> None:
    request, steps = drawn
    scheme = HashScheme.from_seed(
        algorithm=algo,
        block_size=block_size,
        seed="0",
        profile=profile,
        num_hash_lookahead_tokens=lookahead,
    )
    tokens = list(request.prompt_token_ids_for_hashing)
    results = {}
    for extension in (True, False):
        accelerator.set_enabled(extension)
        expected = _vllm_loop(scheme, request, tokens, 0)
        assert list(hash_prompt(scheme, request)) == expected
        assert list(hash_prompt(scheme, request, chain_hasher=hash_token_blocks)) == expected
        by_step = RequestBlockHashes.start(scheme, request)
        by_token = by_step
        all_tokens = list(tokens)
        for step in steps:
            by_step = by_step.append_output_token_ids(step)
            for token in step:
                by_token = by_token.append_output_token_ids(token)
            all_tokens += step
            assert len(by_step.block_hashes) == max(len(all_tokens) - lookahead, 0) // block_size
        # vLLM's loop run once over everything: chained hashes do not depend on the steps
        assert list(by_step.block_hashes) == _vllm_loop(scheme, request, all_tokens, 0)
        assert by_token == by_step
        assert list(by_step.all_token_ids) == all_tokens
        results[extension] = list(by_step.block_hashes)
    assert results[True] == results[False]


@pytest.mark.parametrize("extension", [True, False], ids=["C", "python"])
def test_one_scan_tells_whether_a_prompt_fits_int32(extension: bool) -> None:
    import pickle

    accelerator.set_enabled(extension)
    assert HashRequest(prompt_token_ids=(0, 2**31 - 1)).prompt_fits_int32
    large = HashRequest(prompt_token_ids=(2**40, 5, 6, 7))
    assert not large.prompt_fits_int32
    assert pickle.loads(pickle.dumps(large)).prompt_fits_int32 is False
    with pytest.raises(InvalidFieldError) as caught:
        HashRequest(prompt_token_ids=(2**40, 5, -6))
    assert caught.value.field == "prompt_token_ids[2]"
    with pytest.raises(InvalidFieldError) as caught:
        hash_prompt(_scheme(VLLM_0_34), large)
    assert caught.value.field == "prompt_token_ids[0]"
    assert len(hash_prompt(_scheme(VLLM_0_33), large)) == 1
