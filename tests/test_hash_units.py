"""Unit tests of hashing: vLLM's corners, pickle identity, errors, views, events."""

from __future__ import annotations

import hashlib
import pickle

import pytest
from pyrsistent import pvector

from kvpure.errors import InvalidFieldError, KVPureValueError
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
    canonical_cbor_dumps,
    extra_keys_for_blocks,
    get_hash_fn_by_name,
    get_hash_profile,
    hash_block_tokens,
    hash_prompt,
    make_block_hash_with_group_id,
    none_hash_seed_from_environment,
    random_none_hash,
    resolve_block_hashes,
    to_event_extra_keys,
)
from kvpure.hashing.errors import (
    BlockSizeMismatchError,
    CborEncodeError,
    GroupIdOutOfRangeError,
    RandomNoneHashNotRequestedError,
    UnknownHashAlgorithmError,
    UnknownHashProfileError,
)


def _sha256_pickle(value: object) -> bytes:
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def _distinct(text: str) -> str:
    """An equal string that is a different object (built at run time)."""
    copy = "".join(list(text))
    assert copy == text
    assert copy is not text
    return copy


SCHEME_026 = HashScheme.from_seed(algorithm="sha256", block_size=4, seed="0", profile=VLLM_0_26)
SCHEME_033 = HashScheme.from_seed(algorithm="sha256", block_size=4, seed="0", profile=VLLM_0_33)
TOKENS = (11, 12, 13, 14, 15, 16, 17, 18)


# --- pickle memoizes repeated objects: kvpure keeps the caller's objects --------------


def test_same_identifier_object_twice_pickles_as_vllm_would() -> None:
    ident = _distinct("image-hash-1")
    features = (
        MultiModalFeature(identifier=ident, offset=0, length=1),
        MultiModalFeature(identifier=ident, offset=2, length=1),
    )
    got = hash_prompt(SCHEME_026, HashRequest(prompt_token_ids=TOKENS, mm_features=features))
    # vLLM's payload for block 0, built from the request's own objects.
    shared = _sha256_pickle((SCHEME_026.none_hash, TOKENS[:4], ((ident, 0), (ident, 2))))
    other = _distinct(ident)
    separate = _sha256_pickle((SCHEME_026.none_hash, TOKENS[:4], ((ident, 0), (other, 2))))
    assert shared != separate  # pickle wrote a memo reference for the shared object
    assert got[0] == shared


def test_equal_but_distinct_identifiers_pickle_as_vllm_would() -> None:
    first, second = _distinct("image-hash-1"), _distinct("image-hash-1")
    features = (
        MultiModalFeature(identifier=first, offset=0, length=1),
        MultiModalFeature(identifier=second, offset=2, length=1),
    )
    got = hash_prompt(SCHEME_026, HashRequest(prompt_token_ids=TOKENS, mm_features=features))
    assert got[0] == _sha256_pickle((SCHEME_026.none_hash, TOKENS[:4], ((first, 0), (second, 2))))


@pytest.mark.parametrize("same_object", [True, False])
def test_lora_name_equal_to_salt(same_object: bool) -> None:
    name = _distinct("tenant")
    salt = name if same_object else _distinct(name)
    request = HashRequest(prompt_token_ids=TOKENS, lora_name=name, cache_salt=salt)
    got = hash_prompt(SCHEME_026, request)
    assert got[0] == _sha256_pickle((SCHEME_026.none_hash, TOKENS[:4], (name, salt)))
    assert got[1] == _sha256_pickle((got[0], TOKENS[4:], (name,)))
    tagged = hash_prompt(SCHEME_033, request)
    assert tagged[0] == _sha256_pickle(
        (SCHEME_033.none_hash, TOKENS[:4], (("lora", name, ""), ("cache_salt", salt)))
    )


# --- vLLM's corners -----------------------------------------------------------------


def test_salt_only_on_first_block_and_only_if_truthy() -> None:
    keys = extra_keys_for_blocks(
        VLLM_0_26, HashRequest(prompt_token_ids=TOKENS, cache_salt="s"), 4, 0, 2
    )
    assert keys == [("s",), None]
    empty = HashRequest(prompt_token_ids=TOKENS, cache_salt="")
    assert extra_keys_for_blocks(VLLM_0_26, empty, 4, 0, 2) == [None, None]


def test_negative_relative_offsets_and_scan_rules() -> None:
    features = (
        MultiModalFeature(identifier="a", offset=2, length=10),  # tokens 2..11
        MultiModalFeature(identifier="b", offset=12, length=1),
    )
    request = HashRequest(prompt_token_ids=tuple(range(16)), mm_features=features)
    assert extra_keys_for_blocks(VLLM_0_26, request, 4, 0, 4) == [
        (("a", 2),),
        (("a", -2),),
        (("a", -6),),
        (("b", 0),),
    ]
    assert extra_keys_for_blocks(VLLM_0_33, request, 4, 0, 4) == [
        (("mm", "a", 2),),
        (("mm", "a", -2),),
        (("mm", "a", -6),),
        (("mm", "b", 0),),
    ]


def test_026_resumes_at_the_last_item_033_at_the_first_overlapping() -> None:
    # img_a covers tokens 30..34 and img_b 36..37; the prompt's full blocks end at 32.
    features = (
        MultiModalFeature(identifier="img_a", offset=30, length=5),
        MultiModalFeature(identifier="img_b", offset=36, length=2),
    )
    request = HashRequest(prompt_token_ids=tuple(range(40)), mm_features=features)
    from_start = extra_keys_for_blocks(VLLM_0_26, request, 16, 0, 3)
    assert from_start[2] == (("img_a", -2), ("img_b", 4))
    # Resuming at token 32 (after output tokens complete block 2), vLLM 0.26
    # starts at the last item and so misses img_a.
    assert extra_keys_for_blocks(VLLM_0_26, request, 16, 32, 1) == [(("img_b", 4),)]
    assert extra_keys_for_blocks(VLLM_0_33, request, 16, 32, 1) == [
        (("mm", "img_a", -2), ("mm", "img_b", 4))
    ]
    scheme = HashScheme.from_seed(algorithm="sha256", block_size=16, seed="0", profile=VLLM_0_26)
    state = RequestBlockHashes.start(scheme, request).append_output_token_ids(range(8))
    assert state.block_hashes[2] == _sha256_pickle(
        (state.block_hashes[1], tuple(range(32, 40)) + tuple(range(8)), (("img_b", 4),))
    )


def test_embedding_only_prompt_hashes_zeros_and_digests_of_rows() -> None:
    rows = bytes(range(24))  # 8 token rows of 3 bytes
    request = HashRequest(
        prompt_token_ids=None, prompt_embeds=PromptEmbeds(data=rows, row_size_bytes=3)
    )
    assert request.prompt_token_ids_for_hashing == (0,) * 8
    state = RequestBlockHashes.start(SCHEME_026, request)
    digest0 = hashlib.sha256(rows[:12]).digest()
    assert state.block_hashes[0] == _sha256_pickle((SCHEME_026.none_hash, (0, 0, 0, 0), (digest0,)))
    # Past the prompt the rows run out: vLLM slices the tensor and hashes what is left.
    state = state.append_output_token_ids([5, 6, 7, 8])
    empty = hashlib.sha256(b"").digest()
    assert state.block_hashes[2] == _sha256_pickle((state.block_hashes[1], (5, 6, 7, 8), (empty,)))


def test_extension_shares_the_old_vector_and_returns_it_when_no_block_fills() -> None:
    state = RequestBlockHashes.start(SCHEME_026, HashRequest(prompt_token_ids=TOKENS[:6]))
    assert len(state.block_hashes) == 1
    same = state.append_output_token_ids(1)
    assert same.block_hashes is state.block_hashes
    grown = same.append_output_token_ids(2)
    assert len(grown.block_hashes) == 2
    assert grown.block_hashes[0] == state.block_hashes[0]
    assert len(state.block_hashes) == 1  # the old value is unchanged


def test_event_extra_keys() -> None:
    keys = [
        (("lora", "n", "/p"), ("mm", "a", -2), ("cache_salt", "s"), ("prompt_embeds", b"d")),
        None,
    ]
    assert to_event_extra_keys(VLLM_0_33, keys) == ((("n", ("a", -2), "s", b"d")), None)
    assert to_event_extra_keys(VLLM_0_26, [("n",), None]) == (("n",), None)
    assert to_event_extra_keys(VLLM_0_33, []) is None


# --- schemes and NONE_HASH ----------------------------------------------------------


def test_unseeded_026_needs_an_explicit_random_request() -> None:
    with pytest.raises(RandomNoneHashNotRequestedError, match="--seed") as info:
        HashScheme.from_seed(algorithm="sha256", block_size=16, seed=None, profile=VLLM_0_26)
    assert isinstance(info.value, ValueError)
    scheme = HashScheme.from_seed(
        algorithm="xxhash", block_size=16, seed=None, profile=VLLM_0_26, random_none_hash=True
    )
    assert len(scheme.none_hash) == 32  # 0.26 uses os.urandom(32) itself


def test_random_none_hash_forms() -> None:
    entropy = bytes(32)
    assert random_none_hash("xxhash", VLLM_0_26, entropy=entropy) == entropy
    expected = get_hash_fn_by_name("xxhash")(entropy.hex())
    assert random_none_hash("xxhash", VLLM_0_33, entropy=entropy) == expected


def test_seed_comes_from_the_given_environment_only() -> None:
    assert none_hash_seed_from_environment({"PYTHONHASHSEED": "7"}) == "7"
    assert none_hash_seed_from_environment({}) is None


def test_unknown_names_are_typed_value_errors_listing_the_valid_ones() -> None:
    with pytest.raises(UnknownHashAlgorithmError) as info:
        get_hash_fn_by_name("md5")
    assert isinstance(info.value, ValueError)
    assert info.value.valid_names == ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
    assert "sha256_cbor" in str(info.value)
    with pytest.raises(UnknownHashAlgorithmError):
        HashScheme.from_seed(algorithm="md5", block_size=1, seed="0")
    with pytest.raises(UnknownHashProfileError, match=r"vllm-0\.33"):
        get_hash_profile("vllm-0.1")


def test_scheme_block_size_below_one() -> None:
    with pytest.raises(InvalidFieldError) as info:
        HashScheme.from_seed(algorithm="sha256", block_size=0, seed="0")
    assert info.value.field == "block_size"


def test_hash_block_tokens_without_a_none_hash() -> None:
    with pytest.raises(InvalidFieldError, match="none_hash"):
        hash_block_tokens(get_hash_fn_by_name("sha256"), None, [1, 2])


# --- request validation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("features", "field"),
    [
        (((5, 3), (6, 2)), "mm_features[1].offset"),  # overlapping
        (((10, 1), (2, 1)), "mm_features[1].offset"),  # out of order
    ],
)
def test_bad_mm_features(features: tuple[tuple[int, int], ...], field: str) -> None:
    items = tuple(MultiModalFeature(identifier="i", offset=o, length=n) for o, n in features)
    with pytest.raises(InvalidFieldError) as info:
        HashRequest(prompt_token_ids=tuple(range(20)), mm_features=items)
    assert info.value.field == field


@pytest.mark.parametrize(("offset", "length", "field"), [(-1, 2, "offset"), (0, 0, "length")])
def test_bad_mm_feature_values(offset: int, length: int, field: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        MultiModalFeature(identifier="i", offset=offset, length=length)
    assert info.value.field == f"mm_features.{field}"


def test_bad_embeddings() -> None:
    with pytest.raises(InvalidFieldError) as info:
        PromptEmbeds(data=bytes(10), row_size_bytes=4)
    assert info.value.field == "prompt_embeds.data"
    with pytest.raises(InvalidFieldError, match="row"):
        PromptEmbeds(data=b"", row_size_bytes=0)
    with pytest.raises(InvalidFieldError) as info:
        HashRequest(
            prompt_token_ids=(1, 2, 3), prompt_embeds=PromptEmbeds(data=bytes(8), row_size_bytes=4)
        )
    assert info.value.field == "prompt_embeds"
    with pytest.raises(InvalidFieldError):
        HashRequest(prompt_token_ids=None)


# --- group ids, views, CBOR errors ----------------------------------------------------


@pytest.mark.parametrize("group_id", [-1, 2**32])
def test_group_id_out_of_range(group_id: int) -> None:
    with pytest.raises(GroupIdOutOfRangeError) as info:
        make_block_hash_with_group_id(BlockHash(b"h"), group_id)
    assert isinstance(info.value, OverflowError)
    assert isinstance(info.value, KVPureValueError)
    assert pickle.loads(pickle.dumps(info.value)).group_id == group_id


def test_resolve_block_hashes_rules() -> None:
    raw = pvector(BlockHash(bytes([i])) for i in range(8))
    assert resolve_block_hashes(raw, 16, 16) is raw
    view = resolve_block_hashes(raw, 16, 64)
    assert isinstance(view, BlockHashListWithBlockSize)
    assert view.scale_factor == 4
    assert list(view) == [raw[3], raw[7]]
    assert resolve_block_hashes(view, 16, 64) is view
    with pytest.raises(BlockSizeMismatchError, match="scale factor 4"):
        resolve_block_hashes(view, 16, 32)
    fine = resolve_block_hashes(
        raw, 16, 64, supports_fine_grained_hash_lookup=True, alignment_tokens=16
    )
    assert fine is raw
    with pytest.raises(BlockSizeMismatchError) as info:
        resolve_block_hashes(raw, 16, 40)
    assert isinstance(info.value, ValueError)
    assert (info.value.hash_block_size, info.value.block_size) == (16, 40)
    with pytest.raises(BlockSizeMismatchError):
        BlockHashListWithBlockSize(raw, 16, 24)
    with pytest.raises(InvalidFieldError):
        resolve_block_hashes(raw, 0, 16)


def test_view_indexing_follows_vllm() -> None:
    raw = [BlockHash(bytes([i])) for i in range(9)]
    view = BlockHashListWithBlockSize(raw, 1, 2)
    assert len(view) == 4
    assert view[-1] == raw[-1]  # vLLM's formula: ((-1) + 1) * 2 - 1
    assert view[1:] == (raw[3], raw[5], raw[7])
    with pytest.raises(IndexError):
        view[4]
    with pytest.raises(TypeError):
        view["0"]  # type: ignore[call-overload]  # wrong on purpose


def test_cbor_refuses_what_cbor2_cannot_encode_or_payloads_never_hold() -> None:
    with pytest.raises(CborEncodeError, match="frozenset"):
        canonical_cbor_dumps((frozenset({1}),))
    with pytest.raises(CborEncodeError, match="UTF-8"):
        canonical_cbor_dumps("\ud800")  # cbor2 raises UnicodeEncodeError here


def test_cbor_floats_are_shortest_form() -> None:
    # RFC 8949 examples: 1.5 fits a half float, 100000.0 a single, 1.1 needs a double
    assert canonical_cbor_dumps((1.5, 100000.0)) == bytes.fromhex("82f93e00fa47c35000")
    assert canonical_cbor_dumps(1.1) == bytes.fromhex("fb3ff199999999999a")
    assert canonical_cbor_dumps(float("nan")) == bytes.fromhex("f97e00")
