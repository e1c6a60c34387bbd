"""The seen-set count is used for one full-attention group only; a hybrid is replayed.

The golden ``hybrid_full_sliding_window`` (vLLM 0.26's own manager) lists its full-attention
group first: the sliding-window group frees blocks outside its window, so a set of the
hashes seen so far is not its hit (``kvpure.cache.unbounded``'s conditions), whatever
the first group is. The EAGLE and lookahead settings of a one-group deployment are
replayed too (the EAGLE drop shortens hits).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from kvpure.cache import parse_trace, replay_config_from_plan_input
from kvpure.cache.unbounded import seen_set_applies
from kvpure.cache.workload import replay_config
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.specs import FullAttentionSpec, SlidingWindowSpec
from tests.conftest import GOLDEN_026

ROOT = Path(__file__).resolve().parent.parent

HYBRID = GOLDEN_026 / "cache_replay" / "hybrid_full_sliding_window.json"
FULL = GOLDEN_026 / "cache_replay" / "eviction_lru.json"


def test_a_hybrid_led_by_full_attention_is_replayed() -> None:
    trace = parse_trace(json.loads(HYBRID.read_text(encoding="utf-8"))["trace"])
    config = replay_config_from_plan_input(trace.plan_input)
    groups = config.kv_cache_config.kv_cache_groups
    assert len(groups) == 2
    assert type(groups[0].kv_cache_spec) is FullAttentionSpec
    assert groups[0].kv_cache_spec.block_size == config.hash_block_size
    assert not seen_set_applies(config)


def test_one_full_attention_group_is_counted_unless_eagle_or_lookahead() -> None:
    trace = parse_trace(json.loads(FULL.read_text(encoding="utf-8"))["trace"])
    config = replay_config_from_plan_input(trace.plan_input)
    assert seen_set_applies(config)
    assert not seen_set_applies(replace(config, use_eagle=True))
    assert not seen_set_applies(replace(config, num_lookahead_tokens=1))


def test_one_sliding_window_group_is_replayed() -> None:
    # Mistral 7B v0.1: every layer slides (window 4096), one group, block = hash block
    config = json.loads((ROOT / "examples" / "mistral_7b_v0_1.json").read_text(encoding="utf-8"))
    layout = model_layout(parse_model_config(config))
    replay = replay_config(layout, Deployment(kv_cache_memory_bytes=2**30, max_model_len=256))
    (group,) = replay.kv_cache_config.kv_cache_groups
    assert type(group.kv_cache_spec) is SlidingWindowSpec
    assert group.kv_cache_spec.block_size == replay.hash_block_size
    assert not seen_set_applies(replay)
