"""The fleet runs in ``kvpure cache``'s report (text and ``--json``): hits per routing policy."""

from __future__ import annotations

from typing import Any

from kvpure.cache.workload import WorkloadReport

__all__ = ["fleet_to_json", "format_fleet"]


def fleet_to_json(report: WorkloadReport) -> dict[str, Any] | None:
    """The fleet's figures per policy (None without ``--instances``)."""
    if not report.fleet:
        return None
    return {
        "instances": report.instances,
        "policies": [
            {
                "routing": run.policy,
                "prefix_cache_queries": run.queries,
                "prefix_cache_hits": run.hits,
                "hit_rate": round(run.hit_rate, 6),
                "mean_request_hit_rate": round(run.mean_request_hit_rate, 6),
                "num_unservable": run.num_unservable,
                "requests_per_instance": [i.requests for i in run.instances],
            }
            for run in report.fleet
        ],
    }


def format_fleet(report: WorkloadReport) -> str:
    """Lines comparing the routing policies ('' without ``--instances``)."""
    if not report.fleet:
        return ""
    lines = [
        f"fleet of {report.instances} instances, each this pool (hit rate token-weighted; "
        "per-request average):"
    ]
    for run in report.fleet:
        busiest = max(i.requests for i in run.instances)
        lines.append(
            f"  {run.policy:<13} {run.hits:>14,} of {run.queries:,} tokens "
            f"({run.hit_rate:.1%}; {run.mean_request_hit_rate:.1%}), "
            f"busiest instance {busiest:,} requests"
        )
    return "\n".join(lines)
