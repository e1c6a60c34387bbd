"""The seen-set count's edges: the same refusals and progress calls as the replay it stands for.

``seen_set_count`` replaces the unbounded replay (``run_workload`` on a pool too large to
evict) where the two agree. Beside the same counts (``tests/test_cache_unbounded_set.py``),
it must refuse what the replay refuses, in the same words (a request longer than the
model, a hash-id trace whose block is not a multiple of the hash block), and call
``progress`` as the replay does: once per request, with 1. With prefix caching off
there is no lookup (vLLM counts no query), so any deployment is counted, a
sliding-window one too, without building a pool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.cache.hash_trace import TraceRequest
from kvpure.cache.unbounded import seen_set_applies, seen_set_count
from kvpure.cache.workload import WorkloadRequest, replay_config, run_workload, unbounded_run
from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.layout import ModelLayout

ROOT = Path(__file__).resolve().parent.parent


def _layout(name: str) -> ModelLayout:
    path = ROOT / "examples" / name
    return model_layout(parse_model_config(json.loads(path.read_text(encoding="utf-8"))))


LLAMA = _layout("llama3_8b.json")
DEPLOYMENT = Deployment(kv_cache_memory_bytes=2**30, max_model_len=64)
CONFIG = replay_config(LLAMA, DEPLOYMENT)


def _refusal_of_both(items: list[WorkloadRequest] | list[TraceRequest]) -> tuple[str, str]:
    assert seen_set_applies(CONFIG)
    with pytest.raises(InvalidFieldError) as counted:
        seen_set_count(items, CONFIG)
    with pytest.raises(InvalidFieldError) as replayed:
        run_workload(items, CONFIG, 4)
    return str(counted.value), str(replayed.value)


def test_a_request_longer_than_the_model_is_refused_as_the_replay_refuses_it() -> None:
    items = [
        WorkloadRequest(prompt_token_ids=tuple(range(1, 33)), output_len=4),
        WorkloadRequest(prompt_token_ids=tuple(range(1, 61)), output_len=5),  # 65 > 64
    ]
    counted, replayed = _refusal_of_both(items)
    assert counted == replayed
    assert "request 2.output_len" in counted
    assert "max_model_len (64 tokens)" in counted


def test_a_trace_block_not_a_multiple_of_the_hash_block_is_refused_as_the_replay_does() -> None:
    assert CONFIG.hash_block_size == 16
    items = [TraceRequest(hash_ids=(1, 2), input_length=40, output_len=1, block_size=24, unique=0)]
    counted, replayed = _refusal_of_both(items)
    assert counted == replayed
    assert "--trace-block-size" in counted


@pytest.mark.parametrize("caching", [True, False])
def test_progress_is_called_once_per_request_with_one_as_the_replay_calls_it(
    caching: bool,
) -> None:
    deployment = Deployment(
        kv_cache_memory_bytes=2**30, max_model_len=64, enable_prefix_caching=caching
    )
    items = [
        WorkloadRequest(prompt_token_ids=tuple(range(1, 1 + n)), output_len=2)
        for n in (5, 17, 33, 40, 1)
    ]
    counted: list[int] = []
    replayed: list[int] = []
    unbounded_run(items, LLAMA, deployment, 4, counted.append)
    unbounded_run(items, LLAMA, deployment, 4, replayed.append, replayed=True)
    assert replayed == [1] * len(items)
    assert counted == replayed


def test_with_prefix_caching_off_a_sliding_window_model_is_counted_without_a_pool() -> None:
    # gemma 2 slides half its layers: with caching on it is replayed (and a workload past
    # the pool cap is refused, tests/test_cache_unbounded_limit.py); with caching off
    # there is no lookup to replay, so even that workload is answered
    gemma = _layout("gemma2_9b.json")
    deployment = Deployment(
        kv_cache_memory_bytes=24 * 2**30, max_model_len=8192, enable_prefix_caching=False
    )
    assert seen_set_applies(replay_config(gemma, deployment))
    trace = [
        TraceRequest(
            hash_ids=(*range(15), 10_000 + i),
            input_length=8000,
            output_len=1,
            block_size=512,
            unique=i,
        )
        for i in range(8400)
    ]
    run = unbounded_run(trace, gemma, deployment)
    assert (run.queries, run.hits) == (0, 0)
