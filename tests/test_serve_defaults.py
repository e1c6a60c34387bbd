"""vLLM 0.26's serve defaults, rule by rule; each expected value is read from vLLM's source.

The source is vLLM 0.26.0 (unpacked at /tmp/vllmsrc/vllm when these tests were
written); each test names the file and function its expected value comes from.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyrsistent import pmap

from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import AttentionBackend
from kvpure.models.layout import ModelLayout
from kvpure.report.model_plan import capacity_report
from kvpure.serve.defaults import Source, batch_defaults, resolve_serve_settings
from kvpure.serve.flags import KVTransferConfig, ServeFlags, SpeculativeConfig
from kvpure.serve.gpus import GPUS, custom_gpu, find_gpu
from kvpure.serve.rules import SERVE_RULES_0_26
from kvpure.specs import cdiv

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def layout(name: str) -> ModelLayout:
    path = ROOT / "examples" / f"{name}.json"
    if not path.exists():
        path = ROOT / "tests" / "data" / "serve" / f"{name}.json"
    return model_layout(parse_model_config(json.loads(path.read_text())))


def flags(**given: Any) -> ServeFlags:
    # These are vLLM 0.26's rules: pinned to 0.26 (0.33/0.34: test_serve_rules.py).
    return ServeFlags(kv_cache_memory_bytes=(24 * GIB,), **{"vllm_version": "0.26", **given})


def resolve(model: str, **given: Any) -> dict[str, object]:
    serve = resolve_serve_settings(layout(model), flags(**given))
    return {name: setting.value for name, setting in serve.settings}


# --- GPU catalogue ---------------------------------------------------------------


def test_gpu_names_are_case_and_dash_insensitive_with_aliases() -> None:
    assert find_gpu("h100") is find_gpu("H100-80GB") is find_gpu("h100 80gb")
    assert find_gpu("a100").name == "A100-80GB"
    assert find_gpu("rtx4090").compute_capability == (8, 9)
    assert find_gpu("MI300X").is_rocm


def test_an_unknown_gpu_lists_the_known_names() -> None:
    with pytest.raises(InvalidFieldError) as info:
        find_gpu("H1000")
    message = str(info.value)
    assert message.startswith("--gpu: unknown GPU; known: H100-80GB")
    for name in ("H200", "L4", "A100-40GB", "B200", "MI300X", "RTX-5090", "--gpu-memory"):
        assert name in message


# --- batch defaults: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults ------


@pytest.mark.parametrize(
    ("gpu", "serve", "llm"),
    [
        # >= 70 GiB and no "a100" in the device name: 8192/1024 (serve), 16384/1024 (LLM)
        ("H100-80GB", (8192, 1024), (16384, 1024)),
        ("H200", (8192, 1024), (16384, 1024)),
        ("B200", (8192, 1024), (16384, 1024)),
        ("MI300X", (8192, 1024), (16384, 1024)),
        ("H20", (8192, 1024), (16384, 1024)),
        # A100 80GB is excluded by name (PR #17885): 2048/256 and 8192/256
        ("A100-80GB", (2048, 256), (8192, 256)),
        ("A100-40GB", (2048, 256), (8192, 256)),
        ("L4", (2048, 256), (8192, 256)),
        ("L40S", (2048, 256), (8192, 256)),
        ("RTX-4090", (2048, 256), (8192, 256)),
    ],
)
def test_batch_defaults_by_gpu_and_usage_context(
    gpu: str, serve: tuple[int, int], llm: tuple[int, int]
) -> None:
    assert batch_defaults(GPUS[gpu], "serve", SERVE_RULES_0_26) == serve
    assert batch_defaults(GPUS[gpu], "llm", SERVE_RULES_0_26) == llm


def test_the_70_gib_line_is_inclusive() -> None:
    # get_batch_defaults: ``device_memory >= 70 * GiB_bytes``
    assert batch_defaults(custom_gpu(total_memory_bytes=70 * GIB), "serve", SERVE_RULES_0_26) == (
        8192,
        1024,
    )
    assert batch_defaults(
        custom_gpu(total_memory_bytes=70 * GIB - 1), "serve", SERVE_RULES_0_26
    ) == (2048, 256)


def test_batch_defaults_are_capped_by_length_and_each_other() -> None:
    # arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args:
    # max_num_batched_tokens = min(max_num_seqs * max_model_len, default);
    # max_num_seqs = min(default, max_num_batched_tokens).
    got = resolve("llama3_8b", gpu=GPUS["H100-80GB"], max_model_len=4, max_num_seqs=2)
    assert got["max_num_batched_tokens"] == 8
    got = resolve("llama3_8b", gpu=GPUS["H100-80GB"], max_num_batched_tokens=512)
    assert got["max_num_seqs"] == 512
    got = resolve("llama3_8b", gpu=GPUS["L4"], usage_context="llm")
    assert (got["max_num_batched_tokens"], got["max_num_seqs"]) == (8192, 256)


# --- attention backend and block size: vllm/platforms/cuda.py _get_backend_priorities,
# --- vllm/platforms/rocm.py _get_backend_priorities, each backend's checks, and
# --- AttentionBackend.get_preferred_block_size (vllm/v1/attention/backend.py)


@pytest.mark.parametrize(
    ("model", "gpu", "backend", "block"),
    [
        ("llama3_8b", "H100", "FLASH_ATTN", 16),
        ("llama3_8b", "B200", "FLASHINFER", 16),  # SM100: FlashInfer first
        ("llama3_8b", "RTX-5090", "FLASH_ATTN", 16),
        ("llama3_8b", "MI300X", "ROCM_ATTN", 16),
        # gpt-oss has sinks: FlashAttention 2 (< 9.0, and 12.x) has none, FlashInfer
        # only on SM100, ROCm attention none -> Triton
        ("gpt_oss_20b", "H100", "FLASH_ATTN", 16),
        ("gpt_oss_20b", "A100", "TRITON_ATTN", 16),
        ("gpt_oss_20b", "L4", "TRITON_ATTN", 16),
        ("gpt_oss_20b", "RTX-5090", "TRITON_ATTN", 16),
        ("gpt_oss_20b", "B200", "FLASHINFER", 16),
        ("gpt_oss_20b", "MI300X", "TRITON_ATTN", 16),
        # MLA: FlashAttention MLA on 9.x (MultipleOf(16) -> 16), FlashInfer MLA on 10.x
        # (kernel sizes [32, 64] -> 32), Triton MLA elsewhere and on ROCm
        ("deepseek_v3", "H100", "FLASH_ATTN_MLA", 16),
        ("deepseek_v3", "H200", "FLASH_ATTN_MLA", 16),
        ("deepseek_v3", "B200", "FLASHINFER_MLA", 32),
        ("deepseek_v2_lite", "L4", "TRITON_MLA", 16),
        ("deepseek_v2_lite", "A100", "TRITON_MLA", 16),
        ("deepseek_v2_lite", "RTX-5090", "TRITON_MLA", 16),
        ("deepseek_v2_lite", "MI300X", "TRITON_MLA", 16),
    ],
)
def test_backend_and_block_size_by_gpu(model: str, gpu: str, backend: str, block: int) -> None:
    got = resolve(model, gpu=find_gpu(gpu))
    assert (got["attention_backend"], got["block_size"]) == (backend, block)


def test_fp8_kv_cache_moves_hopper_mla_to_flashmla() -> None:
    # FlashAttnMLABackend.supported_kv_cache_dtypes has no fp8; FlashMLA's kernel is 64.
    got = resolve("deepseek_v3", gpu=GPUS["H100-80GB"], kv_cache_dtype="fp8")
    assert (got["attention_backend"], got["block_size"]) == ("FLASHMLA", 64)


def test_fp8_kv_cache_on_ampere_leaves_flash_attention() -> None:
    # FlashAttentionBackend.supports_kv_cache_dtype: fp8 only with FA3 on 9.x.
    got = resolve("llama3_8b", gpu=GPUS["A100-80GB"], kv_cache_dtype="fp8")
    assert got["attention_backend"] == "FLASHINFER"


def test_a_kv_connector_skips_rocm_attention() -> None:
    # rocm.py _get_backend_priorities: ROCM_ATTN only without a KV connector.
    connector = KVTransferConfig(kv_connector="NixlConnector", kv_connector_extra_config=pmap())
    got = resolve("llama3_8b", gpu=GPUS["MI300X"], kv_transfer_config=connector)
    assert got["attention_backend"] == "TRITON_ATTN"


def test_a_given_backend_is_checked_for_the_gpu() -> None:
    # FlashMLABackend.supports_compute_capability: 9.x and 10.x only.
    with pytest.raises(
        InvalidFieldError, match=r"not valid on L4.*compute capability 9\.x or 10\.x"
    ):
        resolve("deepseek_v2_lite", gpu=GPUS["L4"], attention_backend=AttentionBackend.FLASHMLA)
    with pytest.raises(InvalidFieldError, match="MLA"):
        resolve("llama3_8b", attention_backend=AttentionBackend.TRITON_MLA)


def test_a_block_size_no_kernel_takes_is_refused() -> None:
    # FlashAttention, FlashInfer, Triton: kernel sizes MultipleOf(16) / [16, 32, 64].
    with pytest.raises(InvalidFieldError, match="no attention backend"):
        resolve("llama3_8b", gpu=GPUS["H100-80GB"], block_size=8)
    assert resolve("llama3_8b", block_size=32)["block_size"] == 32


# --- async scheduling: vllm/config/vllm.py VllmConfig.__post_init__ ---------------


def test_async_scheduling_is_on_for_generation_models() -> None:
    serve = resolve_serve_settings(layout("llama3_8b"), flags())
    assert serve["async_scheduling"].value is True
    assert serve["async_scheduling"].source is Source.VLLM_DEFAULT
    assert serve.deployment.async_scheduling is True


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("eagle", True),
        ("eagle3", True),
        ("deepseek_mtp", True),  # an MTPModelTypes member, folded into "mtp"
        ("ngram_gpu", True),
        ("dspark", True),
        ("ngram", False),
        ("medusa", False),
        ("draft_model", False),
        ("suffix", False),
    ],
)
def test_async_scheduling_by_speculative_method(method: str, expected: bool) -> None:
    spec = SpeculativeConfig(method=method, num_speculative_tokens=3)
    assert resolve("llama3_8b", speculative_config=spec)["async_scheduling"] is expected


def test_async_scheduling_off_for_pooling_and_unpadded_drafter() -> None:
    pooling = replace(layout("qwen2_7b"), architecture="Qwen2ForSequenceClassification")
    serve = resolve_serve_settings(pooling, flags())
    assert serve["async_scheduling"].value is False
    spec = SpeculativeConfig(method="eagle3", disable_padded_drafter_batch=True)
    assert resolve("llama3_8b", speculative_config=spec)["async_scheduling"] is False


def test_async_scheduling_given_with_a_method_it_cannot_run_is_refused() -> None:
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    with pytest.raises(InvalidFieldError, match="--async-scheduling"):
        resolve("llama3_8b", speculative_config=spec, async_scheduling=True)
    assert resolve("llama3_8b", async_scheduling=False)["async_scheduling"] is False


def test_async_scheduling_doubles_the_tokens_in_flight() -> None:
    # PlannerSettings.max_concurrent_batches: 2 with async scheduling and no PP
    # (vLLM's VllmConfig.max_concurrent_batches); SlidingWindowSpec.max_memory_usage_bytes:
    # cdiv(min(window - 1 + in_flight, max_model_len), block) + 1 blocks per request.
    gemma = layout("gemma3_12b")
    on = resolve_serve_settings(gemma, flags(gpu=GPUS["H100-80GB"], max_model_len=32768))
    off = resolve_serve_settings(
        gemma, flags(gpu=GPUS["H100-80GB"], max_model_len=32768, async_scheduling=False)
    )
    blocks = [
        [g.blocks_per_request for g in capacity_report(gemma, s.deployment).groups]
        for s in (on, off)
    ]
    assert blocks[0] == [cdiv(1023 + 2 * 8192, 16) + 1] * 5 + [2048] == [1089] * 5 + [2048]
    assert blocks[1] == [577] * 5 + [2048]


# --- prefix caching and mamba cache mode: arg_utils.py
# --- _set_default_chunked_prefill_and_prefix_caching_args and
# --- vllm/model_executor/models/config.py MambaModelConfig.verify_and_update_config


def test_prefix_caching_is_off_by_default_for_hybrids_only() -> None:
    assert resolve("llama3_8b")["enable_prefix_caching"] is True
    got = resolve("granite_4_0_h_small")
    assert (got["enable_prefix_caching"], got["mamba_cache_mode"]) == (False, "none")


def test_prefix_caching_on_a_hybrid_picks_the_mamba_cache_mode() -> None:
    # GraniteMoeHybridForCausalLM implements SupportsMambaPrefixCaching -> "all".
    got = resolve("granite_4_0_h_small", enable_prefix_caching=True)
    assert got["mamba_cache_mode"] == "all"
    # A hybrid without it (Qwen3-Next) -> "align"; "all" asked falls back to "align".
    qwen_next = replace(layout("granite_4_0_h_small"), architecture="Qwen3NextForCausalLM")
    for given in (None, "all"):
        serve = resolve_serve_settings(
            qwen_next, flags(enable_prefix_caching=True, mamba_cache_mode=given)
        )
        assert serve["mamba_cache_mode"].value == "align"


def test_prefix_caching_off_forces_mamba_cache_mode_none() -> None:
    got = resolve("granite_4_0_h_small", mamba_cache_mode="all")
    assert got["mamba_cache_mode"] == "none"


# --- hybrid KV cache manager: vllm/config/vllm.py VllmConfig.__post_init__ and
# --- KVConnectorFactory.supports_hma_config (vllm/distributed/kv_transfer/...)


@pytest.mark.parametrize(
    ("connector", "children", "disabled"),
    [
        ("LMCacheConnectorV1", (), True),  # no SupportsHMA
        ("P2pNcclConnector", (), True),
        ("NixlConnector", (), False),  # NixlBaseConnector(SupportsHMA)
        ("OffloadingConnector", (), False),
        ("MultiConnector", ("NixlConnector", "OffloadingConnector"), False),
        ("MultiConnector", ("NixlConnector", "LMCacheConnectorV1"), True),
    ],
)
def test_a_kv_connector_without_hma_turns_the_hybrid_manager_off(
    connector: str, children: tuple[str, ...], disabled: bool
) -> None:
    config = KVTransferConfig(
        kv_connector=connector, kv_connector_extra_config=pmap(), children=children
    )
    serve = resolve_serve_settings(layout("gemma3_12b"), flags(kv_transfer_config=config))
    assert serve["disable_hybrid_kv_cache_manager"].value is disabled
    assert serve.deployment.enable_hybrid_kv_cache_manager is not disabled
    assert serve.deployment.kv_connector_extra_config == pmap()


def test_chunked_local_attention_with_eagle_turns_the_hybrid_manager_off() -> None:
    eagle = SpeculativeConfig(method="eagle", num_speculative_tokens=3)
    assert resolve("llama4_scout", speculative_config=eagle)["disable_hybrid_kv_cache_manager"]
    assert not resolve("llama4_scout")["disable_hybrid_kv_cache_manager"]
    with pytest.raises(InvalidFieldError, match="hybrid KV cache manager"):
        resolve("llama4_scout", speculative_config=eagle, disable_hybrid_kv_cache_manager=False)


# --- max_model_len and kv_cache_dtype ----------------------------------------------


def test_max_model_len_and_cache_dtype_defaults() -> None:
    serve = resolve_serve_settings(layout("llama3_8b"), flags())
    assert serve["max_model_len"].value == 8192
    assert serve["max_model_len"].source is Source.MODEL_CONFIG
    # issue 21: the dtype vLLM resolves, not "auto" (resolve_kv_cache_dtype_string keeps
    # "auto" without a ModelOpt KV quantization; kv_cache_dtype_str_to_dtype -> model dtype)
    assert serve["kv_cache_dtype"].value == "bfloat16"
    assert serve["kv_cache_dtype"].note == "auto: the model dtype"
    assert serve.deployment.kv_cache_dtype == "auto"
    assert resolve("llama3_8b", max_model_len_auto=True)["max_model_len"] == "auto"


def test_without_a_gpu_the_h100_defaults_are_assumed_and_said() -> None:
    serve = resolve_serve_settings(layout("llama3_8b"), flags())
    assert serve["max_num_batched_tokens"].value == 8192
    assert serve["max_num_batched_tokens"].source is Source.ASSUMED
    named = resolve_serve_settings(layout("llama3_8b"), flags(gpu=GPUS["L4"]))
    assert named["max_num_batched_tokens"].source is Source.GPU_DEFAULT


def test_no_catalogued_gpu_is_near_the_70_gib_line() -> None:
    # The figures are driver totals; torch reports a little less. Only the 70 GiB
    # comparison of get_batch_defaults reads them, so they must be far from it.
    for gpu in GPUS.values():
        assert abs(gpu.total_memory_bytes - 70 * GIB) > 5 * GIB, gpu.name
    assert [g.name for g in GPUS.values() if "a100" in g.device_name.lower()] == [
        "A100-40GB",
        "A100-80GB",
    ]
