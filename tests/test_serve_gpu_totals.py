"""Torch-reported GPU totals: each recorded figure read back from its quoted source text.

The figures are torch's (``total_memory`` / ``mem_get_info``), the total vLLM 0.26's
memory profile starts from (vllm/utils/mem_utils.py ``MemorySnapshot.measure``),
quoted from public issues (URLs in kvpure.serve.gpu_totals); the tests parse the
quoted text themselves and compare it with the stored bytes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings as ProfileSettings
from kvpure.memory_profile.budget import estimate_memory_budget
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import parse_model_config
from kvpure.serve.gpu_totals import GIB_ROUNDING, TOTAL_QUOTES, figure_bytes, torch_total
from kvpure.serve.gpus import GPUS, find_gpu
from kvpure.serve.memory import DRIVER_RESERVE, vllm_total_memory

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
GIB = 2**30
MIB = 2**20
QUOTES = [q for quotes in TOTAL_QUOTES.values() for q in quotes]


def test_every_quote_states_its_stored_bytes() -> None:
    assert len(QUOTES) >= 15
    for q in QUOTES:
        assert q.figure in q.quote, q.url
        assert q.url.startswith("https://"), q.url
        if q.kind == "bytes":
            (printed,) = re.findall(r"\((\d+) bytes\)", q.quote)
            assert q.bytes == int(printed), q.url
            # deviceQuery prints the same bytes in MiB rounded to a whole number.
            (mbytes,) = re.findall(r"(\d+) MBytes", q.quote)
            assert round(q.bytes / MIB) == int(mbytes), q.url
            assert q.error_bytes == 0
        else:
            gib = re.search(r"(\d+\.\d\d) ?GiB", q.figure)
            assert gib is not None
            assert q.bytes == round(float(gib.group(1)) * GIB), q.url
            assert f"{q.bytes / GIB:.2f} GiB" == q.figure
            assert q.error_bytes == GIB_ROUNDING == math.ceil(0.005 * GIB)
        assert figure_bytes(q.figure) == q.bytes


def test_quotes_belong_to_catalogue_gpus_and_lie_at_or_below_the_driver_figure() -> None:
    for name, quotes in TOTAL_QUOTES.items():
        gpu = GPUS[name]
        for q in quotes:
            assert q.gpu == name
            # torch never sees more than the driver reports; NVIDIA keeps some back.
            assert q.bytes - q.error_bytes <= gpu.total_memory_bytes, q.url
            if gpu.vendor == "nvidia":
                assert q.bytes < gpu.total_memory_bytes, q.url
            # ... and within the old fallback's band (driver less up to twice the H100 reserve).
            assert q.bytes >= gpu.total_memory_bytes - 2 * DRIVER_RESERVE, q.url


@pytest.mark.parametrize("figure", ["79.3 GiB", "79.32GB", "(12 MBytes)", "", "79.32 GiB extra"])
def test_a_malformed_figure_is_a_typed_error(figure: str) -> None:
    with pytest.raises(InvalidFieldError) as err:
        figure_bytes(figure)
    assert err.value.field == "figure"


def test_the_total_spans_every_source() -> None:
    a100 = torch_total("A100-80GB")
    assert a100 is not None
    low = round(79.14 * GIB) - GIB_ROUNDING
    high = round(79.32 * GIB) + GIB_ROUNDING
    assert a100.bytes == (low + high) // 2
    assert a100.bytes + a100.error_bytes == high
    assert a100.bytes - a100.error_bytes in (low - 1, low)  # the band covers [low, high]
    assert not a100.exact
    for q in a100.quotes:
        assert a100.bytes - a100.error_bytes <= q.bytes <= a100.bytes + a100.error_bytes
    # One exact deviceQuery figure: the total is exact.
    a100_40 = torch_total("A100-40GB")
    assert a100_40 is not None
    assert a100_40.exact
    assert a100_40.bytes == 42_298_834_944
    assert torch_total("H20") is None
    assert torch_total("GB200") is None


def test_vllm_total_memory_prefers_the_recorded_torch_total() -> None:
    a100 = vllm_total_memory(find_gpu("A100-80GB"), given=False)
    recorded = torch_total("A100-80GB")
    assert recorded is not None
    assert a100.term.bytes == recorded.bytes
    assert a100.term.error_bytes == recorded.error_bytes
    assert a100.term.error_bytes < DRIVER_RESERVE
    assert "torch's total on the A100-80GB" in a100.source
    exact = vllm_total_memory(find_gpu("A100-40GB"), given=False)
    assert exact.term.exact
    assert exact.term.bytes == 42_298_834_944
    assert exact.term.error_bytes == 0
    # Without a recorded figure: the driver's total less the H100's reserve.
    h20 = vllm_total_memory(find_gpu("H20"), given=False)
    assert h20.term.bytes == find_gpu("H20").total_memory_bytes - DRIVER_RESERVE
    assert h20.term.error_bytes == DRIVER_RESERVE
    # --gpu-memory stays exact whatever the catalogue holds.
    given = vllm_total_memory(find_gpu("A100-80GB"), given=True)
    assert given.term.exact
    assert given.term.bytes == find_gpu("A100-80GB").total_memory_bytes


def _plan(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["plan", *argv, "--json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0
    return data


@pytest.mark.parametrize("name", ["A100-80GB", "L40S", "RTX-5090"])
def test_the_cli_budget_starts_from_the_recorded_total(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = torch_total(name)
    assert recorded is not None
    data = _plan(
        [
            LLAMA,
            "--gpu",
            name,
            "--gpu-memory-utilization",
            "0.9",
            "--memory-profile-version",
            "0.26",
        ],
        capsys,
    )
    (m,) = data["memory"]
    assert m["total_bytes"] == recorded.bytes
    assert m["terms"]["total"] == {"exact": False, "error_bytes": recorded.error_bytes}
    assert f"torch's total on the {name}" in m["total_source"]
    assert m["requested_bytes"] == math.ceil(recorded.bytes * 0.9)
    settings = data["settings"]
    (direct,) = estimate_memory_budget(
        parse_model_config(json.loads(Path(LLAMA).read_text())),
        ProfileSettings(
            vllm_version="0.26.0",
            total_gpu_bytes=recorded.bytes,
            gpu_memory_utilization=0.9,
            max_num_batched_tokens=settings["max_num_batched_tokens"]["value"],
            max_num_seqs=settings["max_num_seqs"]["value"],
        ),
        Parallelism(),
    )
    assert m["kv_cache_bytes"] == direct.kv_cache_bytes
    widen = math.ceil(recorded.error_bytes * 0.9)
    assert m["kv_cache_bytes_high"] - direct.kv_cache_bytes_high == widen
    assert direct.kv_cache_bytes_low - m["kv_cache_bytes_low"] == widen


def test_the_h20_keeps_the_driver_fallback_in_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    (m,) = _plan([LLAMA, "--gpu", "H20"], capsys)["memory"]
    assert m["total_bytes"] == find_gpu("H20").total_memory_bytes - DRIVER_RESERVE
    assert m["terms"]["total"]["error_bytes"] == DRIVER_RESERVE
    assert "the driver's" in m["total_source"]
