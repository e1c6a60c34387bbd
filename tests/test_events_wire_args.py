"""The wire functions' own argument checks, as an installed kvpure runs them.

In the tests beartype refuses a wrong argument type before the function body runs; an
installed kvpure has no beartype, so the body's checks are what a user meets. The
functions are called through ``inspect.unwrap`` to reach them (the decoders' checks are
in ``test_events_api_audit.py``, in a process without beartype: their helpers are
checked by beartype too).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from kvpure.events import (
    VLLM_0_26_EVENTS,
    BlockRemoved,
    KVEventArgumentTypeError,
    KVEventBatch,
    encode_batch,
    encode_event,
)

_REMOVED = BlockRemoved(block_hashes=(1,), medium="GPU")
_BATCH = KVEventBatch(ts=1.0, events=(_REMOVED,))

_CASES: dict[str, tuple[Callable[..., object], tuple[Any, ...], dict[str, Any]]] = {
    "encode_event profile": (encode_event, (_REMOVED,), {"profile": "vllm-0.26"}),
    "encode_batch profile": (encode_batch, (_BATCH,), {"profile": "vllm-0.26"}),
}


@pytest.mark.parametrize("case", _CASES)
def test_a_wrong_argument_is_a_typed_error_naming_it(case: str) -> None:
    function, args, kwargs = _CASES[case]
    argument = case.split()[1]
    with pytest.raises(KVEventArgumentTypeError) as info:
        inspect.unwrap(function)(*args, **kwargs)
    assert info.value.argument == argument
    assert str(info.value).startswith(f"{argument}: ")


def test_the_right_arguments_still_encode() -> None:
    raw = inspect.unwrap(encode_event)
    assert raw(_REMOVED, profile=VLLM_0_26_EVENTS) == encode_event(
        _REMOVED, profile=VLLM_0_26_EVENTS
    )
