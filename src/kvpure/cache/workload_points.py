"""Several pools over one pass of a workload: :func:`run_workload_points`.

A memory sweep replays the same workload on pools of different sizes. Each
pool is its own server (:class:`~kvpure.cache.workload_server.ServerRun`) and
sees exactly the requests, in the order, that :func:`~kvpure.cache.workload.run_workload`
would give it, so each result is that function's; what the pools share is the
work that does not depend on the pool: the workload is read once, and a
hash-id trace request's block keys are derived once for every pool of the same
hash block size (the manager only reads them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kvpure.cache.gc_pace import replay_gc_pace
from kvpure.cache.hash_trace import TraceRequest, derived_block_hashes
from kvpure.cache.request import CacheRequest
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.workload import RunResult, result_of
from kvpure.cache.workload_server import (
    DerivedRequest,
    ServerRun,
    WorkloadItem,
    check_length,
    check_trace_block_size,
    make_request,
    needs_tokens,
)
from kvpure.errors import KVPureError
from kvpure.hashing import BlockHash

__all__ = ["run_workload_points"]


def _request(
    index: int, item: WorkloadItem, server: ServerRun, keys: dict[int, list[BlockHash]]
) -> CacheRequest:
    config = server.config
    size = config.hash_block_size
    check_length(item, index, config.max_model_len)
    if isinstance(item, TraceRequest) and server.scheme is not None and not needs_tokens(config):
        check_trace_block_size(item, size)
        hashes = keys.get(size)
        if hashes is None:
            hashes = keys[size] = derived_block_hashes(item, size)
        return DerivedRequest(
            request_id=str(index), block_hashes=hashes, num_tokens=item.input_length
        )
    return make_request(index, item, server.scheme, size, token_path=needs_tokens(config))


def run_workload_points(
    requests: Iterable[WorkloadItem],
    configs: Sequence[ReplayConfig],
    max_num_seqs: int,
    progress: Callable[[int], None] | None = None,
) -> list[RunResult | KVPureError]:
    """``run_workload(requests, config, max_num_seqs)`` for each config, in one pass.

    A run that raises a :class:`~kvpure.errors.KVPureError` gives that error as its
    result and takes no further request; the others go on. ``progress`` is called
    with the number of runs that took each request.
    """
    servers = [ServerRun(config, max_num_seqs) for config in configs]
    outcomes: list[RunResult | KVPureError | None] = [None] * len(servers)
    with replay_gc_pace():
        for index, item in enumerate(requests):
            keys: dict[int, list[BlockHash]] = {}
            took = 0
            for at, server in enumerate(servers):
                if outcomes[at] is not None:
                    continue
                try:
                    request = _request(index, item, server, keys)
                    server.submit(index, item, request)
                except KVPureError as err:
                    outcomes[at] = err
                took += 1
            if progress is not None and took:
                progress(took)
    return [
        result_of(server) if outcome is None else outcome
        for server, outcome in zip(servers, outcomes, strict=True)
    ]
