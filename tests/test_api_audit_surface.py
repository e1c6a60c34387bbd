"""The rest of the public surface refuses bad input with a typed error naming the field:
planning helpers, specs and plan values, models, the prefix cache, events and text.

As in :mod:`tests.test_api_audit_hashing`: a fresh interpreter without the suite's
beartype hook, one error under :class:`kvpure.errors.KVPureError` per bad call, whose
message names the field; the good calls beside them still give their values.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api_audit_runner import run_cases

SETUP = """
import json
from kvpure import *
from kvpure import cache, events, specs
from kvpure.free_queue import KVCacheBlock
from kvpure.serve.gpus import find_gpu
from kvpure.specs.layer_map import LayerMap
from kvpure.text import ChatMessage, load_tokenizer
SPEC = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
SPECS = LayerMap.from_mapping({'a': SPEC})
S = PlannerSettings(vllm_version='0.26')
KVC = get_kv_cache_configs(S, [{'a': SPEC}], [2**30]).kv_cache_configs[0]
RULES = cache.get_cache_rules('0.26')
REQ = HashRequest(prompt_token_ids=(1, 2, 3))
from kvpure.interop.hashing import hash_request_from_json
TRACE = json.load(open('tests/data/vllm-0.26.0/cache_replay/eviction_lru.json'))['trace']
"""

BAD: tuple[tuple[str, str], ...] = (
    # -- planning helpers: settings, specs and memory
    ("estimate_max_model_len(None, SPECS, 2**30)", "settings"),
    ("estimate_max_model_len('0.26', SPECS, 2**30)", "settings"),
    ("estimate_max_model_len(S, None, 2**30)", "kv_cache_spec"),
    ("estimate_max_model_len(S, [SPEC], 2**30)", "kv_cache_spec"),
    ("estimate_max_model_len(S, {3: SPEC}, 2**30)", "kv_cache_spec"),
    ("estimate_max_model_len(S, {'a': 3}, 2**30)", "kv_cache_spec['a']"),
    ("estimate_max_model_len(S, SPECS, None)", "available_memory"),
    ("estimate_max_model_len(S, SPECS, float('nan'))", "available_memory"),
    ("estimate_max_model_len(S, SPECS, float('inf'))", "available_memory"),
    ("estimate_max_model_len(S, SPECS, 1.5e9)", "available_memory"),
    ("estimate_max_model_len(S, SPECS, '24GiB')", "available_memory"),
    ("estimate_max_model_len(S, SPECS, True)", "available_memory"),
    ("estimate_max_model_len(S, SPECS, -1)", "available_memory"),
    ("estimate_max_model_len(S, SPECS, 2**200)", "available_memory"),
    ("get_kv_cache_groups(None, SPECS)", "settings"),
    ("get_kv_cache_groups(S, None)", "specs"),
    ("get_kv_cache_groups(S, [])", "specs"),
    ("get_kv_cache_groups(S, 'a')", "specs"),
    ("get_max_concurrency_for_kv_cache_config(None, KVC)", "settings"),
    ("get_max_concurrency_for_kv_cache_config(S, None)", "kv_cache_config"),
    ("get_max_concurrency_for_kv_cache_config(S, SPEC)", "kv_cache_config"),
    # -- specs helpers and plan values
    ("specs.cdiv(None, 2)", "a"),
    ("specs.cdiv(1.5, 2)", "a"),
    ("specs.cdiv(True, 2)", "a"),
    ("specs.cdiv(7, 0)", "b"),
    ("specs.cdiv(7, float('nan'))", "b"),
    ("specs.round_up(7, -1)", "y"),
    ("specs.round_up('7', 2)", "x"),
    ("specs.get_kv_quant_mode(None)", "kv_cache_dtype"),
    ("KVDtype('int3')", "dtype"),
    ("KVDtype(None)", "dtype"),
    ("specs.get_kv_quant_mode(8)", "kv_cache_dtype"),
    ("specs.merge_specs(None)", "specs"),
    ("specs.merge_specs([])", "specs"),
    ("specs.merge_specs([SPEC, 3])", "specs[1]"),
    ("LayerMap.from_mapping(None)", "mapping"),
    ("LayerMap.from_mapping({3: SPEC})", "mapping"),
    ("KVCacheTensor(size=2**200, shared_by=('a',))", "size"),
    ("KVCacheTensor(size=4096, shared_by=('a',), offset=2**200)", "offset"),
    (
        "KVCacheConfig(num_blocks=2**200, kv_cache_tensors=KVC.kv_cache_tensors, "
        "kv_cache_groups=KVC.kv_cache_groups)",
        "num_blocks",
    ),
    ("KVCacheBlock(0, ref_cnt=2**200)", "ref_cnt"),
    ("exec:KVCacheBlock(0).set_block_hash(b'x', 2**200)", "num_tokens"),
    # -- models
    ("Deployment(kv_cache_memory_bytes=2**34, block_size=2**200)", "block_size"),
    ("Deployment(kv_cache_memory_bytes=2**34, max_model_len=2**200)", "max_model_len"),
    (
        "Deployment(kv_cache_memory_bytes=2**34, tensor_parallel_size=2**200)",
        "tensor_parallel_size",
    ),
    ("parse_model_config({3: 4})", "config.json"),
    ("find_gpu(None)", "--gpu"),
    ("find_gpu(3)", "--gpu"),
    ("find_gpu(b'H100')", "--gpu"),
    # -- the prefix cache
    ("cache.replay(None)", "trace"),
    ("cache.replay(TRACE)", "trace"),
    ("cache.replay(cache.parse_trace(TRACE), free_queue_limit=2**200)", "free_queue_limit"),
    ("cache.ReplaySettings(log_stats=1)", "replay.log_stats"),
    ("cache.ReplaySettings(use_int_block_hashes=None)", "replay.use_int_block_hashes"),
    ("cache.ReplaySettings(pythonhashseed=0)", "replay.pythonhashseed"),
    ("cache.ReplaySettings(watermark=float('nan'))", "replay.watermark"),
    ("cache.ReplaySettings(watermark=-0.5)", "replay.watermark"),
    ("cache.ReplaySettings(watermark='0')", "replay.watermark"),
    ("cache.BlockPool(num_gpu_blocks=8, enable_caching=1, hash_block_size=16)", "enable_caching"),
    (
        "cache.BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=0)",
        "hash_block_size",
    ),
    (
        "cache.BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size='16')",
        "hash_block_size",
    ),
    (
        "cache.BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=16, profile='x')",
        "profile",
    ),
    ("cache.CacheRequest(request_id=3, hash_request=REQ, scheme=None)", "request_id"),
    ("cache.CacheRequest(request_id='r', hash_request=None, scheme=None)", "hash_request"),
    ("cache.CacheRequest(request_id='r', hash_request=REQ, scheme='sha256')", "scheme"),
    (
        "cache.CacheRequest(request_id='r', hash_request=REQ, scheme=None, lora_int_id=True)",
        "lora_int_id",
    ),
    (
        "cache.CacheRequest(request_id='r', hash_request=REQ, scheme=None, "
        "kv_cache_report_mode='partial')",
        "kv_cache_report_mode",
    ),
    (
        "cache.CacheRequest(request_id='r', hash_request=REQ, scheme=None, "
        "skip_reading_prefix_cache=None)",
        "skip_reading_prefix_cache",
    ),
    (
        "cache.KVCacheManager(kv_cache_config=None, max_model_len=64, scheduler_block_size=16, "
        "hash_block_size=16, rules=RULES)",
        "kv_cache_config",
    ),
    (
        "cache.KVCacheManager(kv_cache_config=KVC, max_model_len=2**200, scheduler_block_size=16, "
        "hash_block_size=16, rules=RULES)",
        "max_model_len",
    ),
    (
        "cache.KVCacheManager(kv_cache_config=KVC, max_model_len=64, scheduler_block_size=0, "
        "hash_block_size=16, rules=RULES)",
        "scheduler_block_size",
    ),
    (
        "cache.KVCacheManager(kv_cache_config=KVC, max_model_len=64, scheduler_block_size=16, "
        "hash_block_size=16, rules=RULES, watermark=float('nan'))",
        "watermark",
    ),
    (
        "cache.KVCacheManager(kv_cache_config=KVC, max_model_len=64, scheduler_block_size=16, "
        "hash_block_size=16, rules=RULES, watermark='0')",
        "watermark",
    ),
    ("PlannerSettings(cache_dtype='fp9')", "cache_dtype"),
    ("PlannerSettings(cache_dtype=None)", "cache_dtype"),
    (
        "hash_request_from_json({'prompt_token_ids': [1]}, share_equal_strings=1)",
        "share_equal_strings",
    ),
    # -- events and text
    ("events.RouterSettings(algorithm='sha256', block_size=2**200, seed='0')", "block_size"),
    ("ChatMessage(role=None, texts=('hi',))", "role"),
    ("ChatMessage(role='user', texts='hi')", "texts"),
    ("ChatMessage(role='user', texts=(3,))", "texts"),
    ("ChatMessage(role='user', texts=('hi',), name=3)", "name"),
    ("load_tokenizer(None)", "path"),
    ("load_tokenizer(3)", "path"),
)

GOOD: tuple[tuple[str, str], ...] = (
    (
        "estimate_max_model_len(S, {'a': SPEC}, 2**30) == estimate_max_model_len(S, SPECS, 2**30)",
        "True",
    ),
    ("len(get_kv_cache_groups(S, {'a': SPEC}).groups)", "1"),
    ("get_max_concurrency_for_kv_cache_config(S, KVC) > 0", "True"),
    ("specs.cdiv(-7, 2)", "-3"),
    ("specs.round_up(7, 4)", "8"),
    ("KVDtype('bfloat16').itemsize", "2"),
    ("specs.get_kv_quant_mode('anything').name", "'NONE'"),
    ("specs.merge_specs((SPEC, SPEC)) == SPEC", "True"),
    ("cache.ReplaySettings(watermark=0).watermark", "0"),
    (
        "cache.BlockPool(num_gpu_blocks=8, enable_caching=True, hash_block_size=16).num_gpu_blocks",
        "8",
    ),
    ("len(cache.replay(cache.parse_trace(TRACE)).records) > 0", "True"),
    ("find_gpu('h100').name", "'H100-80GB'"),
    ("ChatMessage(role='user', texts=('hi',)).role", "'user'"),
    ("PlannerSettings(cache_dtype='nvfp4').cache_dtype", "'nvfp4'"),
    ("cache.CacheRequest(request_id='r', hash_request=REQ, scheme=None).num_tokens", "3"),
    (
        "cache.KVCacheManager(kv_cache_config=KVC, max_model_len=64, scheduler_block_size=16, "
        "hash_block_size=16, rules=RULES, watermark=0.01).max_model_len",
        "64",
    ),
)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[str, str, str]]:
    return run_cases(SETUP, [source for source, _ in BAD + GOOD])


@pytest.mark.parametrize(("source", "field"), BAD)
def test_a_bad_argument_is_a_typed_error_naming_it(
    outcomes: dict[str, tuple[str, str, str]], source: str, field: str
) -> None:
    outcome, kind, message = outcomes[source]
    assert outcome == "typed", f"{source}: {outcome} {kind}: {message}"
    assert field in message, f"{source}: {kind}: {message}"


@pytest.mark.parametrize(("source", "value"), GOOD)
def test_good_arguments_still_work(
    outcomes: dict[str, tuple[str, str, str]], source: str, value: str
) -> None:
    outcome, _kind, text = outcomes[source]
    assert (outcome, text) == ("accepted", value), f"{source}: {outcome} {text}"


@pytest.mark.parametrize(
    "argv",
    [
        [
            "plan",
            "examples/llama3_8b.json",
            "--kv-cache-memory",
            "24GiB",
            "--max-num-seqs",
            "9" * 30,
        ],
        ["plan", "examples/llama3_8b.json", "--kv-cache-memory", "24GiB", "-dp", "9" * 30],
        ["events", "listen", "tcp://127.0.0.1:1", "--count", "9" * 30],
    ],
)
def test_a_count_option_past_its_bound_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from kvpure.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert "9" * 20 in err or "most" in err


def test_the_whole_api_sweep_finds_no_untyped_error() -> None:
    """``tools/api_fuzz.py --api-only`` (97 entry points, ~2,000 bad calls): none untyped,
    every good call works, and only the values vLLM itself takes are accepted."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "api_fuzz.py"), "--api-only"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = re.search(
        r"(\d+) typed / (\d+) untyped / (\d+) accepted \((\d+) good calls failed\)", done.stdout
    )
    assert summary is not None, done.stdout[-2000:]
    typed, untyped, accepted, good_failed = map(int, summary.groups())
    assert (untyped, good_failed) == (0, 0), done.stdout[-4000:]
    assert accepted <= 21, done.stdout[-4000:]
    assert typed > 1900
