"""The C accelerator gives the pure-Python path's digests, for every input it handles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpure.hashing import accelerator
from kvpure.hashing.block_hasher import hash_token_blocks as reference

pytestmark = pytest.mark.skipif(not accelerator.available(), reason="extension not built")

ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
TOKENS = st.one_of(
    st.integers(0, 300_000),
    st.sampled_from([0, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -1, -(2**63), 2**80]),
    st.integers(-(2**70), 2**70),
)
ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=40),
    st.sampled_from(["mm", "lora", "", "a"]),
)
KEYS = st.one_of(
    st.none(), st.lists(st.one_of(ATOMS, st.tuples(ATOMS, ATOMS)), max_size=4).map(tuple)
)


@settings(max_examples=300, deadline=None)
@given(
    algo=st.sampled_from(ALGORITHMS),
    block_size=st.integers(1, 40),
    num_blocks=st.integers(0, 5),
    data=st.data(),
    native=st.booleans(),
)
def test_same_digests_as_python(
    algo: str, block_size: int, num_blocks: int, data: st.DataObject, native: bool
) -> None:
    tokens = data.draw(
        st.lists(TOKENS, min_size=block_size * num_blocks, max_size=block_size * num_blocks + 3)
    )
    extras = data.draw(st.lists(KEYS, min_size=num_blocks, max_size=num_blocks))
    parent = data.draw(st.binary(min_size=1, max_size=40))
    accelerator.set_native_xxhash(native)
    got = accelerator.hash_prompt_blocks(algo, parent, tokens, block_size, extras)
    if got is not None:
        assert got == reference(algo, parent, tokens, block_size, extras)


# Every width boundary of CBOR (24, 2**8, 2**16, 2**32) and of pickle's BININT1 / BININT2 /
# BININT / LONG1, on both sides, negatives and one-digit/two-digit CPython ints included.
WIDTH_EDGES = [
    edge + delta
    for edge in (0, 24, 2**8, 2**16, 2**30, 2**31, 2**32, 2**63 - 1)
    for delta in (-1, 0, 1)
    if 0 <= edge + delta < 2**63
]
WIDTH_EDGES += [-value - 1 for value in WIDTH_EDGES] + [-(2**63)]


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_int_width_edges(algo: str) -> None:
    # the C encoder itself, also in the run that switches the extension off elsewhere
    was_on = accelerator.accelerated()
    accelerator.set_enabled(True)
    try:
        for block_size in (1, 3, 16):
            tokens = WIDTH_EDGES * block_size
            tokens = tokens[: len(tokens) - len(tokens) % block_size]
            extras = [(token,) for token in tokens[::block_size]]
            got = accelerator.hash_prompt_blocks(algo, b"\x01" * 32, tokens, block_size, extras)
            assert got is not None
            assert got == reference(algo, b"\x01" * 32, tokens, block_size, extras)
    finally:
        accelerator.set_enabled(was_on)


# The laid-out chain (token ids in [0, 2**30), no lookahead) in every token-item encoder the
# CPU runs: each item width's edges, block sizes around the 8-id vector step.
SMALL_EDGES = [0, 1, 23, 24, 25, 255, 256, 257, 65535, 65536, 65537, 2**24, 2**30 - 1]
SMALL_TOKENS = st.one_of(st.sampled_from(SMALL_EDGES), st.integers(0, 2**30 - 1))


@settings(max_examples=200, deadline=None)
@given(
    algo=st.sampled_from(ALGORITHMS),
    block_size=st.sampled_from([1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 24, 64, 300]),
    num_blocks=st.integers(1, 4),
    data=st.data(),
)
def test_token_item_versions_agree(
    algo: str, block_size: int, num_blocks: int, data: st.DataObject
) -> None:
    tokens = data.draw(
        st.lists(SMALL_TOKENS, min_size=block_size * num_blocks, max_size=block_size * num_blocks)
    )
    extras = data.draw(st.lists(KEYS, min_size=num_blocks, max_size=num_blocks))
    parent = data.draw(st.binary(min_size=1, max_size=300))
    expected = reference(algo, parent, tokens, block_size, extras)
    was_on = accelerator.accelerated()
    accelerator.set_enabled(True)
    sha_ni = accelerator.sha_route() == "sha-ni"
    try:
        for version in accelerator.token_items_versions():
            for native in (True, False):  # SHA-NI or OpenSSL; libxxhash or the xxhash package
                accelerator.set_sha_ni(native)
                accelerator.set_native_xxhash(native)
                assert accelerator.set_token_items(version) == version
                got = accelerator.hash_prompt_blocks(algo, parent, tokens, block_size, extras)
                assert got is None or got == expected, (version, native)
    finally:
        accelerator.set_token_items(None)
        accelerator.set_sha_ni(sha_ni)
        accelerator.set_native_xxhash(True)
        accelerator.set_enabled(was_on)


def test_token_item_versions() -> None:
    versions = accelerator.token_items_versions()
    assert versions[0] == "scalar"
    assert accelerator.set_token_items(None) == versions[-1]
    assert accelerator.set_token_items("no-such-version") == versions[-1]


def test_uniform_blocks_match_the_list_form() -> None:
    # hash_prompt's entry for prompts without multimodal items: block 0's keys, then one
    # object for every later block; the token ids may run past the last block
    was_on = accelerator.accelerated()
    accelerator.set_enabled(True)  # make unit's rerun switched the extension off
    try:
        uniform = accelerator.compiled_hash_uniform_blocks()
        assert uniform is not None
        tokens = list(range(70_000, 70_000 + 16 * 5 + 7))
        for algo in ALGORITHMS:
            for first, rest in ((None, None), (("lora", "salt"), ("lora",)), (("salt",), None)):
                extras = [first] + [rest] * 4
                got = uniform(algo, b"\x02" * 32, tokens, 16, 5, first, rest)
                assert got == reference(algo, b"\x02" * 32, tokens, 16, extras)
            assert uniform(algo, b"\x02" * 32, tokens, 16, 0, None, None) == []
            assert uniform(algo, b"\x02" * 32, tokens, 16, 6, None, None) is None  # too few
    finally:
        accelerator.set_enabled(was_on)


def test_sha_routes_agree() -> None:
    route, was_on = accelerator.sha_route(), accelerator.accelerated()
    tokens = [t * 7919 % 128_256 for t in range(16 * 64)]
    accelerator.set_enabled(True)
    try:
        for algo in ("sha256", "sha256_cbor"):
            expected = reference(algo, b"\x03" * 32, tokens, 16, [None] * 64)
            for native in (True, False):
                accelerator.set_sha_ni(native)
                got = accelerator.hash_prompt_blocks(algo, b"\x03" * 32, tokens, 16, [None] * 64)
                assert got == expected
    finally:
        accelerator.set_sha_ni(route == "sha-ni")
        accelerator.set_enabled(was_on)


# The laid-out chain lays out block i + 4 while it hashes block i, in a ring of 8 block slots
# (src/kvpure/hashing/csrc/prelaid.c; with SHA-NI in two halves up to 64 ids a block, one
# piece above): prompts of 1 to 20 blocks (the ring wraps from 9 on),
# with a partial tail, blocks of unequal lengths (each its own extra keys, so each slot's
# body ends elsewhere) and a token the lay-out does not take at every position, found while
# earlier blocks are already hashed (the general path then hashes the whole prompt).
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_pipelined_lay_out_keeps_block_order(algo: str) -> None:
    was_on, sha_ni = accelerator.accelerated(), accelerator.sha_route() == "sha-ni"
    accelerator.set_enabled(True)
    try:
        for native in (True, False):  # SHA-NI or OpenSSL; libxxhash or the xxhash package
            accelerator.set_sha_ni(native)
            accelerator.set_native_xxhash(native)
            for block_size in (1, 5, 16, 65):
                for num_blocks in range(1, 21):
                    tokens = [(i * 7919 + num_blocks) % 131_072 for i in range(block_size * 21)]
                    tokens = tokens[: block_size * num_blocks + block_size // 2]
                    extras = [("k" * (i % 5),) if i % 3 else None for i in range(num_blocks)]
                    parent = bytes(range(num_blocks, num_blocks + 32))
                    expected = reference(algo, parent, tokens, block_size, extras)
                    for sequence in (tokens, tuple(tokens)):
                        got = accelerator.hash_prompt_blocks(
                            algo, parent, sequence, block_size, extras
                        )
                        assert got == expected, (native, block_size, num_blocks)
                    bad = list(tokens)
                    at = (num_blocks - 1) * block_size + block_size // 2  # in the last block
                    for value in (2**30, -1):
                        bad[at] = value
                        got = accelerator.hash_prompt_blocks(algo, parent, bad, block_size, extras)
                        assert got == reference(algo, parent, bad, block_size, extras)
    finally:
        accelerator.set_sha_ni(sha_ni)
        accelerator.set_native_xxhash(True)
        accelerator.set_enabled(was_on)
