"""A fleet of N exact managers in ``kvpure cache --instances N --routing ...``.

The claims, by hand (Llama 3 8B, block size 16, a hit capped at
``num_tokens - 1`` tokens in whole blocks):
- prefix-aware routing sends a request to the instance holding its prefix:
  A, A', B, B' (A' repeats A, B' repeats B, 64 tokens each) over 2 instances
  hit 48 + 48 tokens, where round-robin splits each pair and hits nothing;
- one instance is the single server, whatever the policy;
- a round-robin instance run alone (each a task of the process pool) gives the
  counts it has inside the whole fleet;
- ``--jobs`` gives the serial report; bad options are one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache.fleet import (
    ROUTING_POLICIES,
    parse_routing,
    run_fleet,
    run_round_robin_instance,
)
from kvpure.cache.workload import WorkloadRequest, replay_config, run_workload
from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples" / "llama3_8b.json"
LAYOUT = model_layout(parse_model_config(json.loads(LLAMA.read_text(encoding="utf-8"))))
CONFIG = replay_config(LAYOUT, Deployment(kv_cache_memory_bytes=2**30, max_model_len=512))
A = tuple(range(1, 65))
B = tuple(range(1001, 1065))


def _requests(*prompts: tuple[int, ...]) -> tuple[WorkloadRequest, ...]:
    return tuple(WorkloadRequest(prompt_token_ids=p, output_len=4) for p in prompts)


def test_prefix_aware_routing_follows_the_cached_prefix() -> None:
    workload = _requests(A, A, B, B)
    aware = run_fleet(workload, CONFIG, 256, 2, "prefix-aware")
    spread = run_fleet(workload, CONFIG, 256, 2, "round-robin")
    assert aware.hits == 48 + 48
    assert [i.requests for i in aware.instances] == [2, 2]
    assert spread.hits == 0
    assert aware.queries == spread.queries == 4 * 64
    assert aware.mean_request_hit_rate == pytest.approx((0 + 0.75 + 0 + 0.75) / 4)


def test_least_loaded_goes_to_the_instance_with_fewer_running_requests() -> None:
    # A, then B to the empty instance, then A again: both have one running; the tie is
    # broken by blocks in use (equal) then the lowest index, where A is cached
    least = run_fleet(_requests(A, B, A), CONFIG, 256, 2, "least-loaded")
    assert [i.requests for i in least.instances] == [2, 1]
    assert least.hits == 48


@pytest.mark.parametrize("policy", ROUTING_POLICIES)
def test_one_instance_is_the_single_server(policy: str) -> None:
    workload = _requests(A, B, A, B[:40], A[:20])
    fleet = run_fleet(workload, CONFIG, 2, 1, policy)
    single = run_workload(workload, CONFIG, 2)
    assert (fleet.queries, fleet.hits) == (single.queries, single.hits)
    assert fleet.mean_request_hit_rate == single.mean_request_hit_rate


def test_round_robin_instances_alone_give_their_share_of_the_fleet() -> None:
    workload = _requests(A, B, A, B, A[:40], B[:33], A, B)
    fleet = run_fleet(workload, CONFIG, 256, 3, "round-robin")
    alone = tuple(run_round_robin_instance(workload, CONFIG, 256, 3, i) for i in range(3))
    assert fleet.instances == alone
    assert fleet.hits > 0


def test_bad_routing_is_named() -> None:
    assert parse_routing("prefix-aware, round-robin") == ("prefix-aware", "round-robin")
    with pytest.raises(InvalidFieldError, match="--routing"):
        parse_routing("random")


def _cli(tmp_path: Path, *args: str) -> list[str]:
    path = tmp_path / "w.jsonl"
    lines = [{"prompt_token_ids": list(p), "output_len": 4} for p in (A, A, B, B, A)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return [
        "cache", str(path), "--model", str(LLAMA), "--kv-cache-memory", "1GiB",
        "--max-model-len", "512", "--instances", "2", *args,
    ]  # fmt: skip


def _json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, Any]:
    assert main(args) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    data.pop("peak_rss_bytes")
    return data


def test_the_cli_reports_each_policy_and_jobs_change_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    serial = _json(capsys, _cli(tmp_path, "--json"))
    fleet = serial["fleet"]
    assert fleet["instances"] == 2
    assert [p["routing"] for p in fleet["policies"]] == list(ROUTING_POLICIES)
    aware = fleet["policies"][2]
    assert aware["prefix_cache_hits"] == 48 * 3
    assert aware["requests_per_instance"] == [3, 2]
    assert _json(capsys, [*_cli(tmp_path, "--json"), "--jobs", "3"]) == serial
    assert main(_cli(tmp_path, "--routing", "prefix-aware")) == 0
    out = capsys.readouterr().out
    assert "fleet of 2 instances" in out
    assert "prefix-aware" in out
    assert "round-robin" not in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [(("--routing", "nearest"), "--routing"), (("--instances", "0"), "--instances")],
)
def test_bad_fleet_options_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    assert main([*_cli(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert needle in err
