"""``kvpure cache`` plans its pool as ``kvpure plan`` does: --vllm's serve defaults, hub ids.

The analyzer used to plan with kvpure's fixed defaults (FlashMLA's 64-token
blocks for every MLA model on every GPU). It now resolves the GPU-dependent
defaults through :mod:`kvpure.serve`, so ``--gpu`` changes the attention
backend, hence the block size and the number of blocks, as it does in vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEEPSEEK_V2_LITE = ROOT / "examples" / "deepseek_v2_lite.json"
LLAMA = ROOT / "examples" / "llama3_8b.json"
PROMPT = list(range(1, 41))


def _workload(tmp_path: Path) -> str:
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(json.dumps({"prompt_token_ids": PROMPT}) for _ in range(2)) + "\n")
    return str(path)


def _cache(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["cache", *args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    data: dict[str, Any] = json.loads(out)
    assert isinstance(data.pop("peak_rss_bytes"), int)  # a measurement, different each run
    return data


def _plan_block_size(capsys: pytest.CaptureFixture[str], *args: str) -> int:
    main(["plan", *args, "--json"])
    value: int = json.loads(capsys.readouterr().out)["settings"]["block_size"]["value"]
    return value


@pytest.mark.parametrize(
    ("gpu", "block_size"),
    [
        # vllm/platforms/cuda.py _get_backend_priorities: on capability 10 the MLA list
        # starts with FLASHINFER_MLA, whose get_supported_kernel_block_sizes is [32, 64]
        # (vllm/v1/attention/backends/mla/flashinfer_mla.py): 32-token blocks.
        ("B200", 32),
        # capability 8.9 (L4) and 9.0 (H100): FLASH_ATTN_MLA first; on the L4 it is
        # refused and TRITON_MLA serves; both give vLLM's default 16-token blocks.
        ("L4", 16),
        ("H100-80GB", 16),
    ],
)
def test_the_gpu_picks_the_mla_backend_and_so_the_block_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, gpu: str, block_size: int
) -> None:
    options = ["--gpu", gpu, "--kv-cache-memory", "1GiB", "--max-model-len", "4096"]
    data = _cache(capsys, _workload(tmp_path), "--model", str(DEEPSEEK_V2_LITE), *options)
    assert data["actual"]["block_size"] == block_size
    # the same deployment through `kvpure plan` agrees
    assert _plan_block_size(capsys, str(DEEPSEEK_V2_LITE), *options) == block_size
    # two identical 40-token prompts: the second hits every full block but the last
    # token's (vLLM never hits the whole prompt)
    hits = ((len(PROMPT) - 1) // block_size) * block_size
    assert data["actual"]["prefix_cache_hits"] == hits


def test_the_model_is_read_from_the_local_hub_cache(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(key, raising=False)
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    rev = "0123456789abcdef0123456789abcdef01234567"
    snapshot = hub / "models--meta-llama--Meta-Llama-3-8B" / "snapshots" / rev
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(LLAMA.read_text())
    (hub / "models--meta-llama--Meta-Llama-3-8B" / "refs").mkdir()
    (hub / "models--meta-llama--Meta-Llama-3-8B" / "refs" / "main").write_text(rev)
    workload = _workload(tmp_path)
    options = ["--kv-cache-memory", "1GiB", "--max-model-len", "4096"]
    by_id = _cache(capsys, workload, "--model", "meta-llama/Meta-Llama-3-8B", *options)
    by_path = _cache(capsys, workload, "--model", str(LLAMA), *options)
    assert by_id == by_path
    assert by_id["actual"]["prefix_cache_hits"] == 32  # two full 16-token blocks of 40 tokens


def test_a_model_missing_from_the_cache_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    code = main(
        ["cache", _workload(tmp_path), "--model", "nobody/none", "--kv-cache-memory", "1GiB"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "nobody/none" in err


GRANITE_HYBRID = ROOT / "examples" / "granite_4_0_h_small.json"


@pytest.mark.parametrize(
    ("vllm", "prefix_caching"),
    [
        # vllm 0.26.0 vllm/engine/arg_utils.py
        # _set_default_chunked_prefill_and_prefix_caching_args: "Hybrid models support
        # prefix caching but keep it opt-in": default = supported and not is_hybrid
        ("0.26", False),
        # vllm 0.34.0, same function: default = model_config.is_prefix_caching_supported
        ("0.34", True),
    ],
)
def test_the_sweep_plans_with_the_serve_defaults_of_the_vllm_release(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, vllm: str, prefix_caching: bool
) -> None:
    """An attention + Mamba hybrid: prefix caching is opt-in in 0.26, on by default in 0.34."""
    options = ["--kv-cache-memory", "4GiB", "--max-model-len", "8192", "--vllm", vllm]
    data = _cache(capsys, _workload(tmp_path), "--model", str(GRANITE_HYBRID), *options)
    assert data["vllm_version"] == vllm
    assert data["actual"]["enable_caching"] is prefix_caching
    # two identical 40-token prompts, shorter than one 528-token Mamba-aligned block:
    # nothing is looked up when caching is off, and nothing can hit when it is on
    assert data["actual"]["prefix_cache_queries"] == (2 * len(PROMPT) if prefix_caching else 0)
    # `kvpure plan` of the same release agrees
    main(["plan", str(GRANITE_HYBRID), *options, "--json"])
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["enable_prefix_caching"]["value"] is prefix_caching
