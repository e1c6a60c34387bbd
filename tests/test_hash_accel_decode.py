"""The C decoding path (one-block hasher, ``append_output_token_ids``) and ``hash_prompt``
give the pure-Python path's digests, and both give the reference chain's.

The expected values come from the pure-Python reference, ``hash_token_blocks`` (vLLM's
per-block formula, checked against vLLM's goldens in test_hash_golden.py), run with the
extension switched off.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
    VllmHashProfile,
    accelerator,
    hash_prompt,
)
from kvpure.hashing.block_hasher import hash_token_blocks as reference
from kvpure.hashing.fast_prompt import one_block_hasher

pytestmark = pytest.mark.skipif(not accelerator.available(), reason="extension not built")

ALGORITHMS = st.sampled_from(("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"))
PROFILES = st.sampled_from((VLLM_0_26, VLLM_0_33))
TOKENS = st.one_of(
    st.integers(0, 300_000),
    st.sampled_from([0, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -1, -(2**63), 2**80]),
)
ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=40),
)
KEYS = st.one_of(
    st.none(), st.lists(st.one_of(ATOMS, st.tuples(ATOMS, ATOMS)), max_size=4).map(tuple)
)


@pytest.fixture(autouse=True)
def _extension_on_after() -> Iterator[None]:
    was = accelerator.accelerated()
    yield
    accelerator.set_enabled(was)


def _python(function: object) -> object:
    """``function()`` run with the extension switched off (the reference path)."""
    was = accelerator.accelerated()
    accelerator.set_enabled(False)
    try:
        return function() if callable(function) else None
    finally:
        accelerator.set_enabled(was)


def _outcome(function: object) -> object:
    """The value ``function()`` returns, or the type of what it raises."""
    try:
        return function() if callable(function) else None
    except Exception as error:  # the error's type is the outcome compared
        return type(error)


@settings(max_examples=300, deadline=None)
@given(
    algo=ALGORITHMS,
    block_size=st.integers(1, 40),
    extra=KEYS,
    parent=st.binary(min_size=0, max_size=300),
    data=st.data(),
    as_tuple=st.booleans(),
    native=st.booleans(),
)
def test_one_block_hasher_equals_reference(
    algo: str,
    block_size: int,
    extra: tuple[object, ...] | None,
    parent: bytes,
    data: st.DataObject,
    as_tuple: bool,
    native: bool,
) -> None:
    size = data.draw(st.sampled_from([block_size, block_size, block_size - 1, block_size + 1]))
    tokens = data.draw(st.lists(TOKENS, min_size=size, max_size=size))
    block = tuple(tokens) if as_tuple else tokens
    accelerator.set_native_xxhash(native)
    hasher = one_block_hasher(algo, block_size, extra)
    got = _outcome(lambda: hasher(parent, block))
    python = _outcome(
        lambda: _python(lambda: one_block_hasher(algo, block_size, extra)(parent, block))
    )
    assert got == python
    if size == block_size:
        assert got == reference(algo, parent, tokens, block_size, [extra])[0]


@pytest.mark.parametrize("algo", ["sha256", "xxhash"])
def test_one_block_hasher_keeps_pickle_memo_of_callers_objects(algo: str) -> None:
    """An extra key that is the parent or the token tuple itself is a memo reference in
    pickle: the C hasher hands it to Python, which writes it as pickle does."""
    parent = b"p" * 32
    block = (1, 2, 3, 4)
    for extra in ((parent,), (block,), ("x", parent, block)):
        hasher = one_block_hasher(algo, 4, extra)
        assert hasher(parent, block) == reference(algo, parent, block, 4, [extra])[0]


@st.composite
def requests(draw: st.DrawFn) -> HashRequest:
    tokens = tuple(draw(st.lists(st.integers(0, 200_000), min_size=1, max_size=70)))
    features: list[MultiModalFeature] = []
    position = draw(st.integers(0, 10))
    for _ in range(draw(st.integers(0, 3))):
        length = draw(st.integers(1, 12))
        identifier = draw(st.sampled_from(("img_a", "img_b", "c")))
        features.append(MultiModalFeature(identifier=identifier, offset=position, length=length))
        position += length + draw(st.integers(0, 9))
    embeds = None
    if draw(st.integers(0, 5)) == 0:
        row = draw(st.integers(1, 4))
        size = row * len(tokens)
        embeds = PromptEmbeds(
            data=draw(st.binary(min_size=size, max_size=size)), row_size_bytes=row
        )
    return HashRequest(
        prompt_token_ids=tokens,
        lora_name=draw(st.one_of(st.none(), st.text(max_size=5))),
        cache_salt=draw(st.one_of(st.none(), st.text(max_size=5))),
        mm_features=tuple(f for f in features if f.offset + f.length <= len(tokens)),
        prompt_embeds=embeds,
    )


def _scheme(algo: str, block_size: int, profile: VllmHashProfile) -> HashScheme:
    return HashScheme.from_seed(algorithm=algo, block_size=block_size, seed="0", profile=profile)


@settings(max_examples=150, deadline=None)
@given(
    algo=ALGORITHMS,
    profile=PROFILES,
    block_size=st.integers(1, 17),
    request=requests(),
    steps=st.lists(
        st.one_of(
            st.integers(0, 200_000),
            st.lists(st.integers(0, 200_000), max_size=40),
            st.lists(st.integers(0, 200_000), max_size=40).map(tuple),
        ),
        max_size=60,
    ),
)
def test_decoding_equals_python_path(
    algo: str,
    profile: VllmHashProfile,
    block_size: int,
    request: HashRequest,
    steps: list[int | list[int] | tuple[int, ...]],
) -> None:
    """Token at a time and block at a time: every state (tokens, block hashes) is the one
    the Python path reaches, and the final hashes are the whole sequence's chain."""
    scheme = _scheme(algo, block_size, profile)

    def run() -> list[RequestBlockHashes]:
        state = RequestBlockHashes.start(scheme, request)
        states = [state]
        for step in steps:
            state = state.append_output_token_ids(step)
            states.append(state)
        return states

    fast = run()
    slow = _python(run)
    assert isinstance(slow, list)
    for got, expected in zip(fast, slow, strict=True):
        assert got == expected
        assert list(got.block_hashes) == list(expected.block_hashes)
        assert got.num_tokens == expected.num_tokens
    everything = tuple(fast[-1].all_token_ids)
    assert len(fast[-1].block_hashes) == len(everything) // block_size
    # 0.26 resumes its multimodal scan at the last item (test_hash_units), and embeddings
    # cover the prompt only: otherwise the decoded chain is the whole sequence's
    if request.prompt_embeds is None and (profile is VLLM_0_33 or not request.mm_features):
        whole = HashRequest(
            prompt_token_ids=everything,
            lora_name=request.lora_name,
            cache_salt=request.cache_salt,
            mm_features=request.mm_features,
        )
        assert list(fast[-1].block_hashes) == _python(lambda: hash_prompt(scheme, whole))


@settings(max_examples=150, deadline=None)
@given(algo=ALGORITHMS, profile=PROFILES, block_size=st.integers(1, 17), request=requests())
def test_hash_prompt_equals_python_path(
    algo: str, profile: VllmHashProfile, block_size: int, request: HashRequest
) -> None:
    scheme = _scheme(algo, block_size, profile)
    assert hash_prompt(scheme, request) == _python(lambda: hash_prompt(scheme, request))


class _IntSubclass(int):
    """An int that is not an exact int: the C method hands it to the Python one."""


def test_odd_calls_run_the_python_method() -> None:
    """Int subclasses, generators, a non-default chain hasher and the switch turned off
    go to the Python method, with its results."""
    scheme = _scheme("sha256_cbor", 4, VLLM_0_26)
    state = RequestBlockHashes.start(scheme, HashRequest(prompt_token_ids=tuple(range(9))))
    one = _IntSubclass(1)
    expected = _python(lambda: state.append_output_token_ids([one, 5, 6, 7]))
    assert state.append_output_token_ids(one).append_output_token_ids(iter([5, 6, 7])) == expected
    assert state.append_output_token_ids([one, 5, 6, 7]) == expected
    with pytest.raises(TypeError):
        state.append_output_token_ids()  # type: ignore[call-arg]  # the Python method's error
    with pytest.raises(TypeError):
        state.append_output_token_ids(1, 2)  # type: ignore[call-arg, arg-type]  # likewise
