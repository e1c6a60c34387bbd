"""The hashing API refuses bad input with a typed error naming the argument (issue 24).

Each case runs in a fresh interpreter without the suite's beartype hook (a user's
process; ``tools/api_fuzz.py`` is the wider sweep): the call must raise an error under
:class:`kvpure.errors.KVPureError` whose message names the field. The good calls beside
them must still work, with the values vLLM gives (digest sizes, group ids).
"""

from __future__ import annotations

import pytest

from tests.api_audit_runner import run_cases

SETUP = """
from kvpure import *
from kvpure import hashing
H32 = b'\\x01' * 32
SCHEME = HashScheme.from_seed(algorithm='sha256', block_size=4, seed='0', profile=VLLM_0_34)
REQ = HashRequest(prompt_token_ids=tuple(range(10)))
def state():
    return RequestBlockHashes.start(SCHEME, REQ)
"""

BAD: tuple[tuple[str, str], ...] = (
    # -- the group-id helpers
    ("get_block_hash(None)", "key"),
    ("get_block_hash(3)", "key"),
    ("get_block_hash('abcdef')", "key"),
    ("get_group_id(1.5)", "key"),
    ("get_group_id(b'ab')", "key"),
    ("make_block_hash_with_group_id(None, 0)", "block_hash"),
    ("make_block_hash_with_group_id('abc', 0)", "block_hash"),
    ("make_block_hash_with_group_id(H32, True)", "group_id"),
    ("make_block_hash_with_group_id(H32, 1.5)", "group_id"),
    ("make_block_hash_with_group_id(H32, '3')", "group_id"),
    ("make_block_hash_with_group_id(H32, -1)", "group_id"),
    ("make_block_hash_with_group_id(H32, 2**200)", "group_id"),
    ("maybe_convert_block_hash(None)", "block_hash"),
    ("maybe_convert_block_hash([b'x'])", "block_hash"),
    ("maybe_convert_block_hash(H32, use_int_block_hashes=1)", "use_int_block_hashes"),
    ("maybe_convert_block_hash(H32, use_int_block_hashes=None)", "use_int_block_hashes"),
    # -- one block
    ("hash_block_tokens(None, None, [1, 2])", "hash_fn_or_scheme"),
    ("hash_block_tokens(3, None, [1, 2])", "hash_fn_or_scheme"),
    ("hash_block_tokens(SCHEME, 3, [1, 2])", "parent_block_hash"),
    ("hash_block_tokens(SCHEME, 'abc', [1, 2])", "parent_block_hash"),
    ("hash_block_tokens(SCHEME, None, None)", "curr_block_token_ids"),
    ("hash_block_tokens(SCHEME, None, 3)", "curr_block_token_ids"),
    ("hash_block_tokens(SCHEME, None, 'abc')", "curr_block_token_ids"),
    ("hash_block_tokens(SCHEME, None, b'ab')", "curr_block_token_ids"),
    ("hash_block_tokens(SCHEME, None, [True])", "curr_block_token_ids[0]"),
    ("hash_block_tokens(SCHEME, None, [1, -1])", "curr_block_token_ids[1]"),
    ("hash_block_tokens(SCHEME, None, [1.5])", "curr_block_token_ids[0]"),
    ("hash_block_tokens(SCHEME, None, [None])", "curr_block_token_ids[0]"),
    ("hash_block_tokens(SCHEME, None, [2**200])", "curr_block_token_ids[0]"),  # 0.34: int32
    ("hash_block_tokens(SCHEME, None, [1], 3)", "extra_keys"),
    ("hash_block_tokens(SCHEME, None, [1], 'salt')", "extra_keys"),
    ("hash_block_tokens(hashing.get_hash_fn_by_name('sha256'), None, [1])", "none_hash"),
    # -- the chain hashers
    ("hashing.hash_token_blocks('md5', H32, [1, 2], 2, [None])", "md5"),
    ("hashing.hash_token_blocks('sha256', None, [1, 2], 2, [None])", "parent"),
    ("hashing.hash_token_blocks('sha256', H32, [1, 2], 0, [None])", "block_size"),
    ("hashing.hash_token_blocks('sha256', H32, [1, 2], True, [None])", "block_size"),
    ("hashing.hash_token_blocks('sha256', H32, [1, 2], 2**200, [None])", "block_size"),
    ("hashing.hash_token_blocks('sha256', H32, [1.5, 2], 2, [None])", "token_ids[0]"),
    ("hashing.hash_token_blocks('sha256', H32, [1, 2], 2, None)", "extra_keys"),
    ("hashing.hash_token_blocks('sha256', H32, [1, 2], 2, [3])", "extra_keys[0]"),
    ("hashing.fast_hash_token_blocks('sha256', None, [1, 2], 2, [None])", "parent"),
    ("hashing.fast_hash_token_blocks('sha256', H32, None, 2, [None])", "token_ids"),
    ("hashing.fast_hash_token_blocks('sha256', H32, [1, 2], 1.5, [None])", "block_size"),
    ("hashing.fast_hash_token_blocks('sha256', H32, [1, 2], 2, None)", "extra_keys"),
    # -- a prompt and a request's state
    ("hash_prompt(None, REQ)", "scheme"),
    ("hash_prompt('sha256', REQ)", "scheme"),
    ("hash_prompt(SCHEME, None)", "request"),
    ("hash_prompt(SCHEME, [1, 2, 3])", "request"),
    ("RequestBlockHashes.start(None, REQ)", "scheme"),
    ("RequestBlockHashes.start(SCHEME, object())", "request"),
    ("state().append_output_token_ids(None)", "token_ids"),
    ("state().append_output_token_ids(object())", "token_ids"),
    ("state().append_output_token_ids({1: 2})", "token_ids"),
    ("state().append_output_token_ids({1, 2})", "token_ids"),
    ("state().append_output_token_ids(True)", "token_ids"),
    ("state().append_output_token_ids(-1)", "token_ids"),
    ("state().append_output_token_ids(1.5)", "token_ids"),
    ("state().append_output_token_ids([1, None])", "token_ids[1]"),
    ("hashing.block_extra_keys(SCHEME, REQ, -1)", "num_tokens"),
    ("hashing.block_extra_keys(None, REQ, 4)", "scheme"),
    # -- values
    ("HashAlgorithm('md5')", "md5"),
    ("HashAlgorithm(None)", "None"),
    (
        "HashScheme.from_seed(algorithm='sha256', block_size=4, seed='0', random_none_hash=1)",
        "random_none_hash",
    ),
    ("MultiModalFeature(identifier='i', offset=True, length=2)", "offset"),
    ("MultiModalFeature(identifier='i', offset=0, length=2**200)", "length"),
    ("PromptEmbeds(data=b'ab', row_size_bytes=True)", "row_size_bytes"),
    ("BlockHashListWithBlockSize(None, 16, 32)", "block_hashes"),
    ("BlockHashListWithBlockSize('xy', 16, 32)", "block_hashes"),
    ("BlockHashListWithBlockSize([3], 16, 32)", "block_hashes[0]"),
    ("BlockHashListWithBlockSize([H32], 16, 2**200)", "target_block_size"),
    ("BlockHashListWithBlockSize([H32, H32], 16, 32)[None]", "idx"),
    ("BlockHashListWithBlockSize([H32, H32], 16, 32)[1.5]", "idx"),
    ("BlockHashListWithBlockSize([H32, H32], 16, 32)[True]", "idx"),
    ("BlockHashListWithBlockSize([H32, H32], 16, 32)[1]", "idx"),
    ("BlockHashListWithBlockSize([H32, H32], 16, 32)[2**200]", "idx"),
    ("hashing.extend_block_hashes(None, REQ, [1, 2, 3, 4], hashing.NO_BLOCK_HASHES)", "scheme"),
    ("hashing.extend_block_hashes(SCHEME, REQ, None, hashing.NO_BLOCK_HASHES)", "all_token_ids"),
    ("hashing.extend_block_hashes(SCHEME, REQ, [1, 2, 3, 4], None)", "block_hashes"),
    ("hashing.extend_block_hashes(SCHEME, REQ, [1, 2, 3, 4], [])", "block_hashes"),
    ("hashing.random_none_hash('sha256', None)", "profile"),
    ("hashing.random_none_hash('sha256', VLLM_0_26, entropy='x')", "entropy"),
    ("hashing.none_hash_seed_from_environment(3)", "environ"),
    ("hashing.none_hash_seed_from_environment({'PYTHONHASHSEED': 0})", "PYTHONHASHSEED"),
    # -- the frontend helpers
    ("hashing.truncate_block_hashes(None, 4, 4)", "block_hashes"),
    ("hashing.truncate_block_hashes([3], 4, 4)", "block_hashes[0]"),
    ("hashing.truncate_block_hashes([H32], 2**200, 4)", "num_prompt_tokens"),
    ("hashing.num_frontend_block_hashes(4, hash_block_size=2**200)", "hash_block_size"),
    ("hashing.frontend_block_hashes([H32], 4, 'scheme')", "scheme"),
    ("hashing.frontend_block_hashes([H32, 3], 8, SCHEME)", "block_hashes[1]"),
)

GOOD: tuple[tuple[str, str], ...] = (
    ("len(hash_block_tokens(SCHEME, None, [1, 2, 3, 4]))", "32"),
    ("len(hash_block_tokens(SCHEME, H32, (1, 2, 3, 4), ('salt',)))", "32"),
    ("len(hash_prompt(SCHEME, REQ))", "2"),
    ("len(state().append_output_token_ids([1, 2]).block_hashes)", "3"),
    ("len(state().append_output_token_ids(7).all_token_ids)", "11"),
    ("len(state().append_output_token_ids(range(6)).block_hashes)", "4"),
    ("get_group_id(make_block_hash_with_group_id(H32, 7))", "7"),
    ("get_block_hash(make_block_hash_with_group_id(H32, 7)) == H32", "True"),
    ("maybe_convert_block_hash(H32) == int.from_bytes(H32[-8:], 'big')", "True"),
    ("BlockHashListWithBlockSize([H32, b'\\x02' * 32], 16, 32)[-1] == b'\\x02' * 32", "True"),
    ("HashAlgorithm('xxhash') is HashAlgorithm.XXHASH", "True"),
    ("len(hashing.truncate_block_hashes([H32, H32], 4, 4))", "1"),
    ("len(hashing.hash_token_blocks('sha256', H32, [1, 2], 2, [None]))", "1"),
    ("len(hashing.fast_hash_token_blocks('xxhash', H32, (1, 2), 2, (None,)))", "1"),
    (
        "len(hashing.extend_block_hashes(SCHEME, REQ, list(range(12)), hashing.NO_BLOCK_HASHES))",
        "3",
    ),
    ("hashing.none_hash_seed_from_environment({'PYTHONHASHSEED': '7'})", "'7'"),
)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[str, str, str]]:
    return run_cases(SETUP, [source for source, _ in BAD + GOOD])


@pytest.mark.parametrize(("source", "field"), BAD)
def test_a_bad_argument_is_a_typed_error_naming_it(
    outcomes: dict[str, tuple[str, str, str]], source: str, field: str
) -> None:
    outcome, kind, message = outcomes[source]
    assert outcome == "typed", f"{source}: {outcome} {kind}: {message}"
    assert field in message, f"{source}: {kind}: {message}"


@pytest.mark.parametrize(("source", "value"), GOOD)
def test_good_arguments_still_work(
    outcomes: dict[str, tuple[str, str, str]], source: str, value: str
) -> None:
    outcome, _kind, text = outcomes[source]
    assert (outcome, text) == ("accepted", value), f"{source}: {outcome} {text}"
