"""RequestBlockHashes' inner representation (hashed blocks shared, pending tokens chained):
values stay immutable, ``all_token_ids`` is the prompt plus what was appended, equality
and pickling go by the public fields, and the hashes equal hashing the whole sequence as
one prompt with the reference chain hasher."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from kvpure.hashing import (
    VLLM_0_26,
    BlockHash,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    RequestBlockHashes,
    hash_prompt,
    hash_token_blocks,
)

ALGORITHMS = st.sampled_from(("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"))
TOKENS = st.integers(min_value=0, max_value=151_935)
STEP = st.one_of(TOKENS, st.lists(TOKENS, max_size=40))
"""One call: a single token, or several at once."""


def _request(prompt: list[int], with_extras: bool) -> HashRequest:
    if not with_extras or len(prompt) < 4:
        return HashRequest(prompt_token_ids=tuple(prompt))
    return HashRequest(
        prompt_token_ids=tuple(prompt),
        lora_name="sql",
        cache_salt="salt",
        mm_features=(MultiModalFeature(identifier="img", offset=1, length=len(prompt) - 2),),
    )


def _as_list(step: int | list[int]) -> list[int]:
    return [step] if isinstance(step, int) else step


def _reference_hashes(
    scheme: HashScheme, request: HashRequest, tokens: list[int]
) -> list[BlockHash]:
    """The whole sequence hashed as one prompt (same extra keys: the prompt's items lie
    inside the prompt), by the reference chain hasher."""
    whole = HashRequest(
        prompt_token_ids=tuple(tokens),
        lora_name=request.lora_name,
        cache_salt=request.cache_salt,
        mm_features=request.mm_features,
    )
    return list(hash_prompt(scheme, whole, chain_hasher=hash_token_blocks))


@given(
    st.lists(TOKENS, max_size=70),
    st.lists(STEP, max_size=40),
    st.sampled_from((1, 2, 5, 16)),
    ALGORITHMS,
    st.booleans(),
)
def test_old_values_are_unchanged_and_every_value_is_right(
    prompt: list[int], steps: list[int | list[int]], block_size: int, algo: str, extras: bool
) -> None:
    scheme = HashScheme.from_seed(
        algorithm=algo, block_size=block_size, seed="1", profile=VLLM_0_26
    )
    request = _request(prompt, extras)
    states = [RequestBlockHashes.start(scheme, request)]
    expected_tokens = [list(prompt)]
    for step in steps:
        states.append(states[-1].append_output_token_ids(step))
        expected_tokens.append(expected_tokens[-1] + _as_list(step))
    snapshots = [(list(s.all_token_ids), list(s.block_hashes)) for s in states]
    # every value, read again after all the appends, is what it was and what it should be
    for state, tokens, snapshot in zip(states, expected_tokens, snapshots, strict=True):
        assert list(state.all_token_ids) == tokens
        assert state.num_tokens == len(tokens)
        assert isinstance(state.all_token_ids, PVector)
        assert isinstance(state.block_hashes, PVector)
        assert (list(state.all_token_ids), list(state.block_hashes)) == snapshot
        assert list(state.block_hashes) == _reference_hashes(scheme, request, tokens)
        assert state.scheme == scheme
        assert state.request == request


@given(
    st.lists(TOKENS, min_size=1, max_size=50),
    st.lists(TOKENS, max_size=40),
    st.lists(TOKENS, max_size=40),
    ALGORITHMS,
)
def test_two_branches_from_one_value_do_not_meet(
    prompt: list[int], left: list[int], right: list[int], algo: str
) -> None:
    scheme = HashScheme.from_seed(algorithm=algo, block_size=4, seed="2", profile=VLLM_0_26)
    request = _request(prompt, True)
    root = RequestBlockHashes.start(scheme, request)
    for token in left[:3]:
        root = root.append_output_token_ids(token)
    base = prompt + left[:3]
    root_hashes = list(root.block_hashes)
    a, b = root, root
    for token in left:
        a = a.append_output_token_ids(token)
    b = b.append_output_token_ids(right)
    assert list(a.all_token_ids) == base + left
    assert list(b.all_token_ids) == base + right
    assert list(root.all_token_ids) == base
    assert list(root.block_hashes) == root_hashes
    assert list(a.block_hashes) == _reference_hashes(scheme, request, base + left)
    assert list(b.block_hashes) == _reference_hashes(scheme, request, base + right)


@given(st.lists(TOKENS, max_size=40), st.lists(TOKENS, max_size=40), ALGORITHMS)
def test_equal_by_public_fields_however_built(
    prompt: list[int], output: list[int], algo: str
) -> None:
    scheme = HashScheme.from_seed(algorithm=algo, block_size=4, seed="3", profile=VLLM_0_26)
    request = _request(prompt, True)
    stepped = RequestBlockHashes.start(scheme, request)
    for token in output:
        stepped = stepped.append_output_token_ids(token)
    at_once = RequestBlockHashes.start(scheme, request).append_output_token_ids(output)
    direct = RequestBlockHashes(
        scheme=scheme,
        request=request,
        all_token_ids=pvector(prompt + output),
        block_hashes=pvector(_reference_hashes(scheme, request, prompt + output)),
    )
    assert stepped == at_once == direct
    assert hash(stepped) == hash(at_once) == hash(direct)
    if output:
        assert stepped != RequestBlockHashes.start(scheme, request)


@given(st.lists(TOKENS, max_size=40), st.lists(TOKENS, max_size=40), st.lists(TOKENS, max_size=40))
def test_a_value_mid_block_pickles_and_goes_on_alike(
    prompt: list[int], output: list[int], more: list[int]
) -> None:
    scheme = HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=8, seed="4", profile=VLLM_0_26
    )
    request = _request(prompt, True)
    state = RequestBlockHashes.start(scheme, request)
    for token in output:
        state = state.append_output_token_ids(token)
    for restored in (pickle.loads(pickle.dumps(state)), copy.deepcopy(state), copy.copy(state)):
        assert restored == state
        assert list(restored.all_token_ids) == prompt + output
        went_on, expected = restored, state
        for token in more:
            went_on = went_on.append_output_token_ids(token)
            expected = expected.append_output_token_ids(token)
        assert went_on == expected
        assert list(went_on.block_hashes) == _reference_hashes(
            scheme, request, prompt + output + more
        )


def test_repr_names_the_public_fields() -> None:
    scheme = HashScheme.from_seed(algorithm="xxhash", block_size=2, seed="5", profile=VLLM_0_26)
    state = RequestBlockHashes.start(scheme, HashRequest(prompt_token_ids=(1, 2, 3)))
    text = repr(state.append_output_token_ids(4))
    assert "all_token_ids=pvector([1, 2, 3, 4])" in text
    assert "block_hashes=pvector([" in text


@given(
    prompt=st.lists(TOKENS, min_size=0, max_size=40),
    step=st.lists(TOKENS, min_size=1, max_size=40),
    algo=ALGORITHMS,
    block_size=st.sampled_from((1, 4, 16)),
    with_extras=st.booleans(),
    as_tuple=st.booleans(),
)
def test_appending_a_list_does_not_keep_the_callers_list(
    prompt: list[int],
    step: list[int],
    algo: str,
    block_size: int,
    with_extras: bool,
    as_tuple: bool,
) -> None:
    scheme = HashScheme.from_seed(
        algorithm=algo, block_size=block_size, seed="0", profile=VLLM_0_26
    )
    request = _request(prompt, with_extras)
    state = RequestBlockHashes.start(scheme, request)
    appended = list(step)
    after = state.append_output_token_ids(tuple(appended) if as_tuple else appended)
    tokens_before, hashes_before = list(after.all_token_ids), list(after.block_hashes)
    appended[:] = [0] * len(appended)  # the caller reuses its list
    assert list(after.all_token_ids) == tokens_before == prompt + step
    assert list(after.block_hashes) == hashes_before
    assert hashes_before == _reference_hashes(scheme, request, prompt + step)
