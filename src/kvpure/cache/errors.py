"""Errors of the prefix cache and its trace replay.

Each leaf sits under kvpure's root and also under the stdlib exception vLLM
raises (or, where vLLM asserts, ``ValueError``); the inputs are attributes.
"""

from __future__ import annotations

from kvpure.errors import KVPureNotImplementedError, KVPureRuntimeError, KVPureValueError

__all__ = [
    "CacheStateError",
    "ManagerRefusedError",
    "TraceFieldError",
    "UnboundedPoolTooLargeError",
    "UnknownRequestError",
    "UnsupportedTraceError",
]


class TraceFieldError(KVPureValueError):
    """A field of a cache-replay trace is missing, of the wrong kind, or out of range.

    ``field`` is its dotted path in the trace (``ops[3].token_ids``), ``value``
    what was given and ``reason`` what is expected.
    """

    def __init__(self, *, field: str, value: object, reason: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field}: {reason} (got {shown})")
        self.field = field
        self.value = value
        self.reason = reason


class UnknownRequestError(TraceFieldError):
    """An op names a request that never arrived, already finished, or arrives twice."""

    def __init__(self, *, field: str, request_id: str, reason: str) -> None:
        super().__init__(field=field, value=request_id, reason=reason)
        self.request_id = request_id


class UnsupportedTraceError(KVPureNotImplementedError):
    """The trace asks for something the replay does not model (``feature``), and why."""

    def __init__(self, *, feature: str, reason: str) -> None:
        super().__init__(f"{feature}: {reason}")
        self.feature = feature
        self.reason = reason


class CacheStateError(KVPureRuntimeError):
    """A cache operation was called in a state where vLLM would fail an assertion.

    ``operation`` names the call, ``reason`` what was wrong.
    """

    def __init__(self, *, operation: str, reason: str) -> None:
        super().__init__(f"{operation}: {reason}")
        self.operation = operation
        self.reason = reason


class ManagerRefusedError(KVPureValueError):
    """vLLM refuses to build the KV cache manager for this configuration (an assertion of
    the release's manager; reported as ``ValueError``). ``reason`` is vLLM's message."""

    def __init__(self, *, feature: str, reason: str) -> None:
        super().__init__(f"{feature}: {reason}")
        self.feature = feature
        self.reason = reason


class UnboundedPoolTooLargeError(KVPureValueError):
    """The workload is too large for the no-eviction replay behind the unbounded hit figure.

    A deployment the seen-hash count does not cover (sliding windows, Mamba,
    several KV cache groups) counts the unbounded hits by replaying the
    workload on a pool holding every block it ever computes;
    ``num_blocks`` such blocks exceed the ``limit`` the replay builds.
    ``num_requests`` and ``prompt_tokens`` size the workload.
    """

    def __init__(
        self, *, num_requests: int, prompt_tokens: int, num_blocks: int, limit: int
    ) -> None:
        fitting = max(1, num_requests * limit // num_blocks)
        super().__init__(
            f"workload: {num_requests:,} requests ({prompt_tokens:,} prompt tokens) need a "
            f"no-eviction pool of {num_blocks:,} blocks for the unbounded hit count of this "
            f"model, more than the replay builds (at most {limit:,} blocks); analyze fewer "
            f"requests (about {fitting:,} or fewer) or split the workload"
        )
        self.num_requests = num_requests
        self.prompt_tokens = prompt_tokens
        self.num_blocks = num_blocks
        self.limit = limit
