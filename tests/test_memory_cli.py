"""``kvpure plan MODEL --gpu NAME`` without ``--kv-cache-memory``: the memory budget in the plan.

The KV memory is vLLM's identity ``requested - weights - activation - non-torch
- CUDA graphs`` (``Worker.determine_available_memory``, vllm/v1/worker/gpu_worker.py,
vLLM 0.26); the ranges must equal planning at the band's ends exactly
(the planner called directly, and the CLI's exact ``--kv-cache-memory`` path).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.memory_profile.budget import ServeSettings as ProfileSettings
from kvpure.memory_profile.budget import estimate_memory_budget
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import plan_deployment
from kvpure.serve.defaults import resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.gpu_totals import torch_total
from kvpure.serve.gpus import find_gpu
from kvpure.serve.memory import VLLM_LOGGED_TOTALS
from kvpure.serve.verdict import starts
from tests.safetensors_files import write_safetensors

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "examples" / "llama3_8b.json")
SCOUT = str(ROOT / "examples" / "llama4_scout.json")
GIB = 2**30
H100_TOTAL = round(79.19 * GIB)  # vLLM's logged total on an H100 80GB (tests/data/memory_logs)
FIELDS = {
    "total_bytes",
    "gpu_memory_utilization",
    "weights_bytes",
    "activation_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "kv_cache_bytes",
    "kv_cache_bytes_low",
    "kv_cache_bytes_high",
    "terms",
}


PIN = ("--vllm", "0.26")


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    # vLLM 0.26's memory profile and serve defaults (pinned; issue 21)
    code = main(["plan", *argv, *PIN, "--json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, data


def memory_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    memory: list[dict[str, Any]] = data["memory"]
    return memory


def band_of(data: dict[str, Any]) -> dict[str, Any]:
    band: dict[str, Any] = data["memory_verdict"]
    return band


def layout_of(path: str) -> ModelLayout:
    return model_layout(parse_model_config(json.loads(Path(path).read_text())))


def as_int(value: object) -> int:
    assert isinstance(value, int)
    return value


def tokens_at(layout: ModelLayout, flags: ServeFlags) -> int | None:
    """Tokens of the plan (None when vLLM would not start), straight from the planner."""
    if not starts(layout, flags):
        return None
    _, plan = plan_deployment(layout, resolve_serve_settings(layout, flags).deployment)
    return plan.workers[0].kv_cache_capacity_tokens


def test_memory_object_per_worker_and_kv_is_requested_less_the_terms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = run_json([LLAMA, "--gpu", "H100-80GB", "-tp", "2"], capsys)
    assert code == 0
    memory = memory_of(data)
    assert [m["worker"] for m in memory] == [0, 1]
    for m in memory:
        assert set(m) >= FIELDS
        assert m["total_bytes"] == H100_TOTAL == VLLM_LOGGED_TOTALS["H100-80GB"]
        # vLLM 0.26's CacheConfig.gpu_memory_utilization default (vllm/config/cache.py)
        assert m["gpu_memory_utilization"] == 0.92
        requested = math.ceil(H100_TOTAL * 0.92)
        assert m["requested_bytes"] == requested
        graphs = as_int(m["cuda_graph_bytes"]) if m["cuda_graph_subtracted"] else 0
        assert (
            m["kv_cache_bytes"]
            == requested
            - as_int(m["weights_bytes"])
            - as_int(m["activation_bytes"])
            - as_int(m["non_torch_bytes"])
            - graphs
        )
        terms = m["terms"]
        assert isinstance(terms, dict)
        assert set(terms) == {"total", "weights", "activation", "non_torch", "cuda_graph"}
        # examples/ holds no weight files: every term is an estimate with a band.
        assert all(t["exact"] is False and t["error_bytes"] > 0 for t in terms.values())
        used = ("weights", "activation", "non_torch") + (
            ("cuda_graph",) if m["cuda_graph_subtracted"] else ()
        )
        band = math.ceil(math.sqrt(sum(terms[name]["error_bytes"] ** 2 for name in used)))
        band += math.ceil(terms["total"]["error_bytes"] * 0.92)
        assert m["kv_cache_bytes_high"] - as_int(m["kv_cache_bytes"]) == band
        assert as_int(m["kv_cache_bytes"]) - as_int(m["kv_cache_bytes_low"]) == band
    # The report beside it plans the central figure of each worker.
    assert data["available_memory"] == [m["kv_cache_bytes"] for m in memory]


def test_the_budget_uses_the_resolved_serve_settings(capsys: pytest.CaptureFixture[str]) -> None:
    # An L4 gets vLLM's small-GPU batch defaults (2048 tokens, 256 sequences) and
    # torch's total recorded for it (22.05 GiB, pytorch/pytorch#175666).
    code, data = run_json([LLAMA, "--gpu", "L4", "--gpu-memory-utilization", "0.95"], capsys)
    assert code == 0
    (m,) = memory_of(data)
    recorded = torch_total("L4")
    assert recorded is not None
    total = recorded.bytes
    (direct,) = estimate_memory_budget(
        parse_model_config(json.loads(Path(LLAMA).read_text())),
        ProfileSettings(
            vllm_version="0.26.0",
            total_gpu_bytes=total,
            gpu_memory_utilization=0.95,
            max_num_batched_tokens=2048,
            max_num_seqs=256,
        ),
        Parallelism(),
    )
    assert m["total_bytes"] == total
    assert m["kv_cache_bytes"] == direct.kv_cache_bytes
    assert m["activation_bytes"] == direct.activation_bytes


def test_the_range_is_the_plan_at_both_ends_of_the_band(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [LLAMA, "--gpu", "L4", "-tp", "2"]
    code, data = run_json(argv, capsys)
    assert code == 0
    memory = memory_of(data)
    low = tuple(as_int(m["kv_cache_bytes_low"]) for m in memory)
    high = tuple(as_int(m["kv_cache_bytes_high"]) for m in memory)
    layout = layout_of(LLAMA)
    base = ServeFlags(kv_cache_memory_bytes=low, gpu=find_gpu("L4"), tensor_parallel_size=2)
    expected_low = tokens_at(layout, base)
    expected_high = tokens_at(layout, replace(base, kv_cache_memory_bytes=high))
    band = band_of(data)
    assert band["kv_cache_capacity_tokens"] == [expected_low, expected_high]
    assert expected_low is not None
    assert expected_high is not None
    assert expected_low < expected_high
    # The same as the exact path given each end's figures.
    for figures, expected in ((low, expected_low), (high, expected_high)):
        given = ",".join(f"{f}B" for f in figures)
        code, exact = run_json([*argv, "--kv-cache-memory", given], capsys)
        verdict = exact["verdict"]
        assert isinstance(verdict, dict)
        assert verdict["kv_cache_capacity_tokens"] == expected
        assert "memory" not in exact  # --kv-cache-memory replaces the estimate


def test_verdict_from_the_band_starts_may_not_start_does_not_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, data = run_json([LLAMA, "--gpu", "H100-80GB"], capsys)
    assert (code, band_of(data)["verdict"]) == (0, "starts")
    # A T4 (15 GiB) cannot hold Llama-3-8B's 15 GiB of weights.
    code, data = run_json([LLAMA, "--gpu", "T4"], capsys)
    assert (code, band_of(data)["verdict"]) == (2, "does not start")
    assert band_of(data)["kv_cache_capacity_tokens"] == [0, 0]
    # A GPU sized so the central estimate is just what one 8,192-token request
    # needs (1 GiB: 32 layers x 8 KV heads x 128 x 2 x 2 B per token): the band's
    # low end falls short, its high end starts.
    code, probe = run_json([LLAMA, "--gpu-memory", "24GiB"], capsys)
    (m,) = memory_of(probe)
    used = as_int(m["requested_bytes"]) - as_int(m["kv_cache_bytes"])
    total = math.ceil((used + GIB + 2**20) / 0.92)
    code, data = run_json([LLAMA, "--gpu-memory", f"{total}B"], capsys)
    (m,) = memory_of(data)
    assert as_int(m["kv_cache_bytes_low"]) < GIB <= as_int(m["kv_cache_bytes_high"])
    assert m["terms"] == m["terms"] | {"total": {"exact": True, "error_bytes": 0}}
    assert (code, band_of(data)["verdict"]) == (0, "may not start")
    low, high = band_of(data)["kv_cache_capacity_tokens"]
    assert low == 0
    assert high >= 8192
    main(["plan", LLAMA, "--gpu-memory", f"{total}B", *PIN])
    assert capsys.readouterr().out.splitlines()[1].startswith("Memory verdict: may not start")


def test_kv_cache_memory_overrides_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    given = [LLAMA, "--gpu", "H100-80GB", "--kv-cache-memory", "20GiB"]
    code, data = run_json([*given, "--gpu-memory-utilization", "0.5", "-q", "fp8"], capsys)
    assert code == 0
    assert "memory" not in data
    assert "memory_verdict" not in data
    assert data["available_memory"] == [20 * GIB]
    code, plain = run_json(given, capsys)
    assert plain == data


ROTARY_BYTES = 4096 * 16 * 2
"""The tiny Llama's rotary cache: 4096 positions x head_dim 16 (64 / 4 heads) in bf16."""
SCALE_BYTES = 4 * 4
"""Its attention layer's four float32 scale buffers (_k/_v/_q/_prob_scale, attention.py)."""


def _tiny_llama(folder: Path) -> int:
    """A one-layer Llama with its safetensors file; returns the tensors' bytes."""
    h, inter, vocab = 64, 128, 128  # vocab a multiple of 64: no padding
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "torch_dtype": "bfloat16",
        "hidden_size": h,
        "intermediate_size": inter,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    }
    (folder / "config.json").write_text(json.dumps(config))
    p = "model.layers.0."
    return write_safetensors(
        folder / "model.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", (vocab, h)),
            p + "self_attn.q_proj.weight": ("BF16", (h, h)),
            p + "self_attn.k_proj.weight": ("BF16", (32, h)),
            p + "self_attn.v_proj.weight": ("BF16", (32, h)),
            p + "self_attn.o_proj.weight": ("BF16", (h, h)),
            p + "mlp.gate_proj.weight": ("BF16", (inter, h)),
            p + "mlp.up_proj.weight": ("BF16", (inter, h)),
            p + "mlp.down_proj.weight": ("BF16", (h, inter)),
            p + "input_layernorm.weight": ("BF16", (h,)),
            p + "post_attention_layernorm.weight": ("BF16", (h,)),
            "model.norm.weight": ("BF16", (h,)),
            "lm_head.weight": ("BF16", (vocab, h)),
        },
    )


def test_weights_are_exact_from_the_model_folders_safetensors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    total = _tiny_llama(folder)
    code, data = run_json([str(folder), "--gpu-memory", "8GiB"], capsys)
    assert code == 0
    (m,) = memory_of(data)
    # One GPU loads every tensor as stored, plus the rotary cos/sin cache vLLM
    # registers as a buffer (rotary_embedding/base.py: max_position x head_dim, bf16)
    # and the attention layer's scale buffers.
    assert m["weights_bytes"] == total + ROTARY_BYTES + SCALE_BYTES
    terms = m["terms"]
    assert isinstance(terms, dict)
    assert terms["weights"] == {"exact": True, "error_bytes": 0}
    # The same model read from the Hugging Face cache: its snapshot folder's headers.
    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc"
    snapshot.parent.mkdir(parents=True)
    folder.rename(snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    code, cached = run_json(["org/tiny", "--gpu-memory", "8GiB"], capsys)
    assert memory_of(cached) == memory_of(data)
    # Without the weight files the same config.json gives an estimate.
    (snapshot / "model.safetensors").unlink()
    code, estimated = run_json(["org/tiny", "--gpu-memory", "8GiB"], capsys)
    (e,) = memory_of(estimated)
    terms = e["terms"]
    assert isinstance(terms, dict)
    assert terms["weights"]["exact"] is False


def test_exact_weights_are_split_per_worker_as_vllm_shards_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tiny_llama(tmp_path)
    code, data = run_json([str(tmp_path), "--gpu-memory", "8GiB", "-tp", "2"], capsys)
    assert code == 0
    # By hand, vLLM 0.26's parallel layers (vllm/model_executor/layers/linear.py,
    # vocab_parallel_embedding.py): q/k/v, gate/up split their outputs (k, v one KV
    # head each), o/down their inputs, embedding and LM head their 128 vocabulary
    # rows (already a multiple of 64); the three norms stay whole.
    h, inter, vocab = 64, 128, 128
    split = (h * h + 2 * 32 * h + h * h + 2 * inter * h + h * inter + 2 * vocab * h) // 2
    # bf16; the rotary cache and the layer's scale buffers on each rank
    expected = (split + 3 * h) * 2 + ROTARY_BYTES + SCALE_BYTES
    assert [m["weights_bytes"] for m in memory_of(data)] == [expected, expected]
    assert all(m["terms"]["weights"]["exact"] for m in memory_of(data))


def test_text_report_prints_the_budget_as_vllm_logs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", LLAMA, "--gpu", "H100-80GB", *PIN]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("Memory verdict: starts")
    for text in (
        "total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.92) = 72.85GiB",
        "Model loading took ",
        "torch peak memory increase: ",
        "non-torch forward increase memory: ",
        "Estimated CUDA graph memory: ",
        "Available KV cache memory: ",
        "(estimated, +/- ",
        "Verdict: starts;",
    ):
        assert text in out, text


def test_sweep_over_tp_answers_the_smallest_tp_that_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [SCOUT, "--gpu", "H100-80GB", "--max-model-len", "32768"]
    assert main(["plan", *argv, *PIN, "--sweep", "tensor_parallel_size=1,2,4,8"]) == 0
    out = capsys.readouterr().out
    assert "smallest TP that starts: 4" in out
    code, data = run_json([*argv, "--sweep", "tensor_parallel_size=1,2,4,8"], capsys)
    rows = data["rows"]
    assert code == 0
    assert isinstance(rows, list)
    assert [r["verdict"] for r in rows] == ["does not start"] * 2 + ["starts"] * 2
    assert data["answer"] == "smallest TP that starts: 4"
    # Each row is the single plan with that TP.
    _, single = run_json([*argv, "-tp", "4"], capsys)
    assert rows[2]["kv_cache_capacity_tokens"] == band_of(single)["kv_cache_capacity_tokens"]
    assert rows[2]["memory"] == memory_of(single)
    # The longest max_model_len that starts at the low end: it starts, one more does not.
    layout = layout_of(SCOUT)
    longest = rows[2]["max_model_len_that_starts"][0]
    low = tuple(m["kv_cache_bytes_low"] for m in rows[2]["memory"])
    flags = ServeFlags(
        kv_cache_memory_bytes=low,
        gpu=find_gpu("H100-80GB"),
        tensor_parallel_size=4,
        vllm_version="0.26",  # as PIN
    )
    assert starts(layout, replace(flags, max_model_len=longest))
    assert not starts(layout, replace(flags, max_model_len=longest + 1))


def test_sweep_over_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", LLAMA, *PIN, "--sweep", "gpu=H100-80GB,L4,T4"]) == 0
    out = capsys.readouterr().out
    release, *lines = out.splitlines()
    assert release.startswith("vLLM release: 0.26")
    assert lines[0].split()[:2] == ["gpu", "verdict"]
    assert lines[2].split()[:2] == ["H100-80GB", "starts"]
    assert lines[4].split()[:4] == ["T4", "does", "not", "start"]
    assert "GPUs that start: H100-80GB, L4" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([LLAMA], ("--kv-cache-memory", "--gpu")),
        ([LLAMA, "--gpu", "L4", "--gpu-memory-utilization", "1.5"], ("--gpu-memory-utilization",)),
        ([LLAMA, "--gpu", "L4", "--gpu-memory-utilization", "x"], ("--gpu-memory-utilization",)),
        ([LLAMA, "--gpu", "L4", "--quantization", "int3"], ("--quantization", "fp8")),
        (
            [LLAMA, "--kv-cache-memory", "8GiB", "--sweep", "quantization=fp8,awq"],
            ("--sweep", "--kv-cache-memory"),
        ),
        ([LLAMA, "--sweep", "bogus=1,2"], ("--sweep",)),
    ],
)
def test_errors_are_one_line_and_exit_2(
    argv: list[str], words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    for word in words:
        assert word in err


def test_memory_profile_version_selects_the_release_estimated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A 0.19 server (the release of most bundled logs) does not subtract CUDA
    # graphs from the KV memory; 0.21 does (Worker.determine_available_memory,
    # vllm/v1/worker/gpu_worker.py); 0.26 runs Llama on Model Runner V2, whose
    # profile_cudagraph_memory returns 0. The CLI passes the release to the estimate.
    old_argv = [LLAMA, "--gpu", "H100-80GB", "--memory-profile-version", "0.19.0"]
    _, old = run_json(old_argv, capsys)
    _, new = run_json([LLAMA, "--gpu", "H100-80GB"], capsys)
    config = parse_model_config(json.loads(Path(LLAMA).read_text()))
    # Each release's own default utilization: 0.9 before 0.20, 0.92 from 0.20
    # (vllm/config/cache.py CacheConfig.gpu_memory_utilization).
    for data, version, utilization in ((old, "0.19.0", 0.9), (new, "0.26.0", 0.92)):
        (m,) = memory_of(data)
        (direct,) = estimate_memory_budget(
            config,
            ProfileSettings(
                total_gpu_bytes=H100_TOTAL,
                vllm_version=version,
                gpu_memory_utilization=utilization,
            ),
            Parallelism(),
        )
        assert m["kv_cache_bytes"] == direct.kv_cache_bytes
    (m_old,) = memory_of(old)
    (m_new,) = memory_of(new)
    assert m_old["cuda_graph_subtracted"] is False
    assert m_new["cuda_graph_subtracted"] is False
    _, v1 = run_json([LLAMA, "--gpu", "H100-80GB", "--memory-profile-version", "0.21.0"], capsys)
    assert memory_of(v1)[0]["cuda_graph_subtracted"] is True
    assert main(["plan", LLAMA, "--gpu", "H100", "--memory-profile-version", "0.9.2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kvpure: error: --memory-profile-version")
    assert len(err.splitlines()) == 1
