"""``kvpure.cache.workload`` called directly: the manager configuration it builds, its
defaults and its per-request average.

Expected values:

- vLLM 0.26 ``EngineArgs._get_default_max_num_seqs_and_batched_tokens``
  (``vllm/engine/arg_utils.py``): 256 sequences on GPUs under 70 GiB (and A100s), the
  figure ``kvpure cache`` takes when ``--max-num-seqs`` is not given;
- the concurrency model (the module's docstring, docs/formats.md): whole prompts in one
  step, so a server whose ``max_num_batched_tokens`` is under the model length is
  planned with the model length (vLLM's scheduler would chunk the prompt; the replay
  admits it whole), and one step at a time: a deployment that leaves async scheduling
  unset is planned as ``--no-async-scheduling`` (vLLM 0.34 would turn it on for Llama);
- the release: the ``vllm_version`` argument, else the deployment's own;
- aiperf's per-request hit rate: the mean over the measured requests of each request's
  hits over its queries.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.cache.errors import UnsupportedTraceError
from kvpure.cache.workload import (
    CONCURRENCY_MODEL,
    DEFAULT_MAX_NUM_SEQS,
    RunResult,
    WorkloadReport,
    WorkloadRequest,
    analyze_workload,
    replay_config,
    run_workload,
    short_prefix_tokens,
    unbounded_run,
    workload_totals,
)
from kvpure.errors import KVPureError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.versions import UnknownVllmVersionError

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples/llama3_8b.json"
LAYOUT = model_layout(parse_model_config(json.loads(LLAMA.read_text())))


def _deployment(**fields: object) -> Deployment:
    base: dict[str, object] = {"kv_cache_memory_bytes": 2**30, "max_model_len": 1024}
    base.update(fields)
    return Deployment(**base)  # type: ignore[arg-type]  # the fields of one test each


def test_the_default_concurrency_is_vllms_for_gpus_under_70_gib() -> None:
    assert DEFAULT_MAX_NUM_SEQS == 256


def test_an_unset_async_scheduling_is_planned_off_and_a_set_one_refused() -> None:
    for version in ("0.26", "0.34"):
        config = replay_config(LAYOUT, _deployment(vllm_version=version))
        assert config.rules.vllm_version == version
        config = replay_config(LAYOUT, _deployment(async_scheduling=False, vllm_version=version))
        assert config.rules.vllm_version == version
    with pytest.raises(UnsupportedTraceError, match="async_scheduling"):
        replay_config(LAYOUT, _deployment(async_scheduling=True))


def test_a_batch_under_the_model_length_is_raised_to_it() -> None:
    config = replay_config(LAYOUT, _deployment(max_num_batched_tokens=256))
    assert config.max_num_batched_tokens == 1024
    assert config.max_model_len == 1024
    config = replay_config(LAYOUT, _deployment(max_num_batched_tokens=4096))
    assert config.max_num_batched_tokens == 4096


def test_the_release_is_the_argument_else_the_deployments() -> None:
    assert replay_config(LAYOUT, _deployment(vllm_version="0.26")).rules.vllm_version == "0.26"
    assert replay_config(LAYOUT, _deployment(), "0.26.0").rules.vllm_version == "0.26"
    assert (
        replay_config(LAYOUT, _deployment(vllm_version="0.26"), "0.34").rules.vllm_version == "0.34"
    )
    with pytest.raises(UnknownVllmVersionError, match="--vllm") as error:
        replay_config(LAYOUT, _deployment(), "0.1")
    assert error.value.field == "--vllm"  # the flag the CLI passes it from


def _result(**fields: object) -> RunResult:
    base: dict[str, object] = {
        "num_blocks": 10,
        "block_size": 16,
        "hash_block_size": 16,
        "enable_caching": True,
        "num_requests": 3,
        "num_unservable": 0,
        "queries": 0,
        "hits": 0,
    }
    base.update(fields)
    return RunResult(**base)  # type: ignore[arg-type]  # the fields of one test each


def test_the_per_request_hit_rate_is_the_mean_of_each_requests_rate() -> None:
    # two measured requests: one hit 3 of 4 tokens, the other none of 4
    result = _result(queries=8, hits=3, measured_requests=2, request_hit_rate_total=0.75)
    assert result.mean_request_hit_rate == 0.375
    assert result.hit_rate == 3 / 8
    assert _result().mean_request_hit_rate == 0.0
    assert _result().hit_rate == 0.0
    assert _result().measured_requests == 0
    assert _result().top_prefixes == ()


def test_a_report_without_a_fleet_counts_one_server() -> None:
    run = _result(queries=8, hits=3)
    report = WorkloadReport(
        num_requests=3,
        prompt_tokens=8,
        max_num_seqs=256,
        actual=run,
        unbounded=_result(queries=8, hits=5),
        short_prefix_requests=0,
        short_prefix_tokens=0,
    )
    assert report.instances == 1
    assert report.fleet == ()
    assert report.hits_lost_to_eviction == 2


# The workloads below, by hand from vLLM's rules (as tests/test_cache_workload.py): Llama 3
# 8B at block size 16, a hit capped at num_tokens - 1 tokens in whole blocks, freed blocks
# appended to the free queue's tail in reverse (the tail block is evicted first).
A = tuple(range(1, 65))
B = tuple(range(1001, 1065))


def _requests(*prompts: tuple[int, ...], output_len: int = 1) -> tuple[WorkloadRequest, ...]:
    return tuple(WorkloadRequest(prompt_token_ids=p, output_len=output_len) for p in prompts)


def test_run_workload_counts_the_admitting_lookups_and_calls_progress_per_request() -> None:
    config = replay_config(LAYOUT, _deployment(vllm_version="0.26"))
    calls: list[int] = []
    result = run_workload(_requests(A, A, B), config, DEFAULT_MAX_NUM_SEQS, calls.append)
    assert calls == [1, 1, 1]
    assert (result.num_requests, result.num_unservable) == (3, 0)
    assert (result.queries, result.hits) == (192, 48)
    assert result.measured_requests == 3
    assert result.mean_request_hit_rate == pytest.approx(0.75 / 3)
    assert result.block_size == result.hash_block_size == 16
    assert result.enable_caching
    assert result.num_blocks == config.kv_cache_config.num_blocks
    assert result.top_prefixes[0].length == 48  # the one prefix hit: 48 tokens of A


def test_the_token_path_gives_the_same_counts() -> None:
    config = replay_config(LAYOUT, _deployment())
    fast = run_workload(_requests(A, A, B, A), config, 2)
    slow = run_workload(_requests(A, A, B, A), config, 2, token_path=True)
    assert (fast.queries, fast.hits) == (slow.queries, slow.hits) == (256, 96)


def test_a_prompt_longer_than_the_model_is_refused_by_index() -> None:
    config = replay_config(LAYOUT, _deployment(max_model_len=64))
    with pytest.raises(KVPureError, match="1"):
        run_workload(_requests(A[:10], A + A), config, 4)


def test_eviction_loses_hits_the_unbounded_run_keeps() -> None:
    # 5 usable blocks: A takes 4, B waits for A to finish and takes the never-used block
    # and A's last three (tail first); A again finds only its first block.
    requests = _requests(A, B, A)
    deployment = _deployment(num_gpu_blocks_override=6, max_model_len=80, vllm_version="0.26")
    for replayed in (False, True):
        report = analyze_workload(
            requests,
            LAYOUT,
            deployment,
            unbounded=unbounded_run(requests, LAYOUT, deployment, replayed=replayed),
        )
        assert report.actual.hits == 16
        assert report.unbounded.hits == 48
        assert report.hits_lost_to_eviction == 32
        assert report.unbounded.num_requests == 3
        assert report.unbounded.queries == 192
        assert report.prompt_tokens == 192
        assert report.num_requests == 3
        assert report.max_num_seqs == DEFAULT_MAX_NUM_SEQS
    fresh = analyze_workload(requests, LAYOUT, deployment, 1)
    assert (fresh.actual.hits, fresh.unbounded.hits, fresh.max_num_seqs) == (16, 48, 1)


def test_the_unbounded_pool_holds_every_request_whole() -> None:
    requests = _requests(A, B, A, B, output_len=40)
    deployment = _deployment(num_gpu_blocks_override=10, max_model_len=128)
    replayed = unbounded_run(requests, LAYOUT, deployment, 1, replayed=True)
    # per request ceil((64 + 40) / 16) + 1 = 8 blocks, 4 requests, one group, plus 2
    assert replayed.num_blocks == 8 * 4 + 2
    assert (replayed.hits, replayed.queries) == (96, 256)
    counted = unbounded_run(requests, LAYOUT, deployment, 1)
    assert (counted.num_blocks, counted.hits, counted.queries) == (34, 96, 256)
    assert counted.mean_request_hit_rate == replayed.mean_request_hit_rate == 0.75 / 2
    assert counted.measured_requests == 4
    assert counted.num_unservable == replayed.num_unservable == 0
    # one full-attention group: counted from the seen hashes (no pool, no prefix tally)
    assert counted.top_prefixes == ()
    assert replayed.top_prefixes != ()


def test_short_prefixes_are_counted_only_with_prefix_caching() -> None:
    requests = _requests((1, 2, 3, 4), (1, 2, 9))
    on = workload_totals(requests, 16, True)
    assert (on.prompt_tokens, on.short_prefix_requests, on.short_prefix_tokens) == (7, 1, 2)
    off = workload_totals(requests, 16, False)
    assert (off.prompt_tokens, off.short_prefix_requests, off.short_prefix_tokens) == (7, 0, 0)
    # a shared prefix of a whole block or more can hit: not short
    assert short_prefix_tokens(_requests(A[:16], A[:20]), 16) == (0, 0)
    assert short_prefix_tokens(_requests(A[:16], A[:15]), 16) == (1, 15)
    # one shared token; a whole earlier prompt as the prefix (not one token past it)
    assert short_prefix_tokens(_requests((1, 2, 3), (1, 9)), 16) == (1, 1)
    assert short_prefix_tokens(_requests((1, 2, 3), (1, 2)), 16) == (1, 2)


def test_the_unbounded_pool_holds_one_request_of_the_model_length() -> None:
    """vLLM's start-up check: one request of ``max_model_len`` tokens fits the pool.
    ceil(1024 / 16) + 1 = 65 blocks a group, more than the one short request needs."""
    request = _requests(A[:10])
    deployment = _deployment(num_gpu_blocks_override=100)
    assert unbounded_run(request, LAYOUT, deployment, replayed=True).num_blocks == 65 + 2
    assert unbounded_run(request, LAYOUT, deployment).num_blocks == 65 + 2


def test_a_two_group_model_is_replayed_on_a_pool_for_each_group() -> None:
    """Gemma-2 (sliding and full attention: two groups): the set of seen hashes is not its
    hit, so the unbounded figure is replayed, on 65 blocks a group plus 2."""
    config = parse_model_config(json.loads((ROOT / "examples/gemma2_9b.json").read_text()))
    gemma = model_layout(config)
    deployment = _deployment(num_gpu_blocks_override=200, vllm_version="0.26")
    result = unbounded_run(_requests(A, A), gemma, deployment)
    assert result.num_blocks == 65 * 2 + 2
    assert result.top_prefixes != ()  # replayed, not counted
    assert (result.queries, result.hits) == (128, 48)


def test_the_reports_name_the_concurrency_model_of_the_docs() -> None:
    """docs/capacity-reports.md: arrival order, no preemption, no chunked prefill."""
    assert CONCURRENCY_MODEL.startswith("requests admitted in arrival order")
    assert CONCURRENCY_MODEL.endswith("retried; no preemption, no chunked prefill")


def test_the_unbounded_pool_keeps_an_auto_fitted_model_length() -> None:
    """A deployment whose model length vLLM fits to the memory (``--max-model-len auto``):
    the unbounded pool is sized for the fitted length and planned with it, not with the
    model's full 8,192 tokens, which that pool would refuse."""
    deployment = _deployment(kv_cache_memory_bytes=64 * 2**20, max_model_len=None)
    deployment = replace(deployment, auto_fit_max_model_len=True)
    config = replay_config(LAYOUT, deployment)
    assert config.max_model_len < 8192
    result = unbounded_run(_requests(A, A), LAYOUT, deployment, replayed=True)
    assert (result.queries, result.hits) == (128, 48)
    assert result.num_blocks == -(-config.max_model_len // 16) + 1 + 2
