"""The unbounded hit figure of a workload larger than the replay's pool cap (2**22 blocks).

The claims:
- on a deployment the seen-hash count covers (one full-attention group), a
  workload whose no-eviction pool would exceed the cap is still counted (no
  pool is built), with the trace's infinite-cache figure worked out by hand and
  the pool size it would need;
- on a deployment that must replay (sliding windows: two groups), the same
  workload is refused with a typed error naming the workload's size and the
  limit and suggesting fewer requests, not the num_gpu_blocks_override the user
  never set;
- a workload that fits is answered as before (the replayed and counted figures
  agree, as ``tests/test_cache_unbounded_set.py`` checks on many workloads).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.cache.block_pool import MAX_NUM_GPU_BLOCKS
from kvpure.cache.errors import UnboundedPoolTooLargeError
from kvpure.cache.hash_trace import TraceRequest
from kvpure.cache.workload import unbounded_run
from kvpure.errors import KVPureError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.layout import ModelLayout

ROOT = Path(__file__).resolve().parent.parent
TRACE_BLOCK = 512
PROMPT = 8000  # 15 shared trace blocks of 512 tokens and a 320-token tail of the request's own
#: Blocks one request holds in a pool that never evicts: ceil((8000 + 1) / 16) + 1 (vLLM's
#: block size 16; the decoded token's slot and the null block's share, as the analyzer sizes it).
PER_REQUEST = 502
#: Just enough requests that the pool would pass the cap: 8,400 x 502 + 2 = 4,216,802 blocks.
COUNT = 8400


def _layout(name: str) -> ModelLayout:
    path = ROOT / "examples" / name
    return model_layout(parse_model_config(json.loads(path.read_text(encoding="utf-8"))))


def _trace(count: int) -> list[TraceRequest]:
    shared = tuple(range(PROMPT // TRACE_BLOCK))
    return [
        TraceRequest(
            hash_ids=(*shared, 10_000 + i),
            input_length=PROMPT,
            output_len=1,
            block_size=TRACE_BLOCK,
            unique=i,
        )
        for i in range(count)
    ]


def _deployment() -> Deployment:
    return Deployment(kv_cache_memory_bytes=24 * 2**30, max_model_len=8192)


def test_the_workload_passes_the_cap() -> None:
    assert COUNT * PER_REQUEST + 2 > MAX_NUM_GPU_BLOCKS == 4_194_304


def test_a_counted_deployment_answers_past_the_cap() -> None:
    trace = _trace(COUNT)
    run = unbounded_run(trace, _layout("llama3_8b.json"), _deployment())
    assert run.num_blocks == COUNT * PER_REQUEST + 2  # the pool it would take, not the cap
    assert run.queries == COUNT * PROMPT
    # each later request hits the 15 shared trace blocks (7,680 tokens), under 7,999
    assert run.hits == (COUNT - 1) * 15 * TRACE_BLOCK
    assert run.num_unservable == 0


def test_a_replayed_deployment_is_refused_in_the_workloads_words() -> None:
    trace = _trace(COUNT)
    with pytest.raises(UnboundedPoolTooLargeError) as caught:
        unbounded_run(trace, _layout("gemma2_9b.json"), _deployment())
    err = caught.value
    assert isinstance(err, KVPureError)
    assert isinstance(err, ValueError)
    assert (err.num_requests, err.prompt_tokens) == (COUNT, COUNT * PROMPT)
    assert err.num_blocks > MAX_NUM_GPU_BLOCKS == err.limit
    text = str(err)
    assert "8,400 requests" in text
    assert "4,194,304" in text
    assert "fewer" in text
    assert "num_gpu_blocks_override" not in text
    back = pickle.loads(pickle.dumps(err))  # crosses the --jobs process pool intact
    assert (back.num_requests, back.num_blocks, back.limit) == (
        err.num_requests,
        err.num_blocks,
        err.limit,
    )


def test_the_counted_path_also_refuses_when_a_replay_is_asked() -> None:
    with pytest.raises(UnboundedPoolTooLargeError):
        unbounded_run(_trace(COUNT), _layout("llama3_8b.json"), _deployment(), replayed=True)


def test_a_workload_that_fits_is_answered_as_before() -> None:
    trace = _trace(40)
    layout = _layout("llama3_8b.json")
    counted = unbounded_run(trace, layout, _deployment())
    replayed = unbounded_run(trace, layout, _deployment(), replayed=True)
    assert counted.num_blocks == 40 * PER_REQUEST + 2
    assert counted == replace(replayed, top_prefixes=())
    assert counted.hits == 39 * 15 * TRACE_BLOCK
    gemma = unbounded_run(trace, _layout("gemma2_9b.json"), _deployment())
    assert gemma.queries == 40 * PROMPT
