"""Mutation round 2 (issue 24): serve checks the other serve tests left unread.

Each expected value is read from vLLM's source (the release named); the file and
function are given next to each check.
"""

from __future__ import annotations

import pytest

from kvpure.serve.flags import ServeFlags
from kvpure.versions import UnknownVllmVersionError

GIB = 2**30


# --- flags.py ---------------------------------------------------------------------


def test_expert_parallelism_is_off_unless_asked() -> None:
    # vllm/config/parallel.py ParallelConfig: enable_expert_parallel: bool = False
    # (EngineArgs.enable_expert_parallel takes that default).
    assert ServeFlags(kv_cache_memory_bytes=(GIB,)).enable_expert_parallel is False


@pytest.mark.parametrize(("given", "release"), [("0.26.0", "0.26"), (" 0.34.0 ", "0.34")])
def test_the_release_is_held_as_x_y(given: str, release: str) -> None:
    # The releases kvpure answers for are named X.Y (vLLM 0.26.0 -> "0.26").
    assert ServeFlags(kv_cache_memory_bytes=(GIB,), vllm_version=given).vllm_version == release


def test_an_unknown_release_is_refused_naming_the_flag() -> None:
    with pytest.raises(UnknownVllmVersionError, match="--vllm"):
        ServeFlags(kv_cache_memory_bytes=(GIB,), vllm_version="0.99")
