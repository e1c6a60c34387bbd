"""``CacheReplay(record_block_ids=False)``: the workload replay's engine skips the block-id
copies in its records and nothing else changes (the same admissions, hits and pool)."""

from __future__ import annotations

import dataclasses

from kvpure.cache.replay import CacheReplay
from kvpure.cache.trace import AdmissionOutcome, ReplaySettings, StepRecord
from kvpure.cache.workload import replay_config
from kvpure.cache.workload_server import ServerRun, make_request
from tests.test_cache_hash_trace import LAYOUT, _deployment, _trace


def _admit_all(record: bool) -> tuple[list[AdmissionOutcome], tuple[int, ...], int]:
    """Every admission (with its steps) and the pool after."""
    config = replay_config(LAYOUT, _deployment(30, max_model_len=320))
    engine = CacheReplay(config, ReplaySettings(log_stats=True), record_block_ids=record)
    admissions: list[AdmissionOutcome] = []
    for index, item in enumerate(_trace(5, 12, 32, 6)):
        request = make_request(index, item, engine.scheme, config.hash_block_size)
        engine.requests[request.request_id] = request
        admissions.append(engine.admit(request))
    pool = engine.manager.block_pool
    return admissions, pool.free_block_queue.free_block_ids(), pool.num_cached_hashes


def _step_without_ids(step: StepRecord) -> StepRecord:
    ids = None if step.new_block_ids is None else ()
    return dataclasses.replace(step, new_block_ids=ids)


def _without_ids(outcome: AdmissionOutcome) -> AdmissionOutcome:
    steps = tuple(map(_step_without_ids, outcome.steps))
    return dataclasses.replace(outcome, cached_block_ids=(), steps=steps)


def test_records_without_block_ids_change_nothing_else() -> None:
    full, bare = _admit_all(True), _admit_all(False)
    assert full[1:] == bare[1:]  # the pool
    assert bare[0] == [_without_ids(outcome) for outcome in full[0]]
    # the full records did carry ids: the trace has hits and allocations
    assert any(any(outcome.cached_block_ids) for outcome in full[0])
    assert any(step.new_block_ids for outcome in full[0] for step in outcome.steps)


def test_the_workload_server_does_not_record_block_ids() -> None:
    server = ServerRun(replay_config(LAYOUT, _deployment(30, max_model_len=320)), 4)
    assert server.engine._ids([[server.engine.manager.block_pool.null_block]]) == ()
