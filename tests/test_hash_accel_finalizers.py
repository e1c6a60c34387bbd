"""The C ``append_output_token_ids`` owns what it reads while it builds tuples (issue 24).

An allocation may run the garbage collector, and a finalizer may run any Python code:
here one empties the caller's list (dropping the last references to its token objects)
and another replaces the state's field, in the middle of the call. The call must give the
answer of the tokens it was given (the Python method's, with the extension off) and the
process must not crash. ``gc.set_threshold(1)`` makes nearly every allocation collect.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from kvpure.hashing import VLLM_0_33, HashRequest, HashScheme, RequestBlockHashes, accelerator

pytestmark = pytest.mark.skipif(not accelerator.available(), reason="extension not built")


@pytest.fixture(autouse=True)
def _gc_and_extension_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    was = accelerator.accelerated()
    yield
    gc.set_threshold(*thresholds)
    accelerator.set_enabled(was)


class _Finalizer:
    """Garbage in a reference cycle whose ``__del__`` runs ``action`` once collected."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cycle = self

    def __del__(self) -> None:
        self.action()


def _fresh_tokens(count: int) -> list[int]:
    # ints built at run time (not the interpreter's cached small ints), so that dropping
    # the list's references frees them
    return [int(str(100_000 + i * 7)) for i in range(count)]


def _python_answer(state: RequestBlockHashes, tokens: list[int]) -> RequestBlockHashes:
    accelerator.set_enabled(False)
    try:
        return state.append_output_token_ids(list(tokens))
    finally:
        accelerator.set_enabled(True)


@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"])
@pytest.mark.parametrize("count", [3, 5, 40])  # no new block, one block, several blocks
def test_a_finalizer_that_empties_the_list_changes_nothing(algo: str, count: int) -> None:
    scheme = HashScheme.from_seed(algorithm=algo, block_size=4, seed="0", profile=VLLM_0_33)
    state = RequestBlockHashes.start(scheme, HashRequest(prompt_token_ids=(1, 2, 3, 4, 5)))
    for round_ in range(3):  # the finalizer runs in the first round already; 3 vary the reuse
        tokens = _fresh_tokens(count)
        expected = _python_answer(state, tokens)
        values = list(tokens)

        def empty_and_churn(target: list[int] = tokens) -> None:
            target.clear()  # the list's token objects lose their last reference
            _fresh_tokens(64)  # and their memory is reused

        gc.collect()
        gc.set_threshold(1)
        _Finalizer(empty_and_churn)  # garbage now: collected at a coming allocation
        got = state.append_output_token_ids(tokens)
        gc.set_threshold(700, 10, 10)
        assert list(got.all_token_ids) == [1, 2, 3, 4, 5, *values], round_
        assert got.block_hashes == expected.block_hashes
        assert got == expected


def test_a_finalizer_that_replaces_the_state_changes_nothing() -> None:
    scheme = HashScheme.from_seed(algorithm="sha256", block_size=4, seed="0", profile=VLLM_0_33)
    other = RequestBlockHashes.start(scheme, HashRequest(prompt_token_ids=(9,)))
    for round_ in range(3):  # the finalizer runs in the first round already; 3 vary the reuse
        state = RequestBlockHashes.start(scheme, HashRequest(prompt_token_ids=(1, 2, 3, 4, 5)))
        tokens = _fresh_tokens(11)
        expected = _python_answer(state, tokens)
        replaced = _python_answer(other, tokens)

        def replace_state(target: RequestBlockHashes = state) -> None:
            # what no caller should do, and what must not crash the call under way
            object.__setattr__(target, "_state", other._state)

        gc.collect()
        gc.set_threshold(1)
        _Finalizer(replace_state)
        got = state.append_output_token_ids(tokens)
        gc.set_threshold(700, 10, 10)
        # the state read when the call began (or, had the finalizer run first, the new one)
        assert got in (expected, replaced), round_
