"""The fast prompt hasher against an independent oracle: cbor2 / pickle, block by block.

The oracle is vLLM's method written out: for each block, ``(parent, tuple(tokens),
extra)`` serialised by ``cbor2.dumps(canonical=True)`` or ``pickle.dumps(protocol=5)`` and
hashed by hashlib.sha256 or xxhash.xxh3_128_digest, the digest becoming the next parent.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence

import cbor2
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from kvpure.errors import InvalidFieldError
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.cbor import canonical_cbor_dumps
from kvpure.hashing.cbor_tails import (
    CBOR2_MIN_BLOCK_SIZE,
    _encode_extra,
    _is_plain_key,
    cbor_tails,
)
from kvpure.hashing.errors import CborEncodeError, UnknownHashAlgorithmError
from kvpure.hashing.fast_encoding import (
    cbor_token_items,
    encode_token_blocks,
    exact_int31_records,
)
from kvpure.hashing.fast_prompt import (
    block_payloads,
    fast_hash_token_blocks,
    one_block_hasher,
    reference_payload,
)

ALGOS = sorted(HASH_ALGORITHM_NAMES)


def oracle_payload(algo: str, parent: bytes, tokens: Sequence[object], extra: object) -> bytes:
    payload = (parent, tuple(tokens), extra)
    if algo.endswith("_cbor"):
        return bytes(cbor2.dumps(payload, canonical=True))
    return pickle.dumps(payload, protocol=5)


def oracle_digest(algo: str, data: bytes) -> bytes:
    if algo.startswith("sha256"):
        return hashlib.sha256(data).digest()
    return xxhash.xxh3_128_digest(data)


def oracle_chain(
    algo: str, parent: bytes, tokens: Sequence[int], block_size: int, extras: Sequence[object]
) -> list[bytes]:
    out = []
    for index, extra in enumerate(extras):
        block = tokens[index * block_size : (index + 1) * block_size]
        parent = oracle_digest(algo, oracle_payload(algo, parent, block, extra))
        out.append(parent)
    return out


# --- strategies ----------------------------------------------------------------------------

# Shared objects, so that one payload can hold the very same object twice (pickle then
# writes a memo reference instead of a second copy).
SHARED: list[object] = ["sql-lora", b"\x07" * 32, "salt-1", ("img-a", 0), "x" * 300]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=40),
    st.sampled_from(SHARED),
)
extra_values = st.recursive(
    scalars,
    lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=3).map(tuple),
    max_leaves=6,
)
extra_keys_of_block = st.one_of(st.none(), st.lists(extra_values, max_size=4).map(tuple))

small_ids = st.integers(min_value=0, max_value=300)
vocab_ids = st.integers(min_value=0, max_value=262_143)
any_ids = st.one_of(st.integers(), st.integers(min_value=-(2**33), max_value=2**33))
token_lists = st.one_of(
    st.lists(vocab_ids, max_size=160),
    st.lists(small_ids, max_size=80),
    st.lists(st.one_of(vocab_ids, any_ids), max_size=80),
    st.lists(any_ids, max_size=40),
)
parents = st.one_of(
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=16, max_size=16),
    st.binary(max_size=300),
)


@st.composite
def prompts(draw: st.DrawFn) -> tuple[bytes, list[int], int, list[tuple[object, ...] | None]]:
    tokens = draw(token_lists)
    block_size = draw(st.one_of(st.integers(1, 5), st.integers(1, 40), st.sampled_from([16, 64])))
    num_blocks = draw(st.integers(0, len(tokens) // block_size))
    extras = draw(st.lists(extra_keys_of_block, min_size=num_blocks, max_size=num_blocks))
    return draw(parents), tokens, block_size, extras


# --- properties ----------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
@given(case=prompts())
def test_hash_token_blocks_equals_per_block_oracle(
    algo: str, case: tuple[bytes, list[int], int, list[tuple[object, ...] | None]]
) -> None:
    parent, tokens, block_size, extras = case
    expected = oracle_chain(algo, parent, tokens, block_size, extras)
    assert fast_hash_token_blocks(algo, parent, tokens, block_size, extras) == expected


@pytest.mark.parametrize("algo", ALGOS)
@given(
    tokens=st.one_of(
        st.lists(vocab_ids, min_size=49, max_size=400),
        st.lists(st.integers(-(2**31), 2**31 - 1), min_size=49, max_size=200),
        st.lists(st.one_of(vocab_ids, any_ids), min_size=49, max_size=200),
    ),
    block_size=st.integers(1, 40),
    data=st.data(),
)
def test_long_prompts_equal_the_oracle(
    algo: str, tokens: list[int], block_size: int, data: st.DataObject
) -> None:
    num_blocks = len(tokens) // block_size
    extras = data.draw(st.lists(extra_keys_of_block, min_size=num_blocks, max_size=num_blocks))
    parent = data.draw(parents)
    expected = oracle_chain(algo, parent, tokens, block_size, extras)
    assert fast_hash_token_blocks(algo, parent, tokens, block_size, extras) == expected


@pytest.mark.parametrize("algo", ALGOS)
@given(case=prompts(), data=st.data())
def test_block_payloads_are_the_oracle_bytes(
    algo: str,
    case: tuple[bytes, list[int], int, list[tuple[object, ...] | None]],
    data: st.DataObject,
) -> None:
    _, tokens, block_size, extras = case
    block_parents = data.draw(st.lists(parents, min_size=len(extras), max_size=len(extras)))
    got = block_payloads(algo, block_parents, tokens, block_size, extras)
    expected = [
        oracle_payload(algo, p, tokens[i * block_size : (i + 1) * block_size], e)
        for i, (p, e) in enumerate(zip(block_parents, extras, strict=True))
    ]
    assert got == expected


@given(
    tokens=st.lists(st.one_of(st.integers(), st.booleans()), max_size=20), extra=extra_keys_of_block
)
@pytest.mark.parametrize("algo", ALGOS)
def test_reference_payload_equals_oracle(
    algo: str, tokens: list[int], extra: tuple[object, ...] | None
) -> None:
    parent = b"\x01" * 32
    assert reference_payload(algo, parent, tokens, extra) == oracle_payload(
        algo, parent, tokens, extra
    )


@pytest.mark.parametrize("algo", ALGOS)
@given(tokens=st.lists(vocab_ids, min_size=64, max_size=64), extra=extra_keys_of_block)
def test_prompt_at_once_equals_block_by_block(
    algo: str, tokens: list[int], extra: tuple[object, ...] | None
) -> None:
    extras = [extra, None, extra, None]
    parent = hashlib.sha256(b"none").digest()
    whole = fast_hash_token_blocks(algo, parent, tokens, 16, extras)
    stepwise: list[bytes] = []
    for index, key in enumerate(extras):
        previous = stepwise[-1] if stepwise else parent
        block = tokens[index * 16 : (index + 1) * 16]
        stepwise += fast_hash_token_blocks(algo, previous, block, 16, [key])
    assert whole == stepwise


# --- corners -------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ALGOS)
def test_parent_object_inside_the_extra_keys(algo: str) -> None:
    parent = hashlib.sha256(b"p").digest()
    tokens = list(range(1000, 1064))
    extras: list[tuple[object, ...] | None] = [(parent, "a"), (parent,), None, ("a", "a")]
    assert fast_hash_token_blocks(algo, parent, tokens, 16, extras) == oracle_chain(
        algo, parent, tokens, 16, extras
    )
    payloads = block_payloads(algo, [parent] * 4, tokens, 16, extras)
    assert payloads == [
        oracle_payload(algo, parent, tokens[i * 16 : (i + 1) * 16], e) for i, e in enumerate(extras)
    ]
    if not algo.endswith("_cbor"):
        assert b"h\x00" in payloads[0]  # BINGET 0: pickle referenced the parent


@pytest.mark.parametrize("algo", ALGOS)
def test_token_tuple_object_inside_the_extra_keys(algo: str) -> None:
    tokens = tuple(range(70_000, 70_016))
    extras: list[tuple[object, ...] | None] = [(tokens,)]
    parent = b"\x00" * 32
    assert fast_hash_token_blocks(algo, parent, tokens, 16, extras) == oracle_chain(
        algo, parent, tokens, 16, extras
    )


@pytest.mark.parametrize("algo", ALGOS)
def test_bool_tokens_hash_as_bools(algo: str) -> None:
    tokens = [1, True, 0, False] * 8
    parent = b"\x02" * 32
    got = fast_hash_token_blocks(algo, parent, tokens, 4, [None] * 8)
    assert got == oracle_chain(algo, parent, tokens, 4, [None] * 8)
    assert got != fast_hash_token_blocks(algo, parent, [1, 1, 0, 0] * 8, 4, [None] * 8)


@pytest.mark.parametrize("algo", ["sha256", "xxhash"])
def test_pickles_larger_than_one_frame(algo: str) -> None:
    tokens = list(range(2**20, 2**20 + 60_000))  # 5 bytes each: 100 kB per block, 2 frames
    extras = [None, ("big", b"\x09" * 70_000), None]
    parent = b"\x03" * 32
    assert fast_hash_token_blocks(algo, parent, tokens, 20_000, extras) == oracle_chain(
        algo, parent, tokens, 20_000, extras
    )


@pytest.mark.parametrize("algo", ALGOS)
def test_no_blocks_and_extra_tokens(algo: str) -> None:
    assert fast_hash_token_blocks(algo, b"p", [1, 2, 3], 16, []) == []
    tokens = list(range(40))  # 2 full blocks used, 8 tokens left over
    assert fast_hash_token_blocks(algo, b"p", tokens, 16, [None, None]) == oracle_chain(
        algo, b"p", tokens, 16, [None, None]
    )


def test_errors_name_the_field() -> None:
    with pytest.raises(UnknownHashAlgorithmError) as unknown:
        fast_hash_token_blocks("md5", b"p", [1], 1, [None])
    assert unknown.value.name == "md5"
    with pytest.raises(InvalidFieldError) as zero:
        fast_hash_token_blocks("sha256", b"p", [1], 0, [None])
    assert zero.value.field == "block_size"
    with pytest.raises(InvalidFieldError) as short:
        fast_hash_token_blocks("sha256", b"p", [1, 2, 3], 2, [None, None])
    assert short.value.field == "token_ids"
    assert "2 blocks of 2 tokens need 4 token ids" in str(short.value)
    with pytest.raises(InvalidFieldError) as parents_count:
        block_payloads("sha256", [b"p"], [1, 2], 1, [None, None])
    assert parents_count.value.field == "parents"


@pytest.mark.parametrize(
    ("block_size", "num_blocks"),
    [(16, 4), (16, 1), (CBOR2_MIN_BLOCK_SIZE, 2), (CBOR2_MIN_BLOCK_SIZE, 1), (256, 1)],
)
def test_cbor_rejects_what_it_cannot_encode(block_size: int, num_blocks: int) -> None:
    # cbor2 could encode a frozenset; kvpure's encoder cannot, on every path alike
    tokens = list(range(block_size * num_blocks))
    with pytest.raises(CborEncodeError) as err:
        fast_hash_token_blocks(
            "sha256_cbor", b"p", tokens, block_size, [(frozenset({1}),)] * num_blocks
        )
    assert err.value.type_name == "frozenset"


def test_pickle_takes_any_picklable_extra_keys() -> None:
    # pickle serialises any picklable object, exactly as vLLM would
    extras = [(frozenset({1}),), None]
    assert fast_hash_token_blocks("sha256", b"p", list(range(32)), 16, extras) == oracle_chain(
        "sha256", b"p", list(range(32)), 16, extras
    )


@given(
    tokens=st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=2**31 - 1),
            st.integers(min_value=0, max_value=300),
            st.integers(min_value=2**31 - 2, max_value=2**32 + 1),
        ),
        min_size=1,
        max_size=120,
    ),
    block_size=st.integers(1, 60),
    as_tuple=st.booleans(),
)
def test_cbor_token_encoder_matches_cbor2_item_by_item(
    tokens: list[int], block_size: int, as_tuple: bool
) -> None:
    tokens = tokens[: len(tokens) // block_size * block_size]
    got = encode_token_blocks(tuple(tokens) if as_tuple else tokens, block_size)
    if not tokens or max(tokens) >= 2**31:  # its domain: exact ints in [0, 2**31)
        assert got is None
        return
    assert got == [
        b"".join(cbor2.dumps(t) for t in tokens[i : i + block_size])
        for i in range(0, len(tokens), block_size)
    ]


class _MyInt(int):
    pass


def test_token_encoder_leaves_out_of_range_ids_to_the_reference() -> None:
    assert encode_token_blocks([1, 2**31], 1) is None
    assert encode_token_blocks([1, True], 1) is None
    assert encode_token_blocks([1, False], 1) is None
    assert encode_token_blocks([1, _MyInt(5)], 1) is None
    assert encode_token_blocks([1, -1], 1) is None
    assert encode_token_blocks([1, -(2**31)], 1) is None
    assert encode_token_blocks([], 1) is None
    assert encode_token_blocks([1, 2, 3], 2) is None  # not whole blocks
    assert encode_token_blocks([0, 23, 24, 255, 256, 65535, 65536, 2**31 - 1], 2) == [
        b"\x00\x17",
        b"\x18\x18\x18\xff",
        b"\x19\x01\x00\x19\xff\xff",
        b"\x1a\x00\x01\x00\x00\x1a\x7f\xff\xff\xff",
    ]


@given(
    tokens=st.lists(
        st.one_of(
            st.integers(0, 2**31 - 1),
            st.integers(2**31 - 3, 2**31 + 3),
            st.booleans(),
            st.builds(_MyInt, st.integers(0, 1000)),
        ),
        max_size=40,
    )
)
def test_exact_int31_records_accepts_exact_ints_in_range_only(tokens: list[int]) -> None:
    records = exact_int31_records(tokens)
    if all(type(t) is int and 0 <= t < 2**31 for t in tokens):
        assert records is not None
        assert records[5:] == b"".join(b"i" + t.to_bytes(4, "little") for t in tokens)
    else:
        assert records is None


@pytest.mark.parametrize("algo", ALGOS)
def test_the_same_extra_keys_object_in_many_blocks(algo: str) -> None:
    name = "lora-x"
    shared: tuple[object, ...] = (name, ("img", 3))
    equal_but_distinct: tuple[object, ...] = (True, 1.0)  # == (1, 1): must not share a cache entry
    extras: list[tuple[object, ...] | None] = [
        shared,
        shared,
        None,
        (name, ("img", 3)),
        (1, 1),
        equal_but_distinct,
        shared,
        (name, name),
    ]
    tokens = list(range(65_530, 65_530 + 16 * len(extras)))
    parent = b"\x05" * 32
    assert fast_hash_token_blocks(algo, parent, tokens, 16, extras) == oracle_chain(
        algo, parent, tokens, 16, extras
    )


@pytest.mark.parametrize("algo", ALGOS)
@given(
    tokens=st.one_of(st.lists(vocab_ids, min_size=1, max_size=40), token_lists),
    extra=extra_keys_of_block,
    parent=parents,
)
def test_one_block_hasher_equals_the_oracle(
    algo: str, tokens: list[int], extra: tuple[object, ...] | None, parent: bytes
) -> None:
    block_size = max(1, len(tokens))
    hasher = one_block_hasher(algo, block_size, extra)
    block = tokens[:block_size]
    expected = oracle_chain(algo, parent, block, len(block), [extra]) if block else None
    if expected is not None:
        assert hasher(parent, block) == expected[0]
        assert hasher(parent, tuple(block)) == expected[0]


@given(
    tokens=st.lists(
        st.one_of(vocab_ids, st.integers(2**18 - 3, 2**18 + 3), any_ids, st.booleans()),
        max_size=40,
    )
)
def test_cbor_token_items_equal_cbor2_or_refuse(tokens: list[int]) -> None:
    got = cbor_token_items(tokens)
    if all(type(t) is int and 0 <= t < 2**32 for t in tokens):
        assert got == b"".join(cbor2.dumps(t) for t in tokens)
    else:
        assert got is None


# --- big blocks: cbor2's token arrays ---------------------------------------------------


@pytest.mark.parametrize("algo", ["sha256_cbor", "xxhash_cbor"])
@given(
    tokens=st.one_of(
        st.lists(vocab_ids, min_size=128, max_size=700),
        st.lists(st.one_of(vocab_ids, any_ids, st.booleans()), min_size=128, max_size=400),
    ),
    block_size=st.integers(CBOR2_MIN_BLOCK_SIZE, 300),
    data=st.data(),
)
def test_big_blocks_equal_the_oracle_through_either_token_encoder(
    algo: str, tokens: list[int], block_size: int, data: st.DataObject
) -> None:
    num_blocks = len(tokens) // block_size
    extras = tuple(
        data.draw(st.lists(extra_keys_of_block, min_size=num_blocks, max_size=num_blocks))
    )
    parent = data.draw(st.binary(min_size=32, max_size=32))
    expected = oracle_chain(algo, parent, tokens, block_size, extras)
    assert fast_hash_token_blocks(algo, parent, tokens, block_size, extras) == expected
    # Both token encoders give every block's payload tail exactly as cbor2 writes it.
    with_cbor2 = cbor_tails(tokens, block_size, extras, use_cbor2=True)
    assert with_cbor2 is not None
    for index, tail in enumerate(with_cbor2):
        block = tuple(tokens[index * block_size : (index + 1) * block_size])
        want = cbor2.dumps(block, canonical=True) + cbor2.dumps(extras[index], canonical=True)
        assert tail == want
    without = cbor_tails(tokens, block_size, extras, use_cbor2=False)
    if without is not None:  # kvpure's own encoder: plain ids in [0, 2**32) only
        assert without == with_cbor2


# --- extra keys: cbor2 for the plain ones, kvpure's encoder for the rest -------------------


def _plain_by_definition(value: object) -> bool:
    if type(value) is tuple:
        return all(_plain_by_definition(item) for item in value)
    return type(value) in (str, int, bytes)


@given(value=st.one_of(extra_values, extra_keys_of_block))
def test_extra_keys_encoding_equals_the_reference_and_cbor2(value: object) -> None:
    assert _is_plain_key(value) == _plain_by_definition(value)
    expected = cbor2.dumps(value, canonical=True)
    assert canonical_cbor_dumps(value) == expected
    assert _encode_extra(value, {}) == expected


def test_extra_keys_kvpure_cannot_encode_raise_its_error_though_cbor2_could() -> None:
    value = ("lora", frozenset({1}))
    assert not _is_plain_key(value)
    assert cbor2.dumps(value, canonical=True)  # vLLM's encoder takes a set; kvpure's refuses
    with pytest.raises(CborEncodeError):
        _encode_extra(value, {})
