"""Malformed traces and traces outside the model: typed errors, exit code 2, an error object."""

from __future__ import annotations

import argparse
import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache import (
    TraceFieldError,
    UnknownRequestError,
    UnsupportedTraceError,
    parse_trace,
    replay_trace,
)
from kvpure.cli import cache_replay_command
from kvpure.errors import KVPureError
from tests.conftest import GOLDEN_026

EVICTION = GOLDEN_026 / "cache_replay" / "eviction_lru.json"


def _trace() -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(EVICTION.read_text(encoding="utf-8"))["trace"]
    return trace


def _run(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kvpure")
    cache_replay_command.register(parser.add_subparsers())
    args = parser.parse_args(["cache-replay", path, "--json"])
    code = args.run(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _with_ops(ops: list[dict[str, Any]]) -> dict[str, Any]:
    trace = _trace()
    trace["ops"] = ops
    return trace


ARRIVE = {"op": "arrive", "request_id": "a", "prompt_token_ids": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda t: t.pop("plan_input"), "trace.plan_input"),
        (lambda t: t.__setitem__("format", "other/2"), "format"),
        (lambda t: t.__setitem__("ops", {}), "trace.ops"),
        (lambda t: t["ops"].append({"op": "jump", "request_id": "x"}), "ops[15].op"),
        (lambda t: t["ops"].append({"op": "finish"}), "ops[15].request_id"),
        (lambda t: t["ops"][0].__setitem__("prompt_token_ids", []), "ops[0].prompt_token_ids"),
        (
            lambda t: t["ops"][0].__setitem__("prompt_token_ids", [1, "2"]),
            "ops[0].prompt_token_ids[1]",
        ),
        (
            lambda t: t["ops"][0].__setitem__("prompt_token_ids", [1, True]),
            "ops[0].prompt_token_ids[1]",
        ),
        (lambda t: t["ops"][8].__setitem__("token_ids", 7), "ops[8].token_ids"),
        (lambda t: t["replay"].__setitem__("watermark", -0.5), "replay.watermark"),
        (lambda t: t["replay"].__setitem__("log_stats", "yes"), "replay.log_stats"),
        (
            lambda t: t["ops"][0].__setitem__("kv_cache_report_mode", "some"),
            "ops[0].kv_cache_report_mode",
        ),
        (lambda t: t["ops"][0].__setitem__("mm_features", [3]), "ops[0].mm_features[0]"),
    ],
)
def test_malformed_trace_names_the_field(mutate: Any, field: str) -> None:
    trace = _trace()
    mutate(trace)
    with pytest.raises(TraceFieldError) as info:
        parse_trace(trace)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert field in str(info.value)


def test_unknown_reused_and_finished_request_ids() -> None:
    with pytest.raises(UnknownRequestError, match="no request with this id") as unknown:
        replay_trace(_with_ops([{"op": "decode", "request_id": "zz", "token_ids": [1]}]))
    assert unknown.value.reason == "no request with this id has arrived"  # the whole reason
    with pytest.raises(UnknownRequestError, match="never reused") as info:
        replay_trace(_with_ops([ARRIVE, {"op": "finish", "request_id": "a"}, ARRIVE]))
    assert info.value.request_id == "a"
    assert info.value.field == "ops[2].request_id"
    with pytest.raises(UnknownRequestError, match="already finished") as finished:
        replay_trace(
            _with_ops(
                [ARRIVE, {"op": "finish", "request_id": "a"}, {"op": "retry", "request_id": "a"}]
            )
        )
    assert finished.value.reason == "this request has already finished"


def test_prompt_and_decode_must_stay_below_max_model_len() -> None:
    long_prompt = {"op": "arrive", "request_id": "a", "prompt_token_ids": list(range(32))}
    with pytest.raises(TraceFieldError, match="shorter than max_model_len"):
        replay_trace(_with_ops([long_prompt]))
    prompt = {"op": "arrive", "request_id": "a", "prompt_token_ids": list(range(30))}
    decode = {"op": "decode", "request_id": "a", "token_ids": [1, 2]}
    with pytest.raises(TraceFieldError, match="below max_model_len") as info:
        replay_trace(_with_ops([prompt, decode]))
    assert info.value.field == "ops[1].token_ids"
    # the bound itself: one token less than max_model_len (32) is allowed, in the prompt
    # and after a decode
    last = {"op": "decode", "request_id": "a", "token_ids": [1]}
    result: Any = replay_trace(_with_ops([prompt, last]))
    assert result["records"][1]["request"]["num_tokens"] == 31
    longest = {"op": "arrive", "request_id": "a", "prompt_token_ids": list(range(31))}
    result = replay_trace(_with_ops([longest]))
    assert result["records"][0]["request"]["num_tokens"] == 31


@pytest.mark.parametrize(
    ("section", "key", "value", "feature"),
    [
        ("parallel_config", "pipeline_parallel_size", 2, "pipeline_parallel_size"),
        ("scheduler_config", "async_scheduling", True, "async_scheduling"),
        ("scheduler_config", "max_num_batched_tokens", 16, "max_num_batched_tokens"),
    ],
)
def test_configs_outside_the_model_are_refused(
    section: str, key: str, value: object, feature: str
) -> None:
    trace = _trace()
    vllm_config = trace["plan_input"]["vllm_config"]
    vllm_config[section][key] = value
    vllm_config.pop("max_concurrent_batches")  # derived: let the planner derive them again
    vllm_config.pop("max_in_flight_tokens")
    with pytest.raises(UnsupportedTraceError) as info:
        replay_trace(trace)
    assert feature in info.value.feature
    assert isinstance(info.value, NotImplementedError)


def test_errors_pickle_with_their_attributes() -> None:
    err = UnknownRequestError(field="ops[1].request_id", request_id="r", reason="gone")
    back = pickle.loads(pickle.dumps(err))
    assert (back.field, back.request_id, back.reason) == ("ops[1].request_id", "r", "gone")
    assert isinstance(back, KVPureError)


def test_command_exits_2_with_an_error_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    trace = copy.deepcopy(_trace())
    trace["ops"][0]["prompt_token_ids"] = []
    bad.write_text(json.dumps(trace), encoding="utf-8")
    code, out, err = _run(str(bad), capsys)
    assert code == 2
    error = json.loads(out)["error"]
    assert error["type"] == "TraceFieldError"
    assert error["vllm_type"] == "ValueError"
    assert "ops[0].prompt_token_ids" in error["message"]
    assert err.startswith("kvpure: error: ops[0].prompt_token_ids")
    assert len(err.strip().splitlines()) == 1


def test_command_invalid_json_and_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    code, out, _ = _run(str(broken), capsys)
    assert code == 2
    error = json.loads(out)["error"]
    assert error["type"] == "InvalidFieldError"
    assert "invalid JSON" in error["message"]
    code, out, _ = _run(str(tmp_path / "missing.json"), capsys)
    assert code == 2
    assert json.loads(out)["error"]["type"] == "FileNotFoundError"


def test_command_without_json_prints_one_line_per_op(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="kvpure")
    cache_replay_command.register(parser.add_subparsers())
    args = parser.parse_args(["cache-replay", str(EVICTION)])
    assert args.run(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("vLLM 0.34: ")  # the release first (the default)
    del lines[0]
    assert lines[0].startswith("UnitaryKVCacheCoordinator: 9 blocks")
    assert len(lines) == 1 + 15


def test_sink_attention_is_refused_as_vllm_cannot_build_its_manager() -> None:
    """vLLM 0.26.0's SinkFullAttentionManager.__init__ rejects needs_kv_cache_zeroing."""
    trace = _trace()
    specs = trace["plan_input"]["kv_cache_specs"][0]
    for spec in specs.values():
        spec["type"] = "SinkFullAttentionSpec"
        spec["sink_len"] = 4
        spec.pop("_derived")
    with pytest.raises(UnsupportedTraceError, match="SinkFullAttentionSpec"):
        replay_trace(trace)
