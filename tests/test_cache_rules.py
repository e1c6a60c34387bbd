"""The prefix cache's rules per release (``kvpure.cache.rules``), each under both sides.

Expected values are read from vLLM's source, named at each test: 0.26.0 and 0.34.0
(``/work/vllm/<version>/vllm``); 0.33.0 is 0.34.0 on all of them.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.cache.coordinator import KVCacheCoordinator
from kvpure.cache.events import BlockRemoved, BlockStored
from kvpure.cache.manager import KVCacheManager
from kvpure.cache.request import CacheRequest
from kvpure.cache.rules import (
    CACHE_RULES,
    CACHE_RULES_0_26,
    CACHE_RULES_0_33,
    CACHE_RULES_0_34,
    CacheRules,
    eagle_hit_max_length,
    get_cache_rules,
    manager_use_eagle,
    num_hash_lookahead_tokens,
    use_eagle_block_drop,
)
from kvpure.cache.trace_json import render_event
from kvpure.hashing import VLLM_0_26, VLLM_0_33, VLLM_0_34, HashRequest, HashScheme
from kvpure.specs import FullAttentionSpec
from kvpure.specs.base import KVDtype
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec
from kvpure.versions import UnknownVllmVersionError
from tests.conftest import DATA_DIR

OLD, NEW = CACHE_RULES_0_26, CACHE_RULES_0_34
EVICTION = DATA_DIR / "vllm-0.34.0" / "cache_replay" / "eviction_lru.json"


# -- the records -------------------------------------------------------------------------------


def test_one_record_per_release_looked_up_by_name() -> None:
    assert set(CACHE_RULES) == {"0.26", "0.33", "0.34"}
    assert get_cache_rules("0.34.0") is CACHE_RULES_0_34
    assert get_cache_rules("0.33") is CACHE_RULES_0_33
    assert get_cache_rules("0.26.0") is CACHE_RULES_0_26
    with pytest.raises(UnknownVllmVersionError, match=r"known: 0\.26, 0\.33, 0\.34"):
        get_cache_rules("0.30")


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        NEW.stats_at_admission = False  # type: ignore[misc]  # the point of the test


def _diff(a: CacheRules, b: CacheRules) -> set[str]:
    return {f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}


def test_034_is_033_with_its_hash_profile() -> None:
    assert _diff(CACHE_RULES_0_33, CACHE_RULES_0_34) == {"vllm_version", "hash_profile"}
    assert CACHE_RULES_0_33.hash_profile is VLLM_0_33
    assert CACHE_RULES_0_34.hash_profile is VLLM_0_34
    assert CACHE_RULES_0_26.hash_profile is VLLM_0_26


def test_every_rule_field_changed_between_026_and_033() -> None:
    """The record holds only rules that changed (plus the version's name)."""
    assert _diff(CACHE_RULES_0_26, CACHE_RULES_0_33) == {
        f.name for f in dataclasses.fields(CACHE_RULES_0_26)
    }


# -- speculative decoding ----------------------------------------------------------------------


def test_block_drop_methods() -> None:
    """0.26 ``Scheduler.__init__``: ``use_eagle()`` (eagle, eagle3, mtp, dflash, dspark);
    0.34 ``SpeculativeConfig.use_eagle_block_drop``: not DFlash/DSpark, not when disabled."""
    for method in ("eagle", "eagle3", "mtp"):
        assert use_eagle_block_drop(OLD, method)
        assert use_eagle_block_drop(NEW, method)
        assert not use_eagle_block_drop(NEW, method, disable_eagle_block_drop=True)
        assert use_eagle_block_drop(OLD, method, disable_eagle_block_drop=True)  # no such key
    for method in ("dflash", "dspark"):
        assert use_eagle_block_drop(OLD, method)
        assert not use_eagle_block_drop(NEW, method)
    for other in (None, "ngram", "draft_model"):
        assert not use_eagle_block_drop(OLD, other)
        assert not use_eagle_block_drop(NEW, other)


def test_lookahead_hashes() -> None:
    """0.34 ``VllmConfig._resolve_num_hash_lookahead_tokens``: L = 1 (the prefill lookahead)
    with the block drop, prefix caching on and lookahead hashes not disabled; 0.26: none."""
    assert num_hash_lookahead_tokens(NEW, block_drop=True, enable_prefix_caching=True) == 1
    assert num_hash_lookahead_tokens(OLD, block_drop=True, enable_prefix_caching=True) == 0
    assert num_hash_lookahead_tokens(NEW, block_drop=False, enable_prefix_caching=True) == 0
    assert num_hash_lookahead_tokens(NEW, block_drop=True, enable_prefix_caching=False) == 0
    assert (
        num_hash_lookahead_tokens(
            NEW, block_drop=True, enable_prefix_caching=True, disable_lookahead_block_hashes=True
        )
        == 0
    )


def test_the_manager_drops_no_block_with_lookahead_hashes() -> None:
    """0.34 ``Scheduler.__init__``: "lookahead hashes prove the boundary token"."""
    assert manager_use_eagle(NEW, block_drop=True, num_lookahead_hashes=1) is False
    assert manager_use_eagle(NEW, block_drop=True, num_lookahead_hashes=0) is True
    assert manager_use_eagle(OLD, block_drop=True, num_lookahead_hashes=0) is True
    assert manager_use_eagle(NEW, block_drop=False, num_lookahead_hashes=0) is False


def test_eagle_look_past_cap() -> None:
    """``HybridKVCacheCoordinator.find_longest_cache_hit``: 0.26 ``min(curr + block,
    max_cache_hit_length)``; 0.34 ``min(curr + margin, len(block_hashes) * hash_block_size)``."""
    kwargs: dict[str, Any] = {
        "current": 8,
        "block_size": 4,
        "max_cache_hit_length": 9,
        "num_hashed_tokens": 16,
    }
    assert eagle_hit_max_length(OLD, **kwargs) == 9
    assert eagle_hit_max_length(NEW, **kwargs) == 12


def _full(block_size: int = 4) -> FullAttentionSpec:
    return FullAttentionSpec(
        block_size=block_size, num_kv_heads=1, head_size=8, dtype=KVDtype.FLOAT32
    )


def _coordinator(rules: Any, *, use_eagle: bool, eagle_group: bool) -> KVCacheCoordinator:
    config = KVCacheConfig(
        num_blocks=8,
        kv_cache_tensors=(),
        kv_cache_groups=(
            KVCacheGroupSpec(
                layer_names=("l0",), kv_cache_spec=_full(), is_eagle_group=eagle_group
            ),
        ),
    )
    return KVCacheCoordinator(
        kv_cache_config=config,
        max_model_len=32,
        max_in_flight_tokens=32,
        use_eagle=use_eagle,
        enable_caching=True,
        enable_kv_cache_events=False,
        scheduler_block_size=4,
        hash_block_size=4,
        use_int_block_hashes=True,
        rules=rules,
    )


def test_marked_eagle_groups_drop_only_with_use_eagle() -> None:
    """0.26 ``KVCacheCoordinator.__init__``: groups marked ``is_eagle_group`` drop; 0.34:
    ``drop_eagle_group_ids = eagle_group_ids if use_eagle else set()``."""
    assert _coordinator(OLD, use_eagle=False, eagle_group=True).eagle_group_ids == {0}
    assert _coordinator(NEW, use_eagle=False, eagle_group=True).eagle_group_ids == set()
    assert _coordinator(NEW, use_eagle=True, eagle_group=True).eagle_group_ids == {0}
    assert _coordinator(NEW, use_eagle=True, eagle_group=False).eagle_group_ids == {0}
    assert _coordinator(OLD, use_eagle=False, eagle_group=False).eagle_group_ids == set()


# -- stats, events, hashes ---------------------------------------------------------------------


def _manager(rules: Any) -> KVCacheManager:
    config = KVCacheConfig(
        num_blocks=4,
        kv_cache_tensors=(),
        kv_cache_groups=(KVCacheGroupSpec(layer_names=("l0",), kv_cache_spec=_full()),),
    )
    return KVCacheManager(
        kv_cache_config=config,
        max_model_len=32,
        scheduler_block_size=4,
        hash_block_size=4,
        log_stats=True,
        rules=rules,
    )


def _request(rules: Any) -> CacheRequest:
    scheme = HashScheme.from_seed(
        algorithm="sha256", block_size=4, seed="0", profile=rules.hash_profile
    )
    return CacheRequest(
        request_id="r",
        hash_request=HashRequest(prompt_token_ids=tuple(range(9))),
        scheme=scheme,
    )


def test_stats_are_counted_at_lookup_in_026_and_at_admission_from_033() -> None:
    """0.26 ``KVCacheManager.get_computed_blocks`` records the lookup; 0.34 leaves it to
    ``record_prefix_cache_stats``, called by ``Scheduler.schedule`` once admitted."""
    old = _manager(OLD)
    old.get_computed_blocks(_request(OLD))
    stats = old.make_prefix_cache_stats()
    assert stats is not None
    assert (stats.requests, stats.queries) == (1, 9)
    old.record_prefix_cache_stats(_request(OLD), 0)  # nothing more under 0.26
    stats = old.make_prefix_cache_stats()
    assert stats is not None
    assert stats.requests == 0

    new = _manager(NEW)
    request = _request(NEW)
    new.get_computed_blocks(request)
    stats = new.make_prefix_cache_stats()
    assert stats is not None
    assert stats.requests == 0
    new.record_prefix_cache_stats(request, 4)
    stats = new.make_prefix_cache_stats()
    assert stats is not None
    assert (stats.requests, stats.queries, stats.hits) == (1, 9, 4)


def test_a_request_that_skips_the_lookup_is_not_counted_at_admission() -> None:
    """0.34 ``record_prefix_cache_stats``: "Don't count a request that skipped the cache
    lookup" (``prefix_cache_hit_limit == 0``)."""
    new = _manager(NEW)
    request = _request(NEW)
    request.skip_reading_prefix_cache = True
    new.record_prefix_cache_stats(request, 0)
    stats = new.make_prefix_cache_stats()
    assert stats is not None
    assert stats.requests == 0


def test_event_fields_per_release() -> None:
    """``vllm/distributed/kv_events.py``: 0.33+ add ``ownership``, ``session_id``,
    ``lookahead_token_ids`` to BlockStored (after ``locality``) and ``ownership`` to
    BlockRemoved."""
    stored = BlockStored(
        block_hashes=(1,),
        parent_block_hash=None,
        token_ids=(1, 2),
        block_size=2,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        lookahead_token_ids=((3,),),
    )
    old = list(render_event(stored, OLD))
    new = list(render_event(stored, NEW))
    assert old[-1] == "locality"
    assert new[len(old) :] == ["ownership", "session_id", "lookahead_token_ids"]
    assert render_event(stored, NEW)["lookahead_token_ids"] == [[3]]
    removed = BlockRemoved(block_hashes=(1,), medium="GPU")
    assert "ownership" not in render_event(removed, OLD)
    assert list(render_event(removed, NEW))[-1] == "ownership"


def test_the_contracts_eagle_lookahead_example() -> None:
    """The 0.34 contract, section 4: one full-attention layer, block 4, 12 blocks,
    max_model_len 24, sha256_cbor, PYTHONHASHSEED "42", eagle3 with one token (L = 1);
    every value below is vLLM 0.34's, as the contract prints it."""
    trace: dict[str, Any] = copy.deepcopy(json.loads(EVICTION.read_text(encoding="utf-8")))["trace"]
    config = trace["plan_input"]["vllm_config"]
    config["cache_config"]["num_gpu_blocks_override"] = 12
    config["model_config"]["max_model_len"] = 24
    config["scheduler_config"]["max_num_batched_tokens"] = 24
    config["scheduler_config"]["max_num_encoder_input_tokens"] = 24
    config["max_in_flight_tokens"] = 24
    config["speculative_config"] = {"num_speculative_tokens": 1, "method": "eagle3"}
    trace["replay"]["pythonhashseed"] = "42"
    prompt = [1008, 1037, 1054, 1033, 1075, 1064, 1009, 1018, 1082]
    trace["ops"] = [
        {"op": "arrive", "request_id": "r0", "prompt_token_ids": prompt, "cache_salt": "tenant-b"}
    ]
    result: Any = replay_trace(trace, vllm_version="0.34")
    header = result["kv_cache_config"]
    assert (header["num_blocks"], header["max_model_len"]) == (12, 24)
    assert header["none_hash"].startswith("9fa6eb00")
    assert header["use_eagle"] is False
    assert header["num_lookahead_tokens"] == 1
    assert header["num_hash_lookahead_tokens"] == 1
    assert header["null_block_id"] == 0
    assert header["kv_cache_layout"] == "LBNHC"
    record = result["records"][0]
    assert record["outcome"]["steps"] == [
        {"num_new_tokens": 9, "allocated": True, "new_block_ids": [[1, 2, 3]]}
    ]
    assert record["request"]["num_block_hashes"] == 2
    assert record["pool"]["free_queue"] == [4, 5, 6, 7, 8, 9, 10, 11]
    assert record["pool"]["usage"] == pytest.approx(0.2727272727272727, rel=1e-12)
    (event,) = record["events"]
    assert event["block_hashes"] == [12006209734715007992, 10361232023619118903]
    assert event["extra_keys"] == [["tenant-b"], None]
    assert event["lookahead_token_ids"] == [[1075], [1082]]
    assert (event["ownership"], event["session_id"]) == (None, None)
    assert record["prefix_cache_stats"]["hits_by_source"] == {}
    assert record["prefix_cache_stats"]["queries"] == 9


def test_the_partial_tail_boundary_per_release() -> None:
    """``FullAttentionManager._cache_partial_tail_block``: 0.26 registers the last hash
    boundary within the prompt; 0.33+ the last one before the prompt's last token (the
    whole prompt when the group drops an EAGLE hash unit), capped by the hashes."""
    from kvpure.cache.rules import partial_tail_boundary

    def boundary(rules: CacheRules, prompt: int, hashes: int, eagle: bool = False) -> int:
        return partial_tail_boundary(
            rules, num_prompt_tokens=prompt, num_hashes=hashes, hash_block_size=4, use_eagle=eagle
        )

    assert boundary(OLD, 24, 6) == 24
    assert boundary(NEW, 24, 6) == 20
    assert boundary(NEW, 24, 6, eagle=True) == 24
    assert boundary(NEW, 23, 5) == boundary(OLD, 23, 5) == 20
    assert boundary(NEW, 23, 4) == 16  # lookahead hashes lag the prompt
    assert boundary(NEW, 3, 0) == boundary(OLD, 3, 0) == 0
    assert isinstance(NEW, CacheRules)


@pytest.mark.parametrize("version", ["0.26", "0.33", "0.34"])
def test_the_settings_release_selects_the_rules(version: str) -> None:
    """What the ``kvpure cache`` analyzer relies on: a planning input whose
    ``PlannerSettings.vllm_version`` names the release gives that release's rules, hash
    profile included; nothing else is passed."""
    from kvpure.cache.replay import CacheReplay
    from kvpure.cache.setup import replay_config_from_plan_input
    from kvpure.cache.trace import ReplaySettings
    from kvpure.cache.trace_json import parse_trace

    trace = parse_trace(json.loads(EVICTION.read_text(encoding="utf-8")), vllm_version="0.26")
    settings = dataclasses.replace(trace.plan_input.settings, vllm_version=version)
    parsed = dataclasses.replace(trace.plan_input, settings=settings)
    config = replay_config_from_plan_input(parsed)
    assert config.rules is get_cache_rules(version)
    engine = CacheReplay(config, ReplaySettings())
    assert engine.manager.rules is config.rules
    assert engine.manager.coordinator.rules is config.rules
    assert engine.manager.block_pool.profile is config.rules.hash_profile
    assert engine.scheme is not None
    assert engine.scheme.profile is config.rules.hash_profile


def test_the_manager_refuses_anything_but_a_rules_record() -> None:
    """A typed error naming ``rules`` (under the test run's runtime type checks, theirs)."""
    from beartype.roar import BeartypeCallHintParamViolation

    from kvpure.errors import InvalidFieldError

    with pytest.raises((InvalidFieldError, BeartypeCallHintParamViolation), match="rules"):
        _manager("0.34")


@pytest.mark.parametrize("caching", [True, False])
def test_034_refuses_a_token_id_outside_int32_naming_the_op(caching: bool) -> None:
    """0.34's ``Request`` keeps token ids in a signed-int32 ``TokenBuffer`` (an id past
    2**31 - 1 is an ``OverflowError`` whether or not prefix caching hashes it); 0.33 holds
    any id."""
    from kvpure.cache.errors import TraceFieldError

    trace: dict[str, Any] = json.loads(EVICTION.read_text(encoding="utf-8"))["trace"]
    trace["plan_input"]["vllm_config"]["cache_config"]["enable_prefix_caching"] = caching
    trace["ops"] = [
        {"op": "arrive", "request_id": "a", "prompt_token_ids": [1, 2, 2**31, 4, 5]},
    ]
    with pytest.raises(TraceFieldError, match=r"ops\[0\]\.prompt_token_ids\[2\]"):
        replay_trace(trace, vllm_version="0.34")
    assert replay_trace(trace, vllm_version="0.33")["records"]
    trace["ops"] = [
        {"op": "arrive", "request_id": "a", "prompt_token_ids": [1, 2, 3, 4, 5]},
        {"op": "decode", "request_id": "a", "token_ids": [7, 2**31 - 1, 2**31]},
    ]
    with pytest.raises(TraceFieldError, match=r"ops\[1\]\.token_ids\[2\]"):
        replay_trace(trace, vllm_version="0.34")
    assert replay_trace(trace, vllm_version="0.33")["records"]
