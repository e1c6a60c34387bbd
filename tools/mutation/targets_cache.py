"""Issue 24 (mutcache): the selections for ``cache/`` and ``memory_profile/`` modules.

Kept apart from ``run.py``'s own table so that each issue's entries can be edited
without touching another's. The fast files come first: ``pytest -x`` stops at the
first failure, so a mutant that breaks an answer is usually killed in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

# the replay's goldens (vLLM 0.26 and 0.34 logs), its typed errors, and the random
# traces replayed through vLLM 0.26's own KVCacheManager (tools/vllm_oracle)
_CACHE_TESTS = (
    # the managers called directly, against vLLM 0.26's own (round 4: a second)
    "tests/test_cache_manager_direct.py",
    "tests/test_cache_oracle_mutants.py",
    "tests/test_cache_manager_defaults.py",
    "tests/test_cache_refused_groups.py",
    "tests/test_cache_golden.py",
    "tests/test_cache_errors.py",
    "tests/test_cache_limits.py",
    "tests/test_cache_fast_paths.py",
    "tests/test_cache_golden_034.py",
    "tests/test_cache_unbounded_limit.py",
    "tests/test_cache_mutants.py",
    "tests/test_cache_oracle.py",
    # the releases' differences (0.33+'s Mamba refusal, lookahead hashes) and the random
    # traces vLLM 0.34's own manager replayed (45 s: last)
    "tests/test_cache_rules.py",
    "tests/test_cache_rules_mamba.py",
    "tests/test_cache_oracle_034.py",
)
_CACHE_TRACE_TESTS = (*_CACHE_TESTS, "tests/test_cache_hash_trace.py")

# the hardening tests of the headers by node id (the file's hub and FIFO tests take a
# minute); the 2**18-tensor header (20 s) last
_HARDENING = "tests/test_hardening_files.py::test_"
_SAFETENSORS_TESTS = (
    "tests/test_memory_safetensors.py",
    "tests/test_memory_safetensors_mutants.py",
    *(
        _HARDENING + name
        for name in (
            "a_shape_with_too_many_dimensions_is_refused",
            "a_huge_shape_product_is_refused_without_printing_it",
            "overlapping_offsets_are_refused",
            "adjacent_and_empty_tensors_do_not_overlap",
            "a_fifo_shard_is_refused",
            "shards_that_are_one_file_are_read_once",
            "shard_names_that_are_not_plain_are_typed_errors",
            "a_normal_sharded_folder_still_reads",
            "too_many_tensors_in_one_header_are_refused",
        )
    ),
)

# round 5 (mutwork): the tensors a config.json implies, against every parameter and
# buffer of vLLM 0.26's own model classes, part by part (the 39 bundled configs and small
# variants of them), plus the refusals. The five bundled MoE configs with hundreds of
# experts a layer (10-25 s each: Kimi-K2, MiniMax-M2, Qwen3-30B-A3B, Qwen3-VL-30B-A3B,
# GLM-4.5-Air) are left to test_memory_weights_small.py's variants with a few experts.
_SLOW_WEIGHT_CONFIGS = frozenset(
    {
        "kimi_k2_instruct.json",
        "minimax_m2.json",
        "qwen3_30b_a3b.json",
        "qwen3_vl_30b_a3b.json",
        "glm_4_5_air.json",
    }
)


def _weight_count_names() -> list[str]:
    data = Path(__file__).resolve().parents[2] / "tests/data/model_configs"
    names: set[str] = set()
    for file in ("vllm_weight_counts.json", "vllm_weight_counts_more.json"):
        names |= set(json.loads((data / file).read_text())["models"])
    return sorted(names - _SLOW_WEIGHT_CONFIGS)


_EXACT = "tests/test_memory_weights_exact.py::test_"
_WEIGHTS_TESTS = (
    "tests/test_memory_weights_small.py",
    "tests/test_memory_weights_layouts.py",
    *(_EXACT + f"each_part_equals_vllms_allocation[{name}]" for name in _weight_count_names()),
    _EXACT + "whisper_splits_its_linear_layers_but_not_its_embeddings",
    _EXACT + "a_bad_hybrid_pattern_is_a_typed_error",
    "tests/test_memory_params.py",
    "tests/test_memory_weights_vllm.py",
    _HARDENING + "a_config_naming_a_trillion_experts_is_refused_at_once",
    # last (about 10 s): vLLM 0.34's counts, the gated delta nets (Qwen3-Next, Qwen3.5/3.6)
    # and Kimi-Linear's KDA layers
    "tests/test_memory_weights_034.py",
)
_WEIGHT_MODULES = (
    "checkpoint_tensors",
    "checkpoint_layers",
    "model_traits",
    "hybrid_layers",
    "whisper_tensors",
)

# round 6 (mut7): vLLM's start-up memory profile, release by release: the rules read in
# each release's source, the public start-up logs (tests/data/memory_logs) and the CLI
_PROFILE_TESTS = (
    "tests/test_memory_release_sources.py",  # each record against its release's source
    "tests/test_memory_profile_mutants.py",  # 0.34's sizing, the graphs captured
    "tests/test_memory_releases.py",
    "tests/test_memory_release_flags.py",
    "tests/test_memory_budget.py",
    "tests/test_memory_logs.py",
    "tests/test_plan_release_line.py",
)
_PROFILE_MODULES = ("releases", "extensible", "estimate", "terms", "unmodelled", "render")

_BLOCK_POOL_TESTS = (
    "tests/test_cache_block_pool_vllm.py",
    "tests/test_cache_block_pool_trace.py",
    "tests/test_cache_limits.py",
    "tests/test_cache_fast_paths.py",
    "tests/test_cache_manager_direct.py",
    "tests/test_cache_golden.py",
    "tests/test_cache_golden_034.py",
    "tests/test_cache_oracle_mutants.py",
    "tests/test_events_lookahead.py",
    "tests/test_cache_oracle_partial_tail.py",
)
_REPLAY_TESTS = (
    "tests/test_cache_replay_edges.py",
    "tests/test_cache_golden.py",
    "tests/test_cache_errors.py",
    "tests/test_cache_limits.py",
    "tests/test_cache_record_ids.py",
    "tests/test_cache_manager_direct.py",
    "tests/test_cache_golden_034.py",
    "tests/test_cache_oracle_mutants.py",
    "tests/test_cache_refused_groups.py",
    # 0.34's int32 token ids, refused by the replay itself when caching is off
    "tests/test_cache_rules.py::test_034_refuses_a_token_id_outside_int32_naming_the_op",
    # last: the random traces vLLM 0.26's manager replayed (watermarks) and 0.34's partial
    # tails (lookahead hashes, L = 1)
    "tests/test_cache_oracle.py",
    "tests/test_cache_oracle_partial_tail.py",
)

CACHE_TARGETS: dict[str, tuple[str, ...]] = {
    # the Python loops are the reference the C loops stand in for: the random-state and
    # random-trace comparisons switch the C loops off, and the goldens replay on both
    "kvpure/cache/pool_loops.py": (
        "tests/test_cache_pool_loops.py",
        "tests/test_cache_pool_model.py",
        "tests/test_cache_golden.py",
        "tests/test_cache_golden_034.py",
    ),
    **{
        f"kvpure/cache/{name}.py": _CACHE_TESTS
        for name in (
            "request",
            "events",
            "manager",
            "single_type",
            "coordinator",
        )
    },
    # the window managers (no release differences in them): vLLM 0.26's own manager
    # replayed the traces these files hold (hand-made and random), plus the goldens
    "kvpure/cache/windowed.py": (
        "tests/test_cache_manager_direct.py",
        "tests/test_cache_oracle_mutants.py",
        "tests/test_cache_golden.py",
        "tests/test_cache_oracle.py",
    ),
    # the seen-set count: when it applies, checked against the unbounded replay (itself
    # checked against vLLM by the cache oracle) on many workloads, and the cap's refusals
    "kvpure/cache/unbounded.py": (
        "tests/test_cache_unbounded_edges.py",  # its refusals and progress calls, the replay's
        "tests/test_cache_unbounded_applies.py",
        "tests/test_cache_unbounded_limit.py",
        "tests/test_cache_unbounded_set.py",
        "tests/test_cache_hash_trace.py",  # hash-id traces: the trace-block set
    ),
    "kvpure/cache/trace.py": _CACHE_TRACE_TESTS,
    # round 5: without the stream file's memory check (53 s of a 64 s baseline; it reads
    # a file through workload_files, which no mutant of workload.py changes)
    "kvpure/cache/workload.py": (
        "tests/test_cache_workload.py",
        "tests/test_cache_workload_vllm.py",
        "tests/test_cache_text_workload.py",
        # hash-id traces on an EAGLE deployment take the token path
        "tests/test_cache_hash_trace.py::test_with_eagle_lookahead_a_trace_takes_the_token_path",
        *(
            "tests/test_cache_workload_stream.py::test_" + name
            for name in (
                "the_first_bad_line_is_reported_without_reading_the_rest",
                "lines_split_on_newline_only",
                "a_line_over_the_limit_is_refused_and_one_at_it_is_read",
                "a_fifo_and_a_folder_are_refused_before_opening",
                "array_items_are_read_one_at_a_time_across_chunks",
            )
        ),
    ),
    # round 6 (mut8): the block pool against vLLM's own BlockPool traces (0.26, 0.33), its
    # refusals, the replays that drive it (goldens, vLLM 0.26's manager called directly and
    # on random traces) and the BlockStored events of lookahead servers
    "kvpure/cache/block_pool.py": _BLOCK_POOL_TESTS,
    # round 6 (mut8): the replay's records against the goldens of both releases and vLLM
    # 0.26's manager, its typed refusals and record limits
    "kvpure/cache/replay.py": _REPLAY_TESTS,
    "kvpure/memory_profile/safetensors_header.py": _SAFETENSORS_TESTS,
    # round 6 (mut7): the per-release rules, 0.34's extensible cache and the estimate
    **{f"kvpure/memory_profile/{name}.py": _PROFILE_TESTS for name in _PROFILE_MODULES},
    **{f"kvpure/memory_profile/{name}.py": _WEIGHTS_TESTS for name in _WEIGHT_MODULES},
}
