"""Hash-id traces (Mooncake, aiperf, InferenceX) in ``kvpure cache``.

The claims:
- the mapping: each id is a deterministic block of tokens, distinct ids differ
  from their first token on, the last partial block is the request's own;
- the derived block keys give every count of the token path (the synthesized
  tokens hashed by the real hasher), run by run, on evicting pools;
- the unbounded count equals the trace's infinite-cache figure, worked out by
  hand from the ids (a full 512-token block hits when its id was seen before,
  capped at ``input_length - 1`` tokens in whole vLLM blocks);
- timestamps order admission, ``output_length`` is the decode length;
- the CLI detects the format by content and reports both hit rates, named.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvpure.cache.hash_trace import (
    TraceRequest,
    block_token_ids,
    derived_block_hashes,
    parse_trace_line,
)
from kvpure.cache.workload import replay_config, run_workload, unbounded_run
from kvpure.cache.workload_server import needs_tokens
from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples" / "llama3_8b.json"
LAYOUT = model_layout(parse_model_config(json.loads(LLAMA.read_text(encoding="utf-8"))))


def _trace(seed: int, count: int, block: int, ids: int = 12) -> list[TraceRequest]:
    """Random chained traces: prompts extend a few shared id chains, with partial tails."""
    rng = random.Random(seed)
    roots = [[rng.randrange(ids)] for _ in range(3)]
    out = []
    for i in range(count):
        chain = list(rng.choice(roots))
        chain += [rng.randrange(ids) for _ in range(rng.randrange(0, 4))]
        length = len(chain) * block - rng.choice([0, 0, 1, block // 2, block - 1])
        length = max(length, 1)
        full = length // block
        hash_ids = chain[: -(-length // block)]
        if full < len(hash_ids):
            hash_ids[-1] = 1000 + i  # a partial block's id: unused by the mapping
        out.append(
            TraceRequest(
                hash_ids=tuple(hash_ids),
                input_length=length,
                output_len=rng.randrange(0, 40),
                block_size=block,
                unique=i,
                source=f"t line {i + 1}",
            )
        )
    return out


def _deployment(blocks: int | None = None, max_model_len: int = 1024) -> Deployment:
    return Deployment(
        kv_cache_memory_bytes=24 * 2**30,
        max_model_len=max_model_len,
        num_gpu_blocks_override=blocks,
    )


def test_an_id_is_a_block_starting_with_twice_the_id_and_the_tail_is_the_requests_own() -> None:
    request = TraceRequest(
        hash_ids=(5, 7, 99), input_length=40, output_len=3, block_size=16, unique=4
    )
    tokens = request.prompt_token_ids
    assert len(tokens) == 40
    assert tokens[:16] == tuple(block_token_ids(10, 16)) == (10, *range(1, 16))
    assert tokens[16] == 14  # id 7's block
    assert tokens[32:] == (9, *range(1, 8))  # 2 * unique + 1: the 99 of the partial block unused
    assert request.head_token_ids(3) == (10, 1, 2)


def test_derived_keys_are_equal_exactly_where_the_prefixes_are() -> None:
    a = TraceRequest(hash_ids=(1, 2, 3), input_length=48, output_len=0, block_size=16, unique=0)
    b = TraceRequest(hash_ids=(1, 2, 4), input_length=40, output_len=0, block_size=16, unique=1)
    c = TraceRequest(hash_ids=(2, 2), input_length=32, output_len=0, block_size=16, unique=2)
    ka, kb, kc = (derived_block_hashes(r, 8) for r in (a, b, c))
    assert len(ka) == 6
    assert len(kb) == 5  # b: 2 full trace blocks, then a tail of one 8-token block
    assert ka[:4] == kb[:4]
    assert ka[4] != kb[4]  # id 3 against b's own tail
    assert not set(kc) & set(ka)  # a chain starting with id 2 shares nothing with one from 1


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("block", "pool"), [(16, 22), (32, 30), (64, 40), (32, None)])
def test_derived_keys_give_the_token_paths_counts(seed: int, block: int, pool: int | None) -> None:
    trace = _trace(seed, 60, block)
    config = replay_config(LAYOUT, _deployment(pool, max_model_len=320))
    derived = run_workload(trace, config, max_num_seqs=4)
    tokens = run_workload(trace, config, max_num_seqs=4, token_path=True)
    assert derived == tokens
    assert derived.hits > 0


@pytest.mark.parametrize("seed", range(6))
def test_the_unbounded_count_is_the_traces_infinite_cache_figure(seed: int) -> None:
    block = 64
    trace = _trace(seed, 80, block)
    seen: set[tuple[int, ...]] = set()
    expected = 0
    for request in trace:
        chains = [request.hash_ids[: i + 1] for i in range(request.full_blocks)]
        hit = 0
        for chain in chains:
            if chain not in seen:
                break
            hit += block
        expected += min(hit, (request.input_length - 1) // 16 * 16)
        seen.update(chains)
    counted = unbounded_run(trace, LAYOUT, _deployment())
    replayed = unbounded_run(trace, LAYOUT, _deployment(), replayed=True, token_path=True)
    assert counted.hits == expected == replayed.hits
    assert counted == replace(replayed, top_prefixes=())  # the report lists the actual run's


def test_a_trace_block_vllm_blocks_do_not_divide_is_refused() -> None:
    trace = _trace(0, 3, 24)
    with pytest.raises(InvalidFieldError, match="--trace-block-size"):
        run_workload(trace, replay_config(LAYOUT, _deployment()), 8)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ({"input_length": 17, "hash_ids": [1, 2]}, "hash_ids: must hold one id per 8-token block"),
        ({"input_length": 0, "hash_ids": []}, "input_length: must be an int >= 1"),
        ({"input_length": 8, "hash_ids": [-1]}, "hash_ids[0]: must be an int in"),
        ({"input_length": 8, "hash_ids": [True]}, "hash_ids[0]"),
        ({"input_length": 8, "hash_ids": [1], "prompt": "x"}, "prompt: unknown key"),
        ({"input_length": 8, "hash_ids": [1], "timestamp": -1}, "timestamp: must be a number"),
        ({"input_length": 8, "hash_ids": [1], "output_length": 1.5}, "output_length: must be"),
        ({"input_length": 8, "hash_ids": "1"}, "hash_ids: must be a list"),
    ],
)
def test_bad_trace_lines_name_the_field(line: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidFieldError) as caught:
        parse_trace_line(line, "t line 1", 8, 0)
    assert needle in str(caught.value)


def _write(tmp_path: Path, lines: list[dict[str, Any]]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _cli(path: str, *args: str) -> list[str]:
    return [
        "cache", path, "--model", str(LLAMA), "--kv-cache-memory", "24GiB",
        "--max-model-len", "1024", "--trace-block-size", "64", *args,
    ]  # fmt: skip


def test_the_cli_reads_a_trace_in_timestamp_order_with_both_rates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [
        {"timestamp": 30, "input_length": 128, "output_length": 5, "hash_ids": [1, 2]},
        {"timestamp": 10, "input_length": 100, "output_length": 5, "hash_ids": [1, 9]},
        {"timestamp": 20, "input_length": 64, "output_length": 5, "hash_ids": [7]},
    ]
    assert main(_cli(_write(tmp_path, lines), "--json", "--vllm", "0.34.0")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vllm_version"] == "0.34"
    assert data["input"] == {"format": "hash-ids", "arrival_order": True, "trace_block_size": 64}
    # admitted 10 ([1] + own tail), 20 ([7]), 30 ([1, 2]): the last hits id 1's 64 tokens
    assert data["actual"]["prefix_cache_queries"] == 100 + 64 + 128
    assert data["actual"]["prefix_cache_hits"] == 64
    assert data["actual"]["hit_rate"] == round(64 / 292, 6)
    assert data["actual"]["mean_request_hit_rate"] == round((0 + 0 + 0.5) / 3, 6)
    assert data["top_shared_prefixes"][0]["preview_token_ids"][:2] == [2, 1]
    assert data["top_shared_prefixes"][0]["first_request"].endswith("line 1")


def test_the_text_report_names_the_release_first_and_both_rates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [
        {"input_length": 128, "output_length": 5, "hash_ids": [1, 2]},
        {"input_length": 64, "output_length": 5, "hash_ids": [1]},  # hits 48 of 64 (63, in blocks)
    ]
    assert main(_cli(_write(tmp_path, lines), "--vllm", "0.26")) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "vLLM:                 0.26"
    assert "hash-id trace:        2 requests, one id per 64-token block" in out
    assert "prefix-cache hits:    48 tokens (25.0%), token-weighted" in out
    assert "per-request average:  37.5% (aiperf's" in out  # (0 + 48 / 64) / 2


def test_an_unknown_release_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path, [{"input_length": 8, "hash_ids": [1]}])
    assert main(_cli(path, "--vllm", "0.99")) == 2
    err = capsys.readouterr().err
    assert err == "kvpure: error: --vllm: unknown vLLM version '0.99' (known: 0.26, 0.33, 0.34)\n"


def test_jobs_on_a_trace_give_the_serial_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = _trace(3, 40, 64)
    lines = [
        {
            "input_length": r.input_length,
            "output_length": r.output_len,
            "hash_ids": list(r.hash_ids),
        }
        for r in trace
    ]
    path = _write(tmp_path, lines)
    args = _cli(path, "--sweep-memory", "32MiB,64MiB", "--json")
    assert main(args) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main([*args, "--jobs", "2"]) == 0
    pooled = json.loads(capsys.readouterr().out)
    serial.pop("peak_rss_bytes")
    pooled.pop("peak_rss_bytes")
    assert serial == pooled


def test_with_eagle_lookahead_a_trace_takes_the_token_path() -> None:
    deployment = Deployment(
        kv_cache_memory_bytes=24 * 2**30,
        max_model_len=320,
        num_gpu_blocks_override=40,
        speculative_method="eagle",
        num_speculative_tokens=2,
    )
    config = replay_config(LAYOUT, deployment)
    assert needs_tokens(config)
    trace = _trace(1, 30, 32)
    assert run_workload(trace, config, 4) == run_workload(trace, config, 4, token_path=True)
    assert not needs_tokens(replay_config(LAYOUT, _deployment(40, 320)))
