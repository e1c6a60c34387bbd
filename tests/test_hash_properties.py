"""Properties of block hashing (DESIGN.md section 9), checked with hypothesis.

Expected values come from independent oracles: cbor2, pickle.dumps with
pickle.HIGHEST_PROTOCOL (what vLLM calls), hashlib/xxhash applied to vLLM's
payload formula, or from the structure of the chain itself.
"""

from __future__ import annotations

import hashlib
import pickle

import cbor2
import xxhash
from hypothesis import assume, given
from hypothesis import strategies as st

from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    BlockHash,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    RequestBlockHashes,
    VllmHashProfile,
    canonical_cbor_dumps,
    get_block_hash,
    get_group_id,
    hash_block_tokens,
    hash_prompt,
    hash_token_blocks,
    make_block_hash_with_group_id,
    pickle_payload,
    sha256,
    sha256_cbor,
)
from kvpure.hashing import xxhash as kv_xxhash
from kvpure.hashing import xxhash_cbor as kv_xxhash_cbor
from kvpure.hashing.cbor import canonical_cbor_dumps_memo

ALGORITHMS = st.sampled_from(("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"))
PROFILES = st.sampled_from((VLLM_0_26, VLLM_0_33))
TOKENS = st.lists(st.integers(min_value=0, max_value=200_000), max_size=90)
BLOCK_SIZES = st.integers(min_value=1, max_value=17)
NAMES = st.one_of(st.none(), st.text(max_size=6))

ORACLE = {
    "sha256": lambda x: hashlib.sha256(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)).digest(),
    "sha256_cbor": lambda x: hashlib.sha256(cbor2.dumps(x, canonical=True)).digest(),
    "xxhash": lambda x: xxhash.xxh3_128_digest(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)),
    "xxhash_cbor": lambda x: xxhash.xxh3_128_digest(cbor2.dumps(x, canonical=True)),
}


@st.composite
def mm_features(draw: st.DrawFn) -> tuple[MultiModalFeature, ...]:
    features: list[MultiModalFeature] = []
    position = draw(st.integers(min_value=0, max_value=10))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        length = draw(st.integers(min_value=1, max_value=25))
        identifier = draw(st.sampled_from(("img_a", "img_b", "c")))
        features.append(MultiModalFeature(identifier=identifier, offset=position, length=length))
        position += length + draw(st.integers(min_value=0, max_value=12))
    return tuple(features)


def _within(
    features: tuple[MultiModalFeature, ...], num_tokens: int
) -> tuple[MultiModalFeature, ...]:
    """The items that fit a prompt of ``num_tokens`` (vLLM places every item inside it)."""
    return tuple(f for f in features if f.end <= num_tokens)


def _scheme(algo: str, block_size: int, profile: VllmHashProfile) -> HashScheme:
    return HashScheme.from_seed(algorithm=algo, block_size=block_size, seed="0", profile=profile)


@given(TOKENS, BLOCK_SIZES, ALGORITHMS)
def test_plain_hashes_follow_vllm_formula(tokens: list[int], bs: int, algo: str) -> None:
    scheme = _scheme(algo, bs, VLLM_0_26)
    hashes = hash_prompt(scheme, HashRequest(prompt_token_ids=tuple(tokens)))
    parent: bytes = ORACLE[algo]("0")
    expected = []
    for start in range(0, len(tokens) - bs + 1, bs):
        parent = ORACLE[algo]((parent, tuple(tokens[start : start + bs]), None))
        expected.append(parent)
    assert list(hashes) == expected


@given(TOKENS, BLOCK_SIZES, ALGORITHMS, PROFILES, NAMES, NAMES, mm_features())
def test_one_hash_per_full_block(
    tokens: list[int],
    bs: int,
    algo: str,
    profile: VllmHashProfile,
    lora: str | None,
    salt: str | None,
    features: tuple[MultiModalFeature, ...],
) -> None:
    request = HashRequest(
        prompt_token_ids=tuple(tokens),
        lora_name=lora,
        cache_salt=salt,
        mm_features=_within(features, len(tokens)),
    )
    hashes = hash_prompt(_scheme(algo, bs, profile), request)
    assert len(hashes) == len(tokens) // bs
    assert all(len(h) == (32 if algo.startswith("sha256") else 16) for h in hashes)


@given(TOKENS, BLOCK_SIZES, ALGORITHMS, PROFILES, NAMES, NAMES, mm_features(), st.data())
def test_prefix_hashes_are_a_prefix(
    tokens: list[int],
    bs: int,
    algo: str,
    profile: VllmHashProfile,
    lora: str | None,
    salt: str | None,
    features: tuple[MultiModalFeature, ...],
    data: st.DataObject,
) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(tokens)))
    scheme = _scheme(algo, bs, profile)
    features = _within(features, cut)  # the items of the shorter prompt, in both

    def request(prompt: list[int]) -> HashRequest:
        return HashRequest(
            prompt_token_ids=tuple(prompt), lora_name=lora, cache_salt=salt, mm_features=features
        )

    whole = hash_prompt(scheme, request(tokens))
    prefix = hash_prompt(scheme, request(tokens[:cut]))
    assert list(prefix) == list(whole[: len(prefix)])


@given(TOKENS, BLOCK_SIZES, ALGORITHMS, PROFILES, st.data())
def test_changing_a_token_changes_hashes_from_its_block_on(
    tokens: list[int], bs: int, algo: str, profile: VllmHashProfile, data: st.DataObject
) -> None:
    assume(len(tokens) >= bs)
    index = data.draw(st.integers(min_value=0, max_value=len(tokens) - 1))
    changed = list(tokens)
    changed[index] += 1
    scheme = _scheme(algo, bs, profile)
    before = hash_prompt(scheme, HashRequest(prompt_token_ids=tuple(tokens)))
    after = hash_prompt(scheme, HashRequest(prompt_token_ids=tuple(changed)))
    block = index // bs
    assert list(before[:block]) == list(after[:block])
    assert all(b != a for b, a in zip(before[block:], after[block:], strict=True))


@given(
    st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=40),
    ALGORITHMS,
    PROFILES,
    st.sampled_from(("lora", "salt", "mm")),
    st.text(min_size=1, max_size=5),
    st.text(min_size=1, max_size=5),
)
def test_extra_keys_separate_equal_tokens(
    tokens: list[int],
    algo: str,
    profile: VllmHashProfile,
    kind: str,
    first: str,
    second: str,
) -> None:
    assume(first != second)
    bs = len(tokens)
    scheme = _scheme(algo, bs, profile)

    def request(value: str) -> HashRequest:
        if kind == "lora":
            return HashRequest(prompt_token_ids=tuple(tokens), lora_name=value)
        if kind == "salt":
            return HashRequest(prompt_token_ids=tuple(tokens), cache_salt=value)
        feature = MultiModalFeature(identifier=value, offset=0, length=1)
        return HashRequest(prompt_token_ids=tuple(tokens), mm_features=(feature,))

    plain = hash_prompt(scheme, HashRequest(prompt_token_ids=tuple(tokens)))
    one, two = hash_prompt(scheme, request(first)), hash_prompt(scheme, request(second))
    assert len({plain[0], one[0], two[0]}) == 3


@given(st.binary(max_size=40), st.integers(min_value=0, max_value=2**32 - 1))
def test_group_id_packing_inverts(block_hash: bytes, group_id: int) -> None:
    key = make_block_hash_with_group_id(BlockHash(block_hash), group_id)
    assert len(key) == len(block_hash) + 4
    assert get_block_hash(key) == block_hash
    assert get_group_id(key) == group_id


@given(
    TOKENS,
    BLOCK_SIZES,
    ALGORITHMS,
    PROFILES,
    NAMES,
    NAMES,
    st.lists(st.lists(st.integers(min_value=0, max_value=999), max_size=20), max_size=6),
    mm_features(),
    st.data(),
)
def test_prompt_hashing_equals_step_by_step_extension(
    tokens: list[int],
    bs: int,
    algo: str,
    profile: VllmHashProfile,
    lora: str | None,
    salt: str | None,
    steps: list[list[int]],
    features: tuple[MultiModalFeature, ...],
    data: st.DataObject,
) -> None:
    # 0.26 resumes its multimodal scan at the last item, so there the equality
    # holds only without multimodal items (test_hash_units shows the divergence).
    if profile is VLLM_0_26:
        features = ()
    cut = data.draw(st.integers(min_value=0, max_value=len(tokens)))
    scheme = _scheme(algo, bs, profile)
    features = _within(features, cut)  # the prompt's items, inside the first cut tokens
    everything = tokens + [t for step in steps for t in step]

    def request(prompt: list[int]) -> HashRequest:
        return HashRequest(
            prompt_token_ids=tuple(prompt), lora_name=lora, cache_salt=salt, mm_features=features
        )

    whole = hash_prompt(scheme, request(everything))
    state = RequestBlockHashes.start(scheme, request(tokens[:cut]))
    for token in tokens[cut:]:
        state = state.append_output_token_ids(token)
    for step in steps:
        previous = state.block_hashes
        state = state.append_output_token_ids(step)
        assert list(state.block_hashes[: len(previous)]) == list(previous)
    assert list(state.block_hashes) == list(whole)


class _Id(int):
    """An int subclass (as an IntEnum would be): cbor2 writes it as the int."""


class _Text(str):
    """A str subclass: cbor2 writes it as the str."""


payloads = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.sampled_from((2**64 - 1, 2**64, -(2**64), -(2**64) - 1, 23, 24, 255, 256, -24, -25))
    | st.integers().map(_Id)
    | st.floats()
    | st.binary(max_size=300)
    | st.binary(max_size=30).map(bytearray)
    | st.text(max_size=300)
    | st.text(max_size=30).map(_Text),
    lambda children: st.lists(children, max_size=30) | st.tuples(children, children),
    max_leaves=40,
)


@given(payloads)
def test_cbor_encoder_equals_cbor2_canonical(value: object) -> None:
    assert canonical_cbor_dumps(value) == cbor2.dumps(value, canonical=True)
    assert sha256_cbor(value) == ORACLE["sha256_cbor"](value)
    assert kv_xxhash_cbor(value) == ORACLE["xxhash_cbor"](value)


@given(payloads)
def test_memoizing_cbor_encoder_equals_cbor2_canonical(value: object) -> None:
    memo: dict[int, bytes] = {}
    repeated = (value, value, [value])  # the same objects met again come from the memo
    assert canonical_cbor_dumps_memo(repeated, memo) == cbor2.dumps(repeated, canonical=True)
    assert canonical_cbor_dumps_memo(value, memo) == cbor2.dumps(value, canonical=True)


@given(payloads)
def test_pickle_path_equals_pickle_dumps(value: object) -> None:
    assert pickle_payload(value) == pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    assert sha256(value) == ORACLE["sha256"](value)
    assert kv_xxhash(value) == ORACLE["xxhash"](value)


@given(TOKENS, BLOCK_SIZES, ALGORITHMS, st.binary(min_size=1, max_size=32))
def test_chain_hasher_equals_repeated_hash_block_tokens(
    tokens: list[int], bs: int, algo: str, parent: bytes
) -> None:
    num_blocks = len(tokens) // bs
    keys: list[tuple[object, ...] | None] = [None if i % 2 else (i, "k") for i in range(num_blocks)]
    scheme = _scheme(algo, bs, VLLM_0_26)
    expected = []
    current = parent
    for i in range(num_blocks):
        current = hash_block_tokens(scheme, current, tokens[i * bs : (i + 1) * bs], keys[i])
        expected.append(current)
    assert hash_token_blocks(algo, parent, tokens, bs, keys) == expected
