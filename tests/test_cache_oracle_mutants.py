"""Hand-made traces against the real vLLM 0.26.0 KVCacheManager (issue 24's mutation round).

``tests/data/vllm-0.26.0-oracle/cache_replay_mutants.json.gz`` holds the traces of
``tools/vllm_oracle/gen_mutant_cache_traces.py`` and what vLLM 0.26.0's own manager
did on each (``tools/vllm_oracle/cache_replay_vllm.py``). Each trace reaches a corner
of the cache managers that the random traces of ``test_cache_oracle.py`` miss (its
``description`` says which). A trace's ``oracle_overrides`` replaces fields of the
replay config that no trace can set; the oracle replaced the same fields before
building vLLM's manager. An op ``preempt`` (not in kvpure's trace format) takes the
manager-level steps of vLLM 0.26's ``Scheduler._preempt_request``: free the request's
blocks, no computed tokens, one more preemption, waiting again (a ``retry`` re-admits it).
"""

from __future__ import annotations

import gzip
import importlib
import json
import math
from dataclasses import replace
from typing import Any

import pytest

from kvpure.cache import parse_trace, replay_trace
from kvpure.cache.request import RequestStatus
from kvpure.cache.setup import ReplayConfig, replay_config_from_plan_input
from kvpure.cache.trace import FinishOutcome, OpRecord
from kvpure.cache.trace_render import render_record
from tests.conftest import DATA_DIR

# the module, not the function of the same name that kvpure.cache exports
replay_module = importlib.import_module("kvpure.cache.replay")

ORACLE: dict[str, Any] = json.loads(
    gzip.decompress((DATA_DIR / "vllm-0.26.0-oracle" / "cache_replay_mutants.json.gz").read_bytes())
)
CASES: dict[str, dict[str, Any]] = {case["trace"]["name"]: case for case in ORACLE["cases"]}


def _same(got: Any, want: Any, path: str) -> None:
    if isinstance(want, float) or isinstance(got, float):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15), path
    elif isinstance(want, dict):
        assert isinstance(got, dict), path
        for key, value in want.items():
            _same(got[key], value, f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list), path
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{path}[{i}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def test_every_case_was_replayed_by_vllm() -> None:
    assert ORACLE["meta"]["vllm_version"] == "0.26.0"
    assert all("records" in case["vllm"] for case in CASES.values())


def _replay_with_preemptions(trace: dict[str, Any], vllm_version: str = "0.26") -> list[Any]:
    """The records of ``trace``, whose ``preempt`` ops kvpure's parser does not know."""
    raw_ops = trace["ops"]
    parsed = parse_trace(
        {**trace, "ops": [op for op in raw_ops if op["op"] != "preempt"]},
        vllm_version=vllm_version,
    )
    flags = parsed.draft_flags
    config = replay_module.replay_config_from_plan_input(
        parsed.plan_input,
        disable_lookahead_block_hashes=flags.disable_lookahead_block_hashes,
        disable_eagle_block_drop=flags.disable_eagle_block_drop,
    )
    engine = replay_module.CacheReplay(config, parsed.replay)
    ops = iter(parsed.ops)
    records = []
    for index, raw in enumerate(raw_ops):
        if raw["op"] != "preempt":
            records.append(render_record(engine.apply(next(ops), index), config.rules))
            continue
        request = engine.requests[raw["request_id"]]
        engine.manager.free(request)
        request.status = RequestStatus.WAITING
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        record = OpRecord(
            op="preempt",
            request_id=request.request_id,
            outcome=FinishOutcome(was="running"),
            request=engine.request_snapshot(request),
            pool=engine.pool_snapshot(),
            events=tuple(engine.manager.take_events()),
            prefix_cache_stats=engine.manager.make_prefix_cache_stats(),
        )
        records.append(render_record(record, config.rules))
    return records


# Found by this round and since modelled: in a hybrid whose full-attention block (16) is
# larger than the hash block (4), vLLM 0.26's full-attention manager also caches the
# prompt's partial tail (FullAttentionManager._cache_partial_tail_block: a BlockStored of
# block_size 4 for group 0, one more cached hash). Every case agrees.
@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_agrees_with_vllm(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    overrides: dict[str, Any] = case["trace"].get("oracle_overrides") or {}
    if overrides:

        def derive_and_override(*args: Any, **kwargs: Any) -> ReplayConfig:
            return replace(replay_config_from_plan_input(*args, **kwargs), **overrides)

        monkeypatch.setattr(replay_module, "replay_config_from_plan_input", derive_and_override)
    if any(op["op"] == "preempt" for op in case["trace"]["ops"]):
        _same(_replay_with_preemptions(case["trace"]), case["vllm"]["records"], f"{name}.records")
        return
    got: Any = replay_trace(case["trace"], vllm_version="0.26")
    config = got["kv_cache_config"]
    assert config["coordinator"] == case["vllm"]["coordinator"]
    assert [group["manager"] for group in config["kv_cache_groups"]] == case["vllm"]["managers"]
    _same(got["records"], case["vllm"]["records"], f"{name}.records")
    _same(got["final_state"], case["vllm"]["final_state"], f"{name}.final_state")
