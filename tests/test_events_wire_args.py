"""The wire functions' own argument checks, as an installed kvpure runs them, and when
decoding pauses the garbage collector.

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

import msgspec
import pytest

from kvpure.events import (
    VLLM_0_26_EVENTS,
    BlockRemoved,
    KVEventArgumentTypeError,
    KVEventBatch,
    decode_batch,
    encode_batch,
    encode_event,
    wire,
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


class _Collector:
    """Stands in for the ``gc`` module inside ``kvpure.events.wire``: records the pauses."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def isenabled(self) -> bool:
        return True

    def disable(self) -> None:
        self.calls.append("disable")

    def enable(self) -> None:
        self.calls.append("enable")


def test_only_payloads_from_gc_pause_bytes_on_pause_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``GC_PAUSE_BYTES`` (64 KiB, its docstring): a payload below it is decoded without
    touching the collector, one of that size or more with the collector paused and then
    turned back on (``test_events_unknown.py`` checks the real collector)."""
    collector = _Collector()
    monkeypatch.setattr(wire, "gc", collector)
    small = msgspec.msgpack.encode([1.0, [], 0])
    assert decode_batch(small) == KVEventBatch(ts=1.0, events=(), data_parallel_rank=0)
    assert collector.calls == []
    pad = "x" * (1 << 16)  # an unknown batch element: skipped, so the batch is the same
    large = msgspec.msgpack.encode([1.0, [], 0, pad])
    assert len(large) >= 1 << 16
    decode_batch(large)
    assert collector.calls[:2] == ["disable", "enable"]
