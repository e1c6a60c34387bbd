"""A fleet: a workload split over N independent vLLM servers by a routing policy.

Each instance is its own exact KV cache manager with the same deployment
(:class:`kvpure.cache.workload_server.ServerRun`, the analyzer's concurrency
model per instance). Requests are routed one at a time, in admission order:

- ``round-robin``: request ``i`` goes to instance ``i mod N``;
- ``least-loaded``: to the instance with the fewest running requests, then
  the fewest KV cache blocks in use, then the lowest index;
- ``prefix-aware``: to the instance whose prefix cache holds the longest
  prefix of the request (the tokens its lookup would hit now, as llm-d's and
  Dynamo's KV-aware routers score instances), ties broken as least-loaded.

The instances share nothing; only the router reads their state. A round-robin
fleet's instances are therefore independent runs (each takes every N-th
request) and run as separate tasks; the other policies route on the state of
every instance and run as one task each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from kvpure.cache.request import CacheRequest
from kvpure.cache.setup import ReplayConfig
from kvpure.cache.workload_server import (
    ServerRun,
    WorkloadItem,
    check_length,
    make_request,
    needs_tokens,
)
from kvpure.errors import InvalidFieldError

__all__ = [
    "MAX_INSTANCES",
    "ROUTING_POLICIES",
    "FleetResult",
    "InstanceResult",
    "parse_routing",
    "run_fleet",
    "run_round_robin_instance",
]

ROUTING_POLICIES: Final = ("round-robin", "least-loaded", "prefix-aware")
MAX_INSTANCES: Final = 4096
"""Most instances one fleet may have."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceResult:
    """One instance's share of a fleet run."""

    requests: int
    num_unservable: int
    queries: int
    hits: int
    measured_requests: int
    request_hit_rate_total: float


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetResult:
    """A fleet run under one routing policy: every instance's counts."""

    policy: str
    instances: tuple[InstanceResult, ...]

    @property
    def queries(self) -> int:
        """Prompt tokens looked up, all instances together."""
        return sum(i.queries for i in self.instances)

    @property
    def hits(self) -> int:
        """Prompt tokens hit, all instances together."""
        return sum(i.hits for i in self.instances)

    @property
    def num_unservable(self) -> int:
        """Requests no instance could admit."""
        return sum(i.num_unservable for i in self.instances)

    @property
    def hit_rate(self) -> float:
        """Token-weighted: hits over queries of the whole fleet."""
        return self.hits / self.queries if self.queries else 0.0

    @property
    def mean_request_hit_rate(self) -> float:
        """aiperf's per-request average over every request of the fleet."""
        measured = sum(i.measured_requests for i in self.instances)
        total = sum(i.request_hit_rate_total for i in self.instances)
        return total / measured if measured else 0.0


def parse_routing(value: str) -> tuple[str, ...]:
    """``--routing``: one policy or a comma-separated list of them."""
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    for name in names:
        if name not in ROUTING_POLICIES:
            raise InvalidFieldError(
                field="--routing",
                value=name,
                reason=f"must be one of {', '.join(ROUTING_POLICIES)} (or a comma list)",
            )
    if not names:
        raise InvalidFieldError(field="--routing", value=value, reason="must name a policy")
    return names


def _instance(server: ServerRun) -> InstanceResult:
    return InstanceResult(
        requests=server.requests,
        num_unservable=server.unservable,
        queries=server.queries,
        hits=server.hits,
        measured_requests=server.measured,
        request_hit_rate_total=server.rate_total,
    )


def _load(server: ServerRun) -> tuple[int, int]:
    pool = server.engine.manager.block_pool
    return len(server.running), pool.num_gpu_blocks - pool.get_num_free_blocks()


def _route(policy: str, index: int, request: CacheRequest, servers: Sequence[ServerRun]) -> int:
    count = len(servers)
    if policy == "round-robin":
        return index % count
    if policy == "least-loaded":
        return min(range(count), key=lambda i: (*_load(servers[i]), i))
    return min(
        range(count),
        key=lambda i: (-servers[i].cached_prefix_tokens(request), *_load(servers[i]), i),
    )


def _check_instances(instances: int) -> None:
    if not 1 <= instances <= MAX_INSTANCES:
        raise InvalidFieldError(
            field="--instances", value=instances, reason=f"must be in [1, {MAX_INSTANCES}]"
        )


def run_fleet(
    requests: Iterable[WorkloadItem],
    config: ReplayConfig,
    max_num_seqs: int,
    instances: int,
    policy: str,
    progress: Callable[[int], None] | None = None,
) -> FleetResult:
    """``requests`` over ``instances`` servers of ``config``, routed by ``policy``."""
    _check_instances(instances)
    parse_routing(policy)
    servers = [ServerRun(config, max_num_seqs) for _ in range(instances)]
    scheme = servers[0].scheme
    size = config.hash_block_size
    for index, item in enumerate(requests):
        check_length(item, index, config.max_model_len)
        request = make_request(index, item, scheme, size, token_path=needs_tokens(config))
        if progress is not None:
            progress(1)
        servers[_route(policy, index, request, servers)].submit(index, item, request)
    return FleetResult(policy=policy, instances=tuple(_instance(s) for s in servers))


def run_round_robin_instance(
    requests: Iterable[WorkloadItem],
    config: ReplayConfig,
    max_num_seqs: int,
    instances: int,
    instance: int,
    progress: Callable[[int], None] | None = None,
) -> InstanceResult:
    """Instance ``instance`` of a round-robin fleet: every ``instances``-th request.

    The same counts as that instance's share of :func:`run_fleet`: under
    round-robin no instance's state changes another's requests.
    """
    _check_instances(instances)
    server = ServerRun(config, max_num_seqs)
    scheme = server.scheme
    size = config.hash_block_size
    for index, item in enumerate(requests):
        if progress is not None:
            progress(1)
        if index % instances != instance:
            continue
        check_length(item, index, config.max_model_len)
        request = make_request(index, item, scheme, size, token_path=needs_tokens(config))
        server.submit(index, item, request)
    return _instance(server)
