"""Issue 24 (mutcache): the selections for ``cache/`` and ``memory_profile/`` modules.

Kept apart from ``run.py``'s own table so that each issue's entries can be edited
without touching another's. The fast files come first: ``pytest -x`` stops at the
first failure, so a mutant that breaks an answer is usually killed in seconds.
"""

from __future__ import annotations

# the replay's goldens (vLLM 0.26 and 0.34 logs), its typed errors, and the random
# traces replayed through vLLM 0.26's own KVCacheManager (tools/vllm_oracle)
_CACHE_TESTS = (
    "tests/test_cache_golden.py",
    "tests/test_cache_errors.py",
    "tests/test_cache_limits.py",
    "tests/test_cache_fast_paths.py",
    "tests/test_cache_golden_034.py",
    "tests/test_cache_unbounded_limit.py",
    "tests/test_cache_mutants.py",
    "tests/test_cache_oracle.py",
)
_CACHE_TRACE_TESTS = (*_CACHE_TESTS, "tests/test_cache_hash_trace.py")

_SAFETENSORS_TESTS = (
    "tests/test_memory_safetensors.py",
    "tests/test_memory_safetensors_mutants.py",
    "tests/test_hardening_files.py",
    "tests/test_memory_params.py",
    "tests/test_memory_sharding.py",
)

CACHE_TARGETS: dict[str, tuple[str, ...]] = {
    **{
        f"kvpure/cache/{name}.py": _CACHE_TESTS
        for name in (
            "request",
            "events",
            "manager",
            "single_type",
            "coordinator",
            "unbounded",
            "windowed",
        )
    },
    "kvpure/cache/trace.py": _CACHE_TRACE_TESTS,
    "kvpure/cache/workload.py": (
        "tests/test_cache_workload.py",
        "tests/test_cache_workload_stream.py",
        "tests/test_cache_text_workload.py",
    ),
    "kvpure/memory_profile/safetensors_header.py": _SAFETENSORS_TESTS,
    "kvpure/memory_profile/checkpoint_tensors.py": _SAFETENSORS_TESTS,
}
