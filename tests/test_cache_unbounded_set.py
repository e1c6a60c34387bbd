"""The unbounded figure from a set of seen block hashes equals the unbounded replay.

The replay (``replayed=True``) drives the exact manager on a pool sized to the
whole workload; the seen-set count never builds it. They must give the same
result, field for field (the actual run's top prefixes aside, which the report
takes from the actual run), on many workloads: shared prefixes of every length
against the block, LoRA adapters and cache salts (separate namespaces), prompts
of one token, exact multiples of the block, max_num_seqs small and large,
prefix caching off. Where the set count is not exact (a sliding-window model)
the replay is used: ``seen_set_applies`` says so.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.cache.unbounded import seen_set_applies
from kvpure.cache.workload import WorkloadRequest, replay_config, unbounded_run
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.layout import ModelLayout

ROOT = Path(__file__).resolve().parent.parent


def _layout(name: str) -> ModelLayout:
    config = json.loads((ROOT / "examples" / name).read_text(encoding="utf-8"))
    return model_layout(parse_model_config(config))


LLAMA = _layout("llama3_8b.json")


def _workload(seed: int, count: int) -> tuple[WorkloadRequest, ...]:
    rng = random.Random(seed)
    stems = [[rng.randrange(1, 50) for _ in range(rng.randrange(1, 70))] for _ in range(5)]
    out = []
    for _ in range(count):
        prompt = list(rng.choice(stems))[: rng.randrange(1, 71)]
        prompt += [rng.randrange(1, 50) for _ in range(rng.choice([0, 0, 1, 5, 16, 33]))]
        out.append(
            WorkloadRequest(
                prompt_token_ids=tuple(prompt),
                output_len=rng.randrange(0, 30),
                lora_name=rng.choice([None, None, "a"]),
                cache_salt=rng.choice([None, None, None, "s"]),
            )
        )
    return tuple(out)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("seqs", [1, 3, 256])
def test_the_seen_set_gives_the_replays_unbounded_result(seed: int, seqs: int) -> None:
    workload = _workload(seed, 50)
    deployment = Deployment(kv_cache_memory_bytes=2**30, max_model_len=256)
    counted = unbounded_run(workload, LLAMA, deployment, seqs)
    replayed = unbounded_run(workload, LLAMA, deployment, seqs, replayed=True)
    assert counted == replace(replayed, top_prefixes=())
    assert counted.hits > 0


@pytest.mark.parametrize("seed", range(3))
def test_with_prefix_caching_off_both_count_no_lookup(seed: int) -> None:
    workload = _workload(seed, 20)
    deployment = Deployment(
        kv_cache_memory_bytes=2**30, max_model_len=256, enable_prefix_caching=False
    )
    counted = unbounded_run(workload, LLAMA, deployment)
    replayed = unbounded_run(workload, LLAMA, deployment, replayed=True)
    assert counted == replace(replayed, top_prefixes=())
    assert (counted.queries, counted.hits) == (0, 0)


def test_a_sliding_window_model_is_replayed() -> None:
    gemma = _layout("gemma2_9b.json")
    deployment = Deployment(kv_cache_memory_bytes=2**30, max_model_len=256)
    assert not seen_set_applies(replay_config(gemma, deployment))
    assert seen_set_applies(replay_config(LLAMA, deployment))
