"""The public prompt and extension paths (fast chain hasher) against the reference one.

``hash_prompt`` and ``RequestBlockHashes`` use :func:`kvpure.hashing.fast_hash_token_blocks`
by default; passing ``chain_hasher=hash_token_blocks`` gives the reference per-block path.
Both must agree for every request: LoRA (name and path), cache salt, multimodal features,
prompt embeddings, both profiles, every algorithm.
"""

from __future__ import annotations

import copy
import pickle
from typing import NamedTuple

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
    extra_keys_for_blocks,
    fast_hash_token_blocks,
    generate_block_hash_extra_keys,
    hash_prompt,
    hash_token_blocks,
    resume_mm_index,
)

ALGORITHMS = st.sampled_from(("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"))
PROFILES = st.sampled_from((VLLM_0_26, VLLM_0_33))
NAMES = st.one_of(st.none(), st.text(max_size=8))


class RawRequest(NamedTuple):
    """A request's fields as plain data: the strategy draws these, the test builds the value.

    (Building a HashRequest inside the strategy would run beartype's checks, which draw
    from ``random``, inside hypothesis.)
    """

    tokens: tuple[int, ...] | None
    lora_name: str | None
    lora_path: str
    cache_salt: str | None
    features: tuple[tuple[str, int, int], ...]
    embeds: tuple[bytes, int] | None

    def build(self) -> HashRequest:
        embeds = self.embeds
        return HashRequest(
            prompt_token_ids=self.tokens,
            lora_name=self.lora_name,
            lora_path=self.lora_path,
            cache_salt=self.cache_salt,
            mm_features=tuple(
                MultiModalFeature(identifier=i, offset=o, length=n) for i, o, n in self.features
            ),
            prompt_embeds=(
                None if embeds is None else PromptEmbeds(data=embeds[0], row_size_bytes=embeds[1])
            ),
        )


@st.composite
def requests(draw: st.DrawFn) -> RawRequest:
    num_tokens = draw(st.integers(min_value=0, max_value=300))
    ids = st.integers(min_value=0, max_value=draw(st.sampled_from((300, 151_935, 2**31))))
    tokens = tuple(draw(st.lists(ids, min_size=num_tokens, max_size=num_tokens)))
    features: list[tuple[str, int, int]] = []
    position = draw(st.one_of(st.just(0), st.integers(min_value=0, max_value=20)))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        length = draw(st.integers(min_value=1, max_value=60))
        if position + length > num_tokens:  # vLLM places every item inside the prompt
            break
        features.append((draw(st.sampled_from(("img_a", "img_b", "c" * 64))), position, length))
        position += length + draw(st.integers(min_value=0, max_value=30))
    embeds = None
    if draw(st.booleans()) and num_tokens:
        row = draw(st.integers(min_value=1, max_value=8))
        embeds = (draw(st.binary(min_size=row * num_tokens, max_size=row * num_tokens)), row)
    return RawRequest(
        tokens=None if embeds is not None and draw(st.booleans()) else tokens,
        lora_name=draw(NAMES),
        lora_path=draw(st.sampled_from(("", "/adapters/sql"))),
        cache_salt=draw(NAMES),
        features=tuple(features),
        embeds=embeds,
    )


def _scheme(algo: str, block_size: int, profile: VllmHashProfile) -> HashScheme:
    return HashScheme.from_seed(algorithm=algo, block_size=block_size, seed="7", profile=profile)


@given(requests(), st.integers(min_value=1, max_value=40), ALGORITHMS, PROFILES)
def test_public_prompt_path_equals_reference(
    raw: RawRequest, block_size: int, algo: str, profile: VllmHashProfile
) -> None:
    request = raw.build()
    scheme = _scheme(algo, block_size, profile)
    fast = hash_prompt(scheme, request)
    reference = hash_prompt(scheme, request, chain_hasher=hash_token_blocks)
    assert list(fast) == list(reference)
    assert len(fast) == request.num_prompt_tokens // block_size


@given(
    requests(),
    st.integers(min_value=1, max_value=17),
    ALGORITHMS,
    PROFILES,
    st.lists(st.lists(st.integers(min_value=0, max_value=200_000), max_size=70), max_size=5),
)
def test_public_extension_path_equals_reference(
    raw: RawRequest,
    block_size: int,
    algo: str,
    profile: VllmHashProfile,
    steps: list[list[int]],
) -> None:
    request = raw.build()
    scheme = _scheme(algo, block_size, profile)
    fast = RequestBlockHashes.start(scheme, request)
    reference = RequestBlockHashes.start(scheme, request, chain_hasher=hash_token_blocks)
    assert list(fast.block_hashes) == list(reference.block_hashes)
    for step in steps:
        fast = fast.append_output_token_ids(step)
        reference = reference.append_output_token_ids(step, chain_hasher=hash_token_blocks)
        assert list(fast.block_hashes) == list(reference.block_hashes)
        assert list(fast.all_token_ids) == list(reference.all_token_ids)


@given(
    requests(),
    st.integers(min_value=1, max_value=9),
    ALGORITHMS,
    PROFILES,
    st.lists(st.integers(min_value=0, max_value=200_000), max_size=60),
)
def test_decoding_one_token_at_a_time_equals_the_reference(
    raw: RawRequest, block_size: int, algo: str, profile: VllmHashProfile, outputs: list[int]
) -> None:
    request = raw.build()
    scheme = _scheme(algo, block_size, profile)
    fast = RequestBlockHashes.start(scheme, request)
    reference = RequestBlockHashes.start(scheme, request, chain_hasher=hash_token_blocks)
    for token in outputs:
        fast = fast.append_output_token_ids(token)
        reference = reference.append_output_token_ids(token, chain_hasher=hash_token_blocks)
        assert list(fast.block_hashes) == list(reference.block_hashes)
    tokens = (*request.prompt_token_ids_for_hashing, *outputs)
    if not request.mm_features:  # then resuming changes nothing: all blocks in one scan
        keys = extra_keys_for_blocks(profile, request, block_size, 0, len(tokens) // block_size)
        expected = hash_token_blocks(algo, scheme.none_hash, tokens, block_size, keys)
        assert list(fast.block_hashes) == expected
    assert fast.num_tokens == len(tokens)


def test_the_public_default_is_the_fast_hasher() -> None:
    request = HashRequest(prompt_token_ids=tuple(range(1000, 1320)), lora_name="sql")
    scheme = _scheme("sha256_cbor", 16, VLLM_0_33)
    explicit = hash_prompt(scheme, request, chain_hasher=fast_hash_token_blocks)
    assert list(hash_prompt(scheme, request)) == list(explicit)
    assert len(explicit) == 20


@settings(max_examples=300)
@given(requests(), st.integers(min_value=1, max_value=17), PROFILES, st.data())
def test_extra_keys_for_blocks_equals_the_block_by_block_scan(
    raw: RawRequest, block_size: int, profile: VllmHashProfile, data: st.DataObject
) -> None:
    request = raw.build()
    first_block = data.draw(st.integers(min_value=0, max_value=3))
    num_blocks = data.draw(st.integers(min_value=0, max_value=25))
    start = first_block * block_size
    expected = []
    mm_idx = resume_mm_index(profile, request, start)
    for index in range(num_blocks):
        block_start = start + index * block_size
        keys, mm_idx = generate_block_hash_extra_keys(
            profile, request, block_start, block_start + block_size, mm_idx
        )
        expected.append(keys)
    assert extra_keys_for_blocks(profile, request, block_size, start, num_blocks) == expected


def test_request_state_pickles_and_copies() -> None:
    request = HashRequest(prompt_token_ids=tuple(range(1000, 1040)), lora_name="sql")
    scheme = _scheme("sha256_cbor", 16, VLLM_0_33)
    state = RequestBlockHashes.start(scheme, request).append_output_token_ids(range(10))
    restored = pickle.loads(pickle.dumps(state))
    assert restored == state
    assert copy.deepcopy(state) == state
    assert list(restored.append_output_token_ids(range(30)).block_hashes) == list(
        state.append_output_token_ids(range(30)).block_hashes
    )
    assert len(restored.append_output_token_ids(range(30)).block_hashes) == 5
