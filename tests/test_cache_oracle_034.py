"""Random traces against the real vLLM 0.34.0 KVCacheManager and scheduler rules.

``tests/data/vllm-0.34.0-oracle/cache_replay_random.json.gz`` holds 811 traces
(``tools/vllm_oracle/gen_cache_traces.py``: full attention, sliding window, chunked
local, R-SWA, Mamba "align" and not, hybrids; plus EAGLE/EAGLE3/MTP with lookahead
hashes (L = 1), with ``disable_lookahead_block_hashes`` (the trailing-block drop), with
``disable_eagle_block_drop``, DFlash, and Mamba/full-attention models given an EAGLE
config, and multimodal items with lookahead hashes) and what vLLM 0.34.0's own
manager, hasher and ``_mamba_block_aligned_split`` did on each
(``tools/vllm_oracle/cache_replay_vllm034.py``), or the error it raised.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from kvpure.cache import replay_trace
from kvpure.errors import KVPureError
from tests.conftest import DATA_DIR
from tests.test_cache_oracle import _same

ORACLE: dict[str, Any] = json.loads(
    gzip.decompress((DATA_DIR / "vllm-0.34.0-oracle" / "cache_replay_random.json.gz").read_bytes())
)
CASES: list[dict[str, Any]] = ORACLE["cases"]
CHUNK = 60


def _lookahead(case: dict[str, Any]) -> int:
    header: dict[str, int] = case["vllm"].get("header", {})
    return header.get("num_hash_lookahead_tokens", 0)


def test_the_cases_cover_lookahead_the_block_drop_and_mamba_align() -> None:
    ok = [c for c in CASES if "error" not in c["vllm"]]
    assert len(ok) >= 500
    assert sum(_lookahead(c) == 1 for c in ok) >= 50  # EAGLE with lookahead hashes
    assert sum(c["vllm"]["header"]["use_eagle"] for c in ok) >= 20  # the block drop
    names = {c["trace"]["name"] for c in ok}
    assert any("mamba" in n and "eaglized" in n for n in names)
    assert any(n.startswith("full_mamba_") for n in names)
    assert any(n.endswith("_dflash") for n in names)
    with_mm = [c for c in ok if c["trace"]["name"].endswith("_mm") and _lookahead(c) == 1]
    assert len(with_mm) >= 30  # multimodal items inside the lookahead window


@pytest.mark.parametrize("start", range(0, len(CASES), CHUNK))
def test_replay_agrees_with_vllm_034(start: int) -> None:
    for case in CASES[start : start + CHUNK]:
        name = case["trace"]["name"]
        want = case["vllm"]
        if "error" in want:
            with pytest.raises(KVPureError):
                replay_trace(case["trace"], vllm_version="0.34")
            continue
        got = replay_trace(case["trace"], vllm_version="0.34")
        header: Any = got["kv_cache_config"]
        for key, value in want["header"].items():
            assert header[key] == value, f"{name}.kv_cache_config.{key}"
        _same(got["records"], want["records"], f"{name}.records")
        _same(got["final_state"], want["final_state"], f"{name}.final_state")
