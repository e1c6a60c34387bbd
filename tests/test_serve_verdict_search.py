"""The verdict's two searches, at their edges, and the verdict's own fields.

The searches answer "the largest ``--max-model-len`` in ``[1, upper]`` that
starts" and "the least whole MiB per GPU that starts, up to the CLI's own
bound": 1 EiB (``kvpure.cli.option_values.MAX_MEMORY_BYTES``, 2**60 bytes, what
``--kv-cache-memory`` accepts). Whether one deployment starts is vLLM's check,
tested against vLLM's own messages in ``test_serve_cli.py``; here ``starts``
is replaced by a threshold, so each search is checked for every threshold
against the answer the docstrings define (brute force over the range).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kvpure.cli.option_values import MAX_MEMORY_BYTES
from kvpure.report.model_plan import plan_deployment
from kvpure.serve import verdict
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.verdict import Verdict, largest_fitting_max_model_len, serve_verdict
from tests.test_serve_mutants import llama

MIB = 2**20
FLAGS = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=2048)


def _length_threshold(monkeypatch: pytest.MonkeyPatch, longest: int, asked: list[int]) -> None:
    def starts(layout: object, flags: ServeFlags) -> bool:
        assert flags.max_model_len is not None
        assert flags.max_model_len_auto is False
        asked.append(flags.max_model_len)
        return flags.max_model_len <= longest

    monkeypatch.setattr(verdict, "starts", starts)


@pytest.mark.parametrize("upper", [1, 2, 3, 7, 8, 100, 2048])
def test_the_largest_length_is_the_last_that_starts(
    monkeypatch: pytest.MonkeyPatch, upper: int
) -> None:
    layout = llama()
    for longest in (0, 1, 2, 3, 5, 7, 8, 99, 100, 2047, 2048, 5000):
        asked: list[int] = []
        _length_threshold(monkeypatch, longest, asked)
        fitting = [n for n in range(1, upper + 1) if n <= longest]
        expected = max(fitting) if fitting else None
        assert largest_fitting_max_model_len(layout, FLAGS, upper) == expected
        assert asked[0] == 1  # length 1 is tried first: None when even that fails
        assert all(1 <= n <= upper for n in asked)


def _memory_threshold(monkeypatch: pytest.MonkeyPatch, least_mib: int, asked: list[int]) -> None:
    def starts(layout: object, flags: ServeFlags) -> bool:
        (memory,) = flags.kv_cache_memory_bytes
        assert memory % MIB == 0
        asked.append(memory // MIB)
        return memory >= least_mib * MIB

    monkeypatch.setattr(verdict, "starts", starts)


@pytest.mark.parametrize("least", [1, 2, 3, 4, 5, 7, 8, 9, 1000, 1023, 1024, 1025, 2**40])
def test_the_memory_search_finds_the_least_whole_mib(
    monkeypatch: pytest.MonkeyPatch, least: int
) -> None:
    asked: list[int] = []
    _memory_threshold(monkeypatch, least, asked)
    assert verdict._memory_needed_mib(llama(), FLAGS) == least
    assert asked[0] == 1
    assert max(asked) * MIB <= MAX_MEMORY_BYTES


def test_the_memory_search_stops_at_the_clis_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    _memory_threshold(monkeypatch, 2**40 + 1, asked)
    assert verdict._memory_needed_mib(llama(), FLAGS) is None
    assert max(asked) * MIB == MAX_MEMORY_BYTES == 2**60
    assert asked == [2**k for k in range(41)]  # doubling from 1 MiB


def test_a_verdict_that_starts_holds_the_plan_and_no_fixes() -> None:
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(16 * 2**30,), max_model_len=4096, max_num_seqs=7)
    serve, found, planned = serve_verdict(layout, flags)
    assert planned is not None
    _, plan = planned
    facts = plan.workers[0]
    assert found == Verdict(
        starts=True,
        tokens=facts.kv_cache_capacity_tokens or 0,
        concurrency=facts.max_concurrency or 0.0,
        max_model_len=4096,
        max_num_seqs=7,
        data_parallel_size=1,
    )
    assert found.error is None
    assert found.fixes == ()
    assert found.weights_do_not_fit == ""
    assert found.tokens > 0
    assert serve["max_num_seqs"].value == 7


def test_a_verdict_that_does_not_start_holds_the_error_and_may_skip_fixes() -> None:
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=2048, max_num_seqs=5)
    _, found, planned = serve_verdict(layout, flags, find_fixes=False)
    assert planned is None
    assert (found.starts, found.tokens, found.concurrency) == (False, 0, 0.0)
    assert (found.max_model_len, found.max_num_seqs, found.data_parallel_size) == (2048, 5, 1)
    assert found.fixes == ()
    assert found.error is not None
    assert "estimated maximum model length" in str(found.error)
    assert found.line == "Verdict: does NOT start (2,048-token requests do not fit)."
    _, with_fixes, _ = serve_verdict(layout, flags)
    assert with_fixes.fixes[0].startswith("--max-model-len ")
    assert with_fixes.error is not None


def test_the_line_of_a_verdict_whose_weights_do_not_fit() -> None:
    found = Verdict(
        starts=False,
        tokens=0,
        concurrency=0.0,
        max_model_len=100,
        max_num_seqs=1,
        data_parallel_size=1,
        weights_do_not_fit="the weights need 20 GiB",
    )
    assert found.line == "Verdict: does NOT start (the weights need 20 GiB)."
    assert (
        Verdict(
            starts=True,
            tokens=10,
            concurrency=0.5,
            max_model_len=100,
            max_num_seqs=1,
            data_parallel_size=1,
        ).line
        == "Verdict: starts; 10 tokens of KV cache; 0.50 requests of 100 tokens at once."
    )


def test_the_same_flags_give_equal_verdicts_whatever_the_error_object() -> None:
    # the error is vLLM's message as an exception object, a new one each time: it is
    # not part of a verdict's value
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=2048)
    _, first, _ = serve_verdict(layout, flags, find_fixes=False)
    _, second, _ = serve_verdict(layout, flags, find_fixes=False)
    assert first.error is not None
    assert second.error is not None
    assert first.error is not second.error
    assert first == second


def test_the_fixes_of_a_deployment_that_does_not_start() -> None:
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=1024)
    _, found, _ = serve_verdict(layout, flags)
    assert found.error is not None
    # vLLM's own estimate, in its error message, is the largest length that starts
    estimate = re.search(r"estimated maximum model length is (\d+)\.", str(found.error))
    assert estimate is not None
    best = int(estimate.group(1))
    memory = [fix for fix in found.fixes if fix.startswith("--kv-cache-memory")]
    assert len(memory) == 1
    mib = int(memory[0].split()[1].removesuffix("MiB"))
    assert verdict.starts(layout, replace(flags, kv_cache_memory_bytes=(mib * MIB,)))
    assert not verdict.starts(layout, replace(flags, kv_cache_memory_bytes=((mib - 1) * MIB,)))
    fp8 = resolve_serve_settings(layout, replace(flags, kv_cache_dtype="fp8"))
    _, plan = plan_deployment(layout, fp8.deployment)
    assert found.fixes == (
        f"--max-model-len {best}  (the largest that starts)",
        f"--kv-cache-memory {mib}MiB  ({mib / 1024:.2f} GiB per GPU, the least that starts "
        "1,024-token requests)",
        f"--kv-cache-dtype fp8  (starts with {plan.workers[0].kv_cache_capacity_tokens:,} tokens)",
    )
    # one token past the largest: the search's upper end is the length asked less one
    _, past, _ = serve_verdict(layout, replace(flags, max_model_len=best + 1))
    assert not past.starts
    assert past.fixes[0] == f"--max-model-len {best}  (the largest that starts)"
    # fp8 asked already: no fp8 fix; a block count given: no memory fix
    _, asked_fp8, _ = serve_verdict(
        layout, replace(flags, kv_cache_dtype="fp8", max_model_len=8192)
    )
    assert not any(fix.startswith("--kv-cache-dtype") for fix in asked_fp8.fixes)
    _, override, _ = serve_verdict(layout, replace(flags, num_gpu_blocks_override=4))
    assert not override.starts
    assert not any(fix.startswith("--kv-cache-memory") for fix in override.fixes)
    small = re.search(r"estimated maximum model length is (\d+)\.", str(override.error))
    assert small is not None
    assert override.fixes[0] == f"--max-model-len {small.group(1)}  (the largest that starts)"


@pytest.mark.parametrize("config_dtype", ["float16", "bfloat16"])
def test_fp8_is_offered_for_a_16_bit_cache(config_dtype: str) -> None:
    # --kv-cache-dtype auto follows the model's dtype (float16 or bfloat16); fp8 halves it
    layout = llama(config_dtype)
    flags = ServeFlags(kv_cache_memory_bytes=(100 * MIB,), max_model_len=1024)
    serve, found, _ = serve_verdict(layout, flags)
    assert serve["kv_cache_dtype"].value == config_dtype
    assert not found.starts
    assert found.fixes[-1].startswith("--kv-cache-dtype fp8  (starts with ")


def test_the_memory_fix_of_max_model_len_auto_is_for_the_full_length() -> None:
    # --max-model-len auto that fits nothing: the fix names the memory for the model's
    # own length (auto-fitting a shorter one would always need less)
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(MIB,), max_model_len_auto=True)
    _, found, _ = serve_verdict(layout, flags)
    assert not found.starts
    assert not any(fix.startswith("--max-model-len") for fix in found.fixes)
    memory = [fix for fix in found.fixes if fix.startswith("--kv-cache-memory")]
    mib = int(memory[0].split()[1].removesuffix("MiB"))
    fixed = replace(flags, max_model_len_auto=False)
    assert verdict.starts(layout, replace(fixed, kv_cache_memory_bytes=(mib * MIB,)))
    assert not verdict.starts(layout, replace(fixed, kv_cache_memory_bytes=((mib - 1) * MIB,)))
    assert f"starts {layout.derived_max_model_len:,}-token requests" in memory[0]
