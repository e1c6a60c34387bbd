"""vLLM 0.33's and 0.34's serve defaults, rule by rule, against 0.26's.

Each expected value is read from the source of the release named (the wheels
unpacked at /work/vllm/<version>/vllm when these tests were written); each test
names the file and function. 0.26's side of every rule stays in
test_serve_defaults.py (pinned to ``--vllm 0.26``).
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import checkpoint_kv_cache_dtype, parse_model_config
from kvpure.models.deployment import AttentionBackend, Deployment
from kvpure.models.derive import derive_kv_cache_specs
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import plan_deployment
from kvpure.serve.defaults import batch_defaults, resolve_serve_settings
from kvpure.serve.flags import ServeFlags, SpeculativeConfig
from kvpure.serve.gpus import GPUS, custom_gpu
from kvpure.serve.rules import (
    SERVE_RULES,
    SERVE_RULES_0_26,
    SERVE_RULES_0_33,
    SERVE_RULES_0_34,
    serve_rules,
)
from kvpure.specs import MambaSpec, cdiv

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "model_configs"
GIB = 2**30
LLAMA = str(ROOT / "examples" / "llama3_8b.json")


def config(name: str) -> dict[str, Any]:
    path = ROOT / "examples" / name
    if not path.exists():
        path = CONFIGS / name
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def layout(name: str) -> ModelLayout:
    return model_layout(parse_model_config(config(name)))


def settings(name: str, version: str, **given: Any) -> dict[str, object]:
    flags = ServeFlags(kv_cache_memory_bytes=(24 * GIB,), vllm_version=version, **given)
    serve = resolve_serve_settings(layout(name), flags)
    return {key: setting.value for key, setting in serve.settings}


# --- the records ------------------------------------------------------------------


def test_one_record_per_release_built_from_the_older() -> None:
    assert set(SERVE_RULES) == {"0.26", "0.33", "0.34"}
    assert serve_rules("0.34.0") is SERVE_RULES_0_34
    with pytest.raises(InvalidFieldError, match=r"unknown vLLM version '0\.99'"):
        serve_rules("0.99")
    # 0.34 differs from 0.33 only in the rules listed here (the rest is 0.33's).
    changed = {
        f.name
        for f in fields(SERVE_RULES_0_34)
        if getattr(SERVE_RULES_0_34, f.name) != getattr(SERVE_RULES_0_33, f.name)
    }
    assert changed == {
        "vllm_version",
        "v1_runner_speculative_methods",
        "async_scheduling_speculative_methods",
        "extensible_kv_cache_by_default",
        # 0.34 registers more draft/MTP architectures named *Model (generative classes)
        "generative_by_registry",
    }


# --- batch tiers: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults (0.33 = 0.34) ----


@pytest.mark.parametrize("rules", [SERVE_RULES_0_33, SERVE_RULES_0_34])
def test_gpus_of_160_gib_or_more_get_16384_tokens_in_both_contexts(rules: Any) -> None:
    # ``if device_memory >= 160 * GiB_bytes``: 16384 / 1024 for LLM_CLASS and OPENAI_API_SERVER
    for gpu in ("B200", "GB200", "B300", "MI300X", "MI325X", "MI355X"):
        assert batch_defaults(GPUS[gpu], "serve", rules) == (16384, 1024)
        assert batch_defaults(GPUS[gpu], "llm", rules) == (16384, 1024)
    # 0.26 had no such tier: B200 served 8192 tokens.
    assert batch_defaults(GPUS["B200"], "serve", SERVE_RULES_0_26) == (8192, 1024)
    # H200 (140 GiB) stays in the 70 GiB tier.
    assert batch_defaults(GPUS["H200"], "serve", rules) == (8192, 1024)
    # The line is inclusive and has no "a100" exception.
    assert batch_defaults(custom_gpu(total_memory_bytes=160 * GIB), "serve", rules) == (16384, 1024)
    below = custom_gpu(total_memory_bytes=160 * GIB - 1)
    assert batch_defaults(below, "serve", rules) == (8192, 1024)
    a100 = replace(custom_gpu(total_memory_bytes=160 * GIB), device_name="NVIDIA A100 future")
    assert batch_defaults(a100, "serve", rules) == (16384, 1024)


def test_gb10_is_kept_out_of_the_70_gib_tier() -> None:
    # ``is_gb10 = current_platform.is_device_capability((12, 1))``; ``and not is_gb10``
    gb10 = custom_gpu(total_memory_bytes=128 * GIB, compute_capability=(12, 1))
    assert batch_defaults(gb10, "serve", SERVE_RULES_0_34) == (2048, 256)
    assert batch_defaults(gb10, "llm", SERVE_RULES_0_34) == (8192, 256)
    assert batch_defaults(gb10, "serve", SERVE_RULES_0_26) == (8192, 1024)
    rtx_pro = GPUS["RTX-PRO-6000"]  # 12.0, not GB10
    assert batch_defaults(rtx_pro, "serve", SERVE_RULES_0_34) == (8192, 1024)


def test_the_cli_resolves_the_tier_for_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", LLAMA, "--gpu", "B200", "--kv-cache-memory", "24GiB", "--json"]
    for version, tokens in (("0.34", 16384), ("0.33", 16384), ("0.26", 8192)):
        assert main([*argv, "--vllm", version]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["vllm_version"] == version
        assert data["settings"]["max_num_batched_tokens"]["value"] == tokens


# --- async scheduling: vllm/config/vllm.py VllmConfig.__post_init__ ------------------


@pytest.mark.parametrize("method", ["ngram", "medusa", "suffix", "draft_model", "eagle3"])
def test_0_34_keeps_async_scheduling_on_whatever_the_speculative_method(method: str) -> None:
    # 0.34: ``elif self.scheduler_config.async_scheduling is None:`` turns it off only
    # for pooling runners, executors without support and ROCm DeepEP DBO.
    spec = SpeculativeConfig(method=method, num_speculative_tokens=2)
    assert settings("llama3_8b.json", "0.34", speculative_config=spec)["async_scheduling"] is True
    # The flag is taken too (no speculative check in the explicit branch).
    got = settings("llama3_8b.json", "0.34", speculative_config=spec, async_scheduling=True)
    assert got["async_scheduling"] is True


def test_0_33_turns_it_off_only_where_the_v1_runner_takes_over() -> None:
    # 0.33: use_v2_model_runner is False for methods "suffix" / "custom_class"
    # (_get_v2_model_runner_unsupported_features); then v1_async_sched_incompat.
    suffix = SpeculativeConfig(method="suffix", num_speculative_tokens=2)
    assert (
        settings("llama3_8b.json", "0.33", speculative_config=suffix)["async_scheduling"] is False
    )
    with pytest.raises(InvalidFieldError, match="--async-scheduling"):
        settings("llama3_8b.json", "0.33", speculative_config=suffix, async_scheduling=True)
    ngram = SpeculativeConfig(method="ngram", num_speculative_tokens=2)
    assert settings("llama3_8b.json", "0.33", speculative_config=ngram)["async_scheduling"] is True
    # 0.26 turned n-gram (CPU) off.
    assert settings("llama3_8b.json", "0.26", speculative_config=ngram)["async_scheduling"] is False


# --- prefix caching and the Mamba cache mode -------------------------------------------
# vllm/engine/arg_utils.py EngineArgs._set_default_chunked_prefill_and_prefix_caching_args
# (default_prefix_caching = model_config.is_prefix_caching_supported, "hybrid" -> True);
# vllm/model_executor/models/config.py MambaModelConfig.verify_and_update_config
# (none -> "align"); vllm/config/cache.py MambaCacheMode = Literal["align", "none"].


@pytest.mark.parametrize("version", ["0.33", "0.34"])
def test_hybrids_get_prefix_caching_and_align_mode(version: str) -> None:
    got = settings("granite_4_0_h_small.json", version)
    assert (got["enable_prefix_caching"], got["mamba_cache_mode"]) == (True, "align")
    # NemotronH supports Mamba prefix caching: 0.26 chose "all", 0.34 always "align".
    got = settings("nemotron_nano_9b_v2.json", version, enable_prefix_caching=True)
    assert got["mamba_cache_mode"] == "align"
    got = settings("granite_4_0_h_small.json", version, enable_prefix_caching=False)
    assert (got["enable_prefix_caching"], got["mamba_cache_mode"]) == (False, "none")
    # --mamba-cache-mode has no effect (arg_utils: _MAMBA_CACHE_MODE_DEPRECATION_MESSAGE)...
    got = settings("granite_4_0_h_small.json", version, mamba_cache_mode="none")
    assert got["mamba_cache_mode"] == "align"
    # ...and "all" is no longer a mode.
    with pytest.raises(InvalidFieldError, match="--mamba-cache-mode"):
        settings("granite_4_0_h_small.json", version, mamba_cache_mode="all")


def test_0_26_kept_prefix_caching_opt_in_for_hybrids() -> None:
    got = settings("granite_4_0_h_small.json", "0.26")
    assert (got["enable_prefix_caching"], got["mamba_cache_mode"]) == (False, "none")
    got = settings("nemotron_nano_9b_v2.json", "0.26", enable_prefix_caching=True)
    assert got["mamba_cache_mode"] == "all"


def test_the_library_path_resolves_the_same_defaults() -> None:
    # Deployment leaves them to the release, as vllm serve does.
    hybrid = layout("granite_4_0_h_small.json")
    derived = derive_kv_cache_specs(hybrid, Deployment(kv_cache_memory_bytes=8 * GIB))
    assert derived.settings.enable_prefix_caching is True
    assert derived.settings.mamba_cache_mode == "align"
    old = derive_kv_cache_specs(
        hybrid, Deployment(kv_cache_memory_bytes=8 * GIB, vllm_version="0.26")
    )
    assert (old.settings.enable_prefix_caching, old.settings.mamba_cache_mode) == (False, "none")


# --- hybrid block size: vllm/platforms/interface.py Platform._align_hybrid_block_size ----


def test_hybrid_block_is_the_smallest_aligned_block_holding_a_mamba_state() -> None:
    # align mode: attn_block_size = align * cdiv(mamba_page, align * attn_page_1_token),
    # align = max(kernel block 16, block_size 16); mamba_block_size = block_size.
    hybrid = layout("granite_4_0_h_small.json")
    derived = derive_kv_cache_specs(hybrid, Deployment(kv_cache_memory_bytes=8 * GIB))
    specs = derived.kv_cache_specs[0].ordered_values()
    mamba = next(s for s in specs if isinstance(s, MambaSpec))
    attention = next(s for s in specs if not isinstance(s, MambaSpec))
    one_token = attention.page_size_bytes // attention.block_size
    state = derived.mamba_state_bytes
    assert derived.settings.block_size == 16 * cdiv(state, 16 * one_token)
    assert mamba.block_size == derived.settings.block_size
    assert mamba.page_size_bytes == attention.page_size_bytes
    # 0.26 with prefix caching on picked mode "all" for this model: blocks aligned
    # to lcm(mamba chunk size, 16), a different (larger) block.
    old = derive_kv_cache_specs(
        hybrid,
        Deployment(kv_cache_memory_bytes=8 * GIB, vllm_version="0.26", mamba_cache_mode="all"),
    )
    assert old.settings.block_size != derived.settings.block_size
    assert old.settings.block_size % (hybrid.mamba_chunk_size or 256) == 0


def test_mla_hybrids_align_attention_blocks_to_128() -> None:
    # 0.33/0.34: ``if model_config.use_mla: kernel_block_alignment_size = max(..., 128)``
    assert SERVE_RULES_0_34.hybrid_mla_block_alignment == 128
    assert SERVE_RULES_0_26.hybrid_mla_block_alignment == 1


# --- backends: vllm/platforms/cuda.py _get_backend_priorities (0.33 = 0.34) -------------


def test_multimodal_prefix_lms_try_the_triton_composites_first() -> None:
    # ``*([TRITON_FLASH_ATTN] if device_capability.major == 9 and use_mm_prefix else [])``
    # and ``*([TRITON_FLASHINFER] if use_mm_prefix else [])`` on 10.x; Gemma-3 is an
    # mm-prefix LM (model_arch_config_convertor.py MM_PREFIX_LM_MODELS).
    h100 = settings("gemma3_4b_hf.json", "0.34", gpu=GPUS["H100-80GB"])
    assert (h100["attention_backend"], h100["block_size"]) == ("TRITON_FLASH_ATTN", 16)
    b200 = settings("gemma3_4b_hf.json", "0.34", gpu=GPUS["B200"])
    # TritonFlashInferBackend: kernel_block_sizes=(64,) -> get_preferred_block_size 64
    assert (b200["attention_backend"], b200["block_size"]) == ("TRITON_FLASHINFER", 64)
    old = settings("gemma3_4b_hf.json", "0.26", gpu=GPUS["B200"])
    assert (old["attention_backend"], old["block_size"]) == ("FLASHINFER", 16)
    # A text-only model keeps FlashAttention.
    assert settings("llama3_8b.json", "0.34", gpu=GPUS["H100-80GB"])["attention_backend"] == (
        "FLASH_ATTN"
    )
    assert AttentionBackend.TRITON_FLASHINFER.default_block_size == 64


# --- YaRN: vllm/config/model.py _get_and_verify_max_len ---------------------------------


def test_yarn_max_model_len_is_not_scaled_by_its_factor() -> None:
    qwen = config("qwen3_0_6b.json") | {
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        }
    }
    yarn = model_layout(parse_model_config(qwen))
    flags = ServeFlags(kv_cache_memory_bytes=(24 * GIB,))
    # 0.33/0.34: "yarn" is in the no-factor list: max_position_embeddings (40960) stands.
    for version in ("0.33", "0.34"):
        serve = resolve_serve_settings(yarn, replace(flags, vllm_version=version))
        assert serve["max_model_len"].value == 40960
        derived, _ = plan_deployment(yarn, serve.deployment)
        assert derived.settings.max_model_len == 40960
    # 0.26: original_max_position_embeddings x factor = 131072.
    serve = resolve_serve_settings(yarn, replace(flags, vllm_version="0.26"))
    assert serve["max_model_len"].value == 131072
    with pytest.raises(InvalidFieldError, match="limit of 40960"):
        derive_kv_cache_specs(
            yarn, Deployment(kv_cache_memory_bytes=24 * GIB, max_model_len=131072)
        )


# --- gpu_memory_utilization: vllm/config/cache.py ----------------------------------------


def test_gpu_memory_utilization_defaults() -> None:
    # 0.26 and 0.33: Field(default=0.92). 0.34: None, resolved_gpu_memory_utilization
    # = 1.0 when enable_extensible_kv_cache, which _resolve_extensible_kv_cache turns on
    # on CUDA/ROCm unless kv_cache_memory_bytes or num_gpu_blocks_override is set.
    given = settings("llama3_8b.json", "0.34")  # --kv-cache-memory given
    assert (given["gpu_memory_utilization"], given["enable_extensible_kv_cache"]) == (0.92, False)
    for version in ("0.26", "0.33"):
        got = settings("llama3_8b.json", version, kv_cache_memory_given=False)
        assert got["gpu_memory_utilization"] == 0.92
        assert "enable_extensible_kv_cache" not in got
    est = settings("llama3_8b.json", "0.34", kv_cache_memory_given=False)
    assert (est["gpu_memory_utilization"], est["enable_extensible_kv_cache"]) == (1.0, True)
    fixed = settings(
        "llama3_8b.json", "0.34", kv_cache_memory_given=False, num_gpu_blocks_override=100
    )
    assert (fixed["gpu_memory_utilization"], fixed["enable_extensible_kv_cache"]) == (0.92, False)
    flag = settings(
        "llama3_8b.json", "0.34", kv_cache_memory_given=False, gpu_memory_utilization=0.8
    )
    assert flag["gpu_memory_utilization"] == 0.8


# --- kv_cache_dtype: vllm/utils/torch_utils.py resolve_kv_cache_dtype_string --------------


def test_kv_cache_dtype_shows_what_vllm_resolves() -> None:
    assert settings("llama3_8b.json", "0.34")["kv_cache_dtype"] == "bfloat16"
    assert settings("llama3_8b.json", "0.34", kv_cache_dtype="fp8")["kv_cache_dtype"] == "fp8"
    # A ModelOpt checkpoint's kv_cache_quant_algo FP8 -> "fp8_e4m3"
    # (get_kv_cache_quant_algo_string, MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP).
    quant = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    modelopt = config("llama3_8b.json") | {"quantization_config": quant}
    assert checkpoint_kv_cache_dtype(parse_model_config(modelopt)) == "fp8_e4m3"
    fp8_layout = model_layout(parse_model_config(modelopt))
    serve = resolve_serve_settings(fp8_layout, ServeFlags(kv_cache_memory_bytes=(GIB,)))
    assert serve["kv_cache_dtype"].value == "fp8_e4m3"
    assert serve.deployment.kv_cache_dtype == "fp8_e4m3"
    # A scheme object of static 8-bit floats is fp8 too; NVFP4 is not planned by kvpure.
    scheme = {
        "quant_method": "modelopt",
        "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
    }
    assert checkpoint_kv_cache_dtype(parse_model_config({"quantization_config": scheme})) == (
        "fp8_e4m3"
    )
    nvfp4 = config("llama3_8b.json") | {
        "quantization_config": {"quant_method": "modelopt", "kv_cache_quant_algo": "NVFP4"}
    }
    with pytest.raises(InvalidFieldError, match="nvfp4"):
        resolve_serve_settings(
            model_layout(parse_model_config(nvfp4)), ServeFlags(kv_cache_memory_bytes=(GIB,))
        )
    # Not ModelOpt: the quant method's KV scheme is not read.
    other = {"quantization_config": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8"}}
    assert checkpoint_kv_cache_dtype(parse_model_config(other)) is None


# --- Model Runner V2: vllm/config/vllm.py VllmConfig.max_concurrent_batches --------------


def test_the_release_flows_into_the_planner_settings() -> None:
    # 0.34: ``if async_scheduling: return pp_size + 1`` (V2 everywhere); 0.26's V1
    # runner: 2 without PP, pp otherwise.
    llama = layout("llama3_8b.json")
    new = derive_kv_cache_specs(
        llama, Deployment(kv_cache_memory_bytes=GIB, pipeline_parallel_size=2)
    )
    assert new.settings.vllm_version == "0.34"
    assert new.settings.async_scheduling is True
    assert new.settings.use_v2_model_runner is True
    assert new.settings.max_concurrent_batches == 3
    old = derive_kv_cache_specs(
        llama,
        Deployment(kv_cache_memory_bytes=GIB, pipeline_parallel_size=2, vllm_version="0.26.0"),
    )
    assert old.settings.vllm_version == "0.26"
    assert old.settings.max_concurrent_batches == 2


def test_unknown_release_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", LLAMA, "--kv-cache-memory", "8GiB", "--vllm", "0.99"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == "kvpure: error: --vllm: unknown vLLM version '0.99' (known: 0.26, 0.33, 0.34)"
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "--vllm VERSION" in capsys.readouterr().out
