"""The encoder outputs vLLM's profiling run keeps through the decoder's dummy run.

Expected values come from vLLM's source and the bundled start-up logs:

- ``GPUModelRunner.profile_run`` (v1/worker/gpu_model_runner.py) runs the encoder on
  ``encoder_budget // max_tokens_per_item`` dummy items and keeps the outputs in
  ``self.encoder_cache`` until the sampler's dummy run is over; 0.11.0 and 0.12.0
  expand each output to the item's placeholder tokens (``expanded_outputs``), 0.10.x and
  0.13.0 on keep it as it is;
- Qwen3-VL's encoder output is ``out_hidden_size * (1 + len(deepstack_visual_indexes))``
  wide (qwen3_vl.py, ``Qwen3_VisionTransformer.forward``), and a video's placeholder
  tokens are its soft tokens x 12.5 (``Qwen3VLProcessingInfo.get_max_video_tokens``);
- the vLLM 0.12.0 Qwen3-VL-30B-A3B logs: "Encoder cache will be initialized with a budget
  of 153600 tokens, and profiled with 1 video items of the maximum feature size".
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.budget import ServeSettings, estimate_memory_budget
from kvpure.memory_profile.estimate import COEFFICIENTS
from kvpure.memory_profile.evaluation import KVError, kv_errors
from kvpure.memory_profile.mm_profile import (
    EncoderBatch,
    encoder_batch,
    encoder_output_width,
    encoder_outputs_bytes,
)
from kvpure.memory_profile.profile_logs import GIB, load_profile_logs, parse_profile_log
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import HFConfig, parse_model_config

ROOT = Path(__file__).resolve().parent.parent
LOGS = {log.name: log for log in load_profile_logs(ROOT / "tests" / "data" / "memory_logs")}
QWEN3_VL = (
    "qwen3_vl_30b_a3b_h100_v0_12_0_tp2_seqs64.json",
    "qwen3_vl_30b_a3b_h100_v0_12_0_tp2_seqs256.json",
)


def _config(name: str) -> HFConfig:
    path = ROOT / "tests" / "data" / "model_configs" / f"{name}.json"
    return parse_model_config(json.loads(path.read_text()))


def test_qwen3_vl_output_width_carries_the_deepstack_features() -> None:
    config = _config("qwen3_vl_30b_a3b")  # out_hidden_size 2048, deepstack at [8, 16, 24]
    assert encoder_output_width(config) == 2048 * 4
    assert all(LOGS[name].encoder_output_width == 2048 * 4 for name in QWEN3_VL)


def test_the_logged_video_budget_gives_the_rows_each_release_keeps() -> None:
    config = _config("qwen3_vl_30b_a3b")
    batch = encoder_batch(
        config, version=(0, 12), max_num_batched_tokens=8192, budget_tokens=153_600
    )
    assert batch == EncoderBatch(budget_tokens=153_600, item_tokens=153_600, item_rows=12_288)
    assert batch.items == 1  # "profiled with 1 video items"
    assert batch.kept_rows((0, 12)) == 153_600  # expanded to the placeholder tokens
    assert batch.kept_rows((0, 11)) == 153_600
    assert batch.kept_rows((0, 13)) == 12_288
    assert batch.kept_rows((0, 10)) == 12_288
    # From 0.13 get_max_video_tokens returns the soft tokens: the budget is the rows.
    later = encoder_batch(
        config, version=(0, 13), max_num_batched_tokens=8192, budget_tokens=12_288
    )
    assert later == EncoderBatch(budget_tokens=12_288, item_tokens=12_288, item_rows=12_288)
    charged, below = encoder_outputs_bytes(
        _config("qwen3_vl_30b_a3b"),
        version=(0, 12),
        max_num_batched_tokens=8192,
        dtype_bytes=2,
        budget_tokens=153_600,
    )
    assert (charged, below) == (153_600 * 8192 * 2, 0)
    assert round(charged / GIB, 2) == 2.34


def test_the_qwen3_vl_logs_fall_in_the_band_with_the_outputs_charged() -> None:
    # Both logs were about 2.6 GiB under the estimate at 64 and at 256 sequences alike
    # (the decoder's peaks differ by 0.9 GiB): the outputs are held beside the decoder's peak.
    for name in QWEN3_VL:
        log = LOGS[name]
        (now,) = kv_errors([log], COEFFICIENTS)
        (before,) = kv_errors([replace(log, encoder_output_width=0)], COEFFICIENTS)
        assert 2.5 < before.error_gib < 2.8
        assert not before.within_band
        assert now.within_band
        assert round(before.error_gib - now.error_gib, 2) == 2.34


def test_gemma_3_keeps_thirty_two_images_of_256_rows() -> None:
    # 8192 batched tokens // mm_tokens_per_image (256) images; gemma3_mm.py.
    config = _config("gemma3_4b_hf")
    batch = encoder_batch(config, version=(0, 19), max_num_batched_tokens=8192)
    assert batch is not None
    assert (batch.items, batch.kept_rows((0, 19))) == (32, 8192)
    charged, below = encoder_outputs_bytes(
        config, version=(0, 19), max_num_batched_tokens=8192, dtype_bytes=2
    )
    assert (charged, below) == (8192 * 2560 * 2, 0)
    log = LOGS["gemma_3_27b_it_tp1.json"]
    (now,) = kv_errors([log], COEFFICIENTS)
    (before,) = kv_errors([replace(log, encoder_output_width=0)], COEFFICIENTS)
    assert round(before.error_gib, 2) == 0.29  # 0.01 over its band
    assert not before.within_band
    assert now.within_band
    assert round(before.error_gib - now.error_gib, 3) == round(8192 * 5376 * 2 / GIB, 3)


def test_uncharged_outputs_widen_the_band_below_only() -> None:
    log = LOGS["llama4_scout_tp4.json"]
    (err,) = kv_errors([log], COEFFICIENTS)
    assert err.band_below_gib == pytest.approx(8192 * 5120 * 2 / GIB)
    high = replace(err, logged_gib=err.predicted_gib - err.band_gib - err.band_below_gib / 2)
    low = replace(err, logged_gib=err.predicted_gib + err.band_gib + err.band_below_gib / 2)
    assert high.within_band
    assert not low.within_band


def test_a_qwen3_vl_plan_without_the_budget_widens_its_band_by_the_default_video() -> None:
    config = _config("qwen3_vl_30b_a3b")
    settings = ServeSettings(
        total_gpu_bytes=round(79.19 * GIB), vllm_version="0.12.0", max_num_seqs=64
    )
    (plain, *_) = estimate_memory_budget(config, settings, Parallelism(tp=2))
    given = replace(settings, encoder_budget_tokens=153_600)
    (logged, *_) = estimate_memory_budget(config, given, Parallelism(tp=2))
    outputs = 153_600 * 8192 * 2
    assert plain.kv_cache_bytes - logged.kv_cache_bytes == outputs
    below = plain.kv_cache_bytes - plain.kv_cache_bytes_low
    above = plain.kv_cache_bytes_high - plain.kv_cache_bytes
    assert below - above == outputs
    assert logged.kv_cache_bytes - logged.kv_cache_bytes_low == above
    # From 0.13 the same video keeps its 12,288 soft-token rows only.
    later = replace(settings, vllm_version="0.19.0")
    (plan_019, *_) = estimate_memory_budget(config, later, Parallelism(tp=2))
    widened = plan_019.kv_cache_bytes - plan_019.kv_cache_bytes_low
    assert widened - (plan_019.kv_cache_bytes_high - plan_019.kv_cache_bytes) == 12_288 * 8192 * 2


def test_text_only_models_keep_no_encoder_term() -> None:
    config = _config("qwen2_7b")
    assert encoder_output_width(config) == 0
    assert encoder_outputs_bytes(
        config, version=(0, 19), max_num_batched_tokens=8192, dtype_bytes=2
    ) == (0, 0)
    text_only = [log for log in LOGS.values() if not log.encoder_output_width]
    assert all(e.band_below_gib == 0 for e in kv_errors(text_only, COEFFICIENTS))


def test_bad_encoder_records_and_settings_are_refused_by_name() -> None:
    record = json.loads((ROOT / "tests/data/memory_logs" / QWEN3_VL[0]).read_text())
    record["encoder"] = {"output_width": "wide"}
    with pytest.raises(InvalidFieldError, match="encoder: output_width"):
        parse_profile_log("x.json", record)
    record["encoder"] = [8192]
    with pytest.raises(InvalidFieldError, match="encoder"):
        parse_profile_log("x.json", record)
    with pytest.raises(InvalidFieldError, match="encoder_budget_tokens"):
        ServeSettings(total_gpu_bytes=1 << 30, encoder_budget_tokens=0)


def test_the_kv_error_band_is_symmetric_without_an_encoder() -> None:
    err = KVError(name="x", predicted_gib=10.0, logged_gib=9.7, band_gib=0.3)
    assert err.within_band
    assert replace(err, logged_gib=10.3).within_band
    assert not replace(err, logged_gib=9.6).within_band


QWEN3_VL_CONFIG = str(ROOT / "tests" / "data" / "model_configs" / "qwen3_vl_30b_a3b.json")
PLAN = [
    "plan",
    QWEN3_VL_CONFIG,
    "--gpu",
    "H100-80GB",
    "--tensor-parallel-size",
    "2",
    "--max-num-seqs",
    "64",
    "--vllm",
    "0.26",
    "--memory-profile-version",
    "0.12.0",
    "--json",
]


def _kv(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    assert main([*PLAN, *argv]) == 0
    worker = json.loads(capsys.readouterr().out)["memory"][0]
    return {k: int(worker[k]) for k in ("kv_cache_bytes", "kv_cache_bytes_low")}


def test_the_cli_charges_the_logged_encoder_budget(capsys: pytest.CaptureFixture[str]) -> None:
    plain = _kv([], capsys)
    given = _kv(["--encoder-budget", "153600"], capsys)
    assert plain["kv_cache_bytes"] - given["kv_cache_bytes"] == 153_600 * 8192 * 2
    assert plain["kv_cache_bytes_low"] == given["kv_cache_bytes_low"]


@pytest.mark.parametrize("bad", ["0", "x", "-5", "1.5"])
def test_the_cli_refuses_a_bad_encoder_budget_in_one_line(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*PLAN, "--encoder-budget", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert "--encoder-budget" in err
    assert len(err.splitlines()) == 1
