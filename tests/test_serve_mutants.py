"""Mutation round 2 (issue 24): serve checks the other serve tests left unread.

Each expected value is read from vLLM's source (the release named); the file and
function are given next to each check.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.layout import ModelLayout
from kvpure.serve.cache_defaults import resolve_gpu_memory_utilization, resolve_kv_cache_dtype
from kvpure.serve.flags import ServeFlags
from kvpure.serve.rules import (
    MAMBA_PREFIX_CACHING_ARCHITECTURES,
    SERVE_RULES_0_26,
    SERVE_RULES_0_33,
    SERVE_RULES_0_34,
    async_scheduling_refusal,
    default_async_scheduling,
    default_mamba_cache_mode,
    default_prefix_caching,
    is_pooling_architecture,
    speculative_method_name,
    uses_model_runner_v2,
)
from kvpure.serve.setting import Source
from kvpure.serve.verdict import Verdict, largest_fitting_max_model_len
from kvpure.versions import UnknownVllmVersionError

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30


def llama(config_dtype: str = "bfloat16") -> ModelLayout:
    data = json.loads((ROOT / "examples" / "llama3_8b.json").read_text())
    return replace(model_layout(parse_model_config(data)), config_dtype=config_dtype)


# --- flags.py ---------------------------------------------------------------------


def test_expert_parallelism_is_off_unless_asked() -> None:
    # vllm/config/parallel.py ParallelConfig: enable_expert_parallel: bool = False
    # (EngineArgs.enable_expert_parallel takes that default).
    assert ServeFlags(kv_cache_memory_bytes=(GIB,)).enable_expert_parallel is False


@pytest.mark.parametrize(("given", "release"), [("0.26.0", "0.26"), (" 0.34.0 ", "0.34")])
def test_the_release_is_held_as_x_y(given: str, release: str) -> None:
    # The releases kvpure answers for are named X.Y (vLLM 0.26.0 -> "0.26").
    assert ServeFlags(kv_cache_memory_bytes=(GIB,), vllm_version=given).vllm_version == release


@pytest.mark.parametrize("memory", [-1, True])
def test_each_kv_cache_memory_figure_is_checked(memory: object) -> None:
    # Issue 24 point 6: a negative, bool or float figure is a typed error naming the flag.
    with pytest.raises(InvalidFieldError) as caught:
        ServeFlags(kv_cache_memory_bytes=(GIB, memory))  # type: ignore[arg-type]  # bad on purpose
    assert caught.value.field == "--kv-cache-memory"


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [
        ("tensor_parallel_size", 0, "--tensor-parallel-size"),
        ("pipeline_parallel_size", 0, "--pipeline-parallel-size"),
        ("data_parallel_size", 0, "--data-parallel-size"),
        ("max_model_len", 0, "--max-model-len"),
        ("max_num_batched_tokens", 0, "--max-num-batched-tokens"),
        ("max_num_seqs", 0, "--max-num-seqs"),
        ("block_size", 0, "--block-size"),
        ("num_gpu_blocks_override", 0, "--num-gpu-blocks-override"),
        ("usage_context", "batch", "--usage-context"),
        ("kv_cache_dtype", "int4", "--kv-cache-dtype"),
        ("dtype", "int8", "--dtype"),
        ("mamba_ssm_cache_dtype", "int8", "--mamba-ssm-cache-dtype"),
        ("mamba_cache_mode", "some", "--mamba-cache-mode"),
        ("gpu_memory_utilization", 1.5, "--gpu-memory-utilization"),
    ],
)
def test_each_bad_flag_is_refused_naming_it(field: str, value: object, flag: str) -> None:
    # vLLM's EngineArgs: sizes and counts are positive; the choices are its Literals
    # (ModelDType, CacheDType, MambaCacheMode, UsageContext serve/llm).
    given: dict[str, Any] = {field: value}
    with pytest.raises(InvalidFieldError) as caught:
        ServeFlags(kv_cache_memory_bytes=(GIB,), **given)
    assert caught.value.field == flag


def test_the_smallest_accepted_figures() -> None:
    # One token, one sequence, 0 bytes of KV memory (vLLM then refuses at start:
    # "No available memory for the cache blocks"), a length and "auto" never both.
    flags = ServeFlags(kv_cache_memory_bytes=(0,), max_model_len=1, max_num_seqs=1, block_size=1)
    assert flags.kv_cache_memory_bytes == (0,)
    assert ServeFlags(kv_cache_memory_bytes=(GIB,), max_model_len_auto=True).max_model_len is None
    with pytest.raises(InvalidFieldError, match="auto"):
        ServeFlags(kv_cache_memory_bytes=(GIB,), max_model_len_auto=True, max_model_len=8)


def test_an_unknown_release_is_refused_naming_the_flag() -> None:
    with pytest.raises(UnknownVllmVersionError, match="--vllm"):
        ServeFlags(kv_cache_memory_bytes=(GIB,), vllm_version="0.99")


# --- cache_defaults.py --------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_dtype", "served"),
    [
        # vllm/config/model.py: _STR_DTYPE_TO_TORCH_DTYPE ("half" -> float16, "float" ->
        # float32) and _resolve_auto_dtype ("Downcast for float32 models" to the
        # platform's first supported dtype, bfloat16 on CUDA capability >= 8).
        ("float32", "bfloat16"),
        ("float", "bfloat16"),
        ("half", "float16"),
        ("float16", "float16"),
        ("bfloat16", "bfloat16"),
    ],
)
def test_auto_kv_cache_dtype_shows_the_served_model_dtype(config_dtype: str, served: str) -> None:
    flags = ServeFlags(kv_cache_memory_bytes=(GIB,))
    plan_dtype, setting = resolve_kv_cache_dtype(llama(config_dtype), flags)
    # resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py): no checkpoint KV
    # quantization -> "auto", the model dtype (kv_cache_dtype_str_to_dtype).
    assert plan_dtype == "auto"
    assert (setting.value, setting.source) == (served, Source.VLLM_DEFAULT)
    assert setting.note == "auto: the model dtype"


def test_the_dtype_flag_is_the_model_dtype_the_cache_follows() -> None:
    # --dtype float16 on a bfloat16 checkpoint: ModelConfig.dtype is float16, and an
    # "auto" KV cache takes the model dtype (kv_cache_dtype_str_to_dtype).
    flags = ServeFlags(kv_cache_memory_bytes=(GIB,), dtype="float16", kv_cache_dtype="auto")
    plan_dtype, setting = resolve_kv_cache_dtype(llama(), flags)
    assert (plan_dtype, setting.value, setting.source) == ("auto", "float16", Source.FLAG)
    auto = ServeFlags(kv_cache_memory_bytes=(GIB,), dtype="auto")
    assert resolve_kv_cache_dtype(llama("float32"), auto)[1].value == "bfloat16"


def test_a_given_kv_cache_dtype_is_kept_and_the_checkpoint_quantization_is_shown() -> None:
    given = ServeFlags(kv_cache_memory_bytes=(GIB,), kv_cache_dtype="fp8")
    quantized = replace(llama(), checkpoint_kv_cache_dtype="fp8_e4m3")
    plan_dtype, setting = resolve_kv_cache_dtype(quantized, given)
    assert (plan_dtype, setting.value, setting.source, setting.note) == (
        "fp8",
        "fp8",
        Source.FLAG,
        "",
    )
    plan_dtype, setting = resolve_kv_cache_dtype(
        quantized, ServeFlags(kv_cache_memory_bytes=(GIB,))
    )
    assert (plan_dtype, setting.value, setting.source) == (
        "fp8_e4m3",
        "fp8_e4m3",
        Source.MODEL_CONFIG,
    )
    assert setting.note == "auto: the checkpoint's KV cache quantization"
    # A checkpoint that says "auto" is no quantization: the model dtype.
    auto = replace(llama(), checkpoint_kv_cache_dtype="auto")
    plan_dtype, setting = resolve_kv_cache_dtype(auto, ServeFlags(kv_cache_memory_bytes=(GIB,)))
    assert (plan_dtype, setting.value, setting.source) == ("auto", "bfloat16", Source.VLLM_DEFAULT)


def test_the_extensible_cache_notes_say_why_it_is_off() -> None:
    # vllm/config/vllm.py VllmConfig._resolve_extensible_kv_cache (0.34): unsupported
    # when kv_cache_memory_bytes or num_gpu_blocks_override is set;
    # CacheConfig.resolved_gpu_memory_utilization: 1.0 when it is on, else 0.92.
    estimated = ServeFlags(kv_cache_memory_bytes=(GIB,), kv_cache_memory_given=False)
    used, extensible = resolve_gpu_memory_utilization(estimated, SERVE_RULES_0_34)
    assert extensible is not None
    assert (extensible.value, extensible.note) == (True, "")
    assert (used.value, used.source) == (1.0, Source.VLLM_DEFAULT)
    assert used.note == "unset: the extensible KV cache is sized from measured memory"
    fixed = replace(estimated, num_gpu_blocks_override=100)
    used, extensible = resolve_gpu_memory_utilization(fixed, SERVE_RULES_0_34)
    assert extensible is not None
    assert (extensible.value, extensible.note) == (
        False,
        "off: --num-gpu-blocks-override fixes the size",
    )
    assert (used.value, used.note) == (0.92, "")
    given = ServeFlags(kv_cache_memory_bytes=(GIB,))
    _, extensible = resolve_gpu_memory_utilization(given, SERVE_RULES_0_34)
    assert extensible is not None
    assert (extensible.value, extensible.note) == (False, "off: --kv-cache-memory sizes the cache")
    flag = replace(estimated, gpu_memory_utilization=0.5)
    used, extensible = resolve_gpu_memory_utilization(flag, SERVE_RULES_0_34)
    assert (used.value, used.source) == (0.5, Source.FLAG)
    assert extensible is not None
    assert extensible.value is True
    assert resolve_gpu_memory_utilization(estimated, SERVE_RULES_0_26)[1] is None


# --- setting.py ---------------------------------------------------------------------


def test_each_source_is_named_as_docs_serve_md_names_it() -> None:
    # docs/serve.md: "Each setting carries its source: `flag` (given), `gpu default`
    # ..., `model config` ..., `vllm default`, or `assumed (no --gpu: H100-80GB)`".
    names = ["flag", "gpu default", "model config", "vllm default", "assumed (no --gpu: H100-80GB)"]
    assert [source.value for source in Source] == names
    docs = " ".join((ROOT / "docs" / "serve.md").read_text().split())
    for name in names:
        assert f"`{name}`" in docs


# --- rules.py -----------------------------------------------------------------------

# vllm/config/speculative.py (0.26): EagleModelTypes = eagle, eagle3,
# extract_hidden_states, the MTP model types, dflash; NgramGPUTypes = ngram_gpu;
# VllmConfig.__post_init__ also keeps async scheduling on with dspark.
ASYNC_METHODS_0_26 = (
    "eagle",
    "eagle3",
    "extract_hidden_states",
    "mtp",
    "deepseek_mtp",
    "glm4_moe_mtp",
    "dflash",
    "ngram_gpu",
    "dspark",
)
OTHER_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix")


@pytest.mark.parametrize("method", ASYNC_METHODS_0_26)
def test_0_26_keeps_async_scheduling_with_eagle_mtp_ngram_gpu_dspark(method: str) -> None:
    assert default_async_scheduling(SERVE_RULES_0_26, pooling=False, speculative_method=method)
    # ... unless the drafter batch is not padded (the next elif of __post_init__).
    assert not default_async_scheduling(
        SERVE_RULES_0_26,
        pooling=False,
        speculative_method=method,
        disable_padded_drafter_batch=True,
    )


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_0_26_turns_async_scheduling_off_for_other_methods(method: str) -> None:
    assert not default_async_scheduling(SERVE_RULES_0_26, pooling=False, speculative_method=method)


def test_pooling_models_and_explicit_draft_models() -> None:
    # __post_init__: runner_type "pooling" -> async_scheduling False, first of all.
    assert not default_async_scheduling(SERVE_RULES_0_34, pooling=True, speculative_method=None)
    assert default_async_scheduling(SERVE_RULES_0_26, pooling=False, speculative_method=None)
    # Asked for explicitly, 0.26 also takes draft_model (the explicit branch's check).
    for explicit, refused in ((True, False), (False, True)):
        refusal = async_scheduling_refusal(
            SERVE_RULES_0_26,
            speculative_method="draft_model",
            disable_padded_drafter_batch=False,
            pipeline_parallel_size=1,
            explicit=explicit,
        )
        assert (refusal is not None) is refused
    # Without speculative decoding the padded-drafter flag has no say.
    assert (
        async_scheduling_refusal(
            SERVE_RULES_0_26,
            speculative_method=None,
            disable_padded_drafter_batch=True,
            pipeline_parallel_size=1,
        )
        is None
    )


def test_mtp_model_types_fold_into_mtp() -> None:
    # vllm/config/speculative.py: every MTPModelTypes entry ends in "_mtp"; the
    # speculative config reports method "mtp" for them.
    assert speculative_method_name("deepseek_mtp") == "mtp"
    assert speculative_method_name("mimo_v2_mtp") == "mtp"
    assert speculative_method_name("eagle3") == "eagle3"


def test_the_v2_runner_and_pipeline_parallelism() -> None:
    # 0.26: V1 only. 0.33: V2 unless a feature (suffix, custom_class drafting)
    # falls back to V1, where pipeline parallelism turns async scheduling off.
    assert not uses_model_runner_v2(SERVE_RULES_0_26, None)
    assert uses_model_runner_v2(SERVE_RULES_0_33, None)
    assert uses_model_runner_v2(SERVE_RULES_0_33, "eagle")
    assert not uses_model_runner_v2(SERVE_RULES_0_33, "suffix")
    # 0.33's _get_v2_model_runner_unsupported_features also names "custom_class".
    assert not uses_model_runner_v2(SERVE_RULES_0_33, "custom_class")
    assert not default_async_scheduling(
        SERVE_RULES_0_33, pooling=False, speculative_method="custom_class"
    )
    assert uses_model_runner_v2(SERVE_RULES_0_34, "suffix")
    assert default_async_scheduling(
        SERVE_RULES_0_33, pooling=False, speculative_method="eagle", pipeline_parallel_size=2
    )
    assert default_async_scheduling(
        SERVE_RULES_0_26, pooling=False, speculative_method="eagle", pipeline_parallel_size=2
    )


def test_prefix_caching_defaults() -> None:
    # ModelConfig.is_prefix_caching_supported: off for attention-free and
    # encoder-decoder models; 0.26's EngineArgs keeps it off for hybrids.
    for rules in (SERVE_RULES_0_26, SERVE_RULES_0_34):
        assert default_prefix_caching(rules, has_attention=True, has_mamba=False)
        assert not default_prefix_caching(rules, has_attention=False, has_mamba=True)
        assert not default_prefix_caching(
            rules, has_attention=True, has_mamba=False, is_encoder_decoder=True
        )
    assert not default_prefix_caching(SERVE_RULES_0_26, has_attention=True, has_mamba=True)
    assert default_prefix_caching(SERVE_RULES_0_34, has_attention=True, has_mamba=True)


@pytest.mark.parametrize(
    "architecture",
    [
        # vllm/model_executor/models/*.py (0.26): the classes that implement
        # SupportsMambaPrefixCaching.
        "NemotronHForCausalLM",
        "JambaForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "FalconH1ForCausalLM",
        "Zamba2ForCausalLM",
        "Mamba2ForCausalLM",
        "MambaForCausalLM",
    ],
)
def test_mamba_prefix_caching_models_get_mode_all_in_0_26(architecture: str) -> None:
    # MambaModelConfig.verify_and_update_config (0.26): "all" for those models.
    assert architecture in MAMBA_PREFIX_CACHING_ARCHITECTURES
    mode = default_mamba_cache_mode(
        SERVE_RULES_0_26, architecture=architecture, prefix_caching=True
    )
    assert mode == "all"
    assert (
        default_mamba_cache_mode(SERVE_RULES_0_34, architecture=architecture, prefix_caching=True)
        == "align"
    )
    assert (
        default_mamba_cache_mode(SERVE_RULES_0_26, architecture=architecture, prefix_caching=False)
        == "none"
    )


def test_other_hybrids_get_align_in_0_26() -> None:
    mode = default_mamba_cache_mode(
        SERVE_RULES_0_26, architecture="Qwen3NextForCausalLM", prefix_caching=True
    )
    assert mode == "align"


@pytest.mark.parametrize(
    "suffix",
    # vllm/config/model.py _SUFFIX_TO_DEFAULTS: these endings run the pooling runner.
    ["ForSequenceClassification", "ForTokenClassification", "ForRewardModeling", "EmbeddingModel"],
)
def test_pooling_suffixes_are_vllms(suffix: str) -> None:
    assert is_pooling_architecture(SERVE_RULES_0_26, "Qwen2" + suffix)


def test_asking_for_async_scheduling_with_an_unpadded_drafter_names_the_cause() -> None:
    # vllm/config/vllm.py (0.26) VllmConfig.__post_init__, async scheduling asked for:
    # "Async scheduling is not compatible with disable_padded_drafter_batch=True."
    refusal = async_scheduling_refusal(
        SERVE_RULES_0_26,
        speculative_method="eagle",
        disable_padded_drafter_batch=True,
        pipeline_parallel_size=1,
        explicit=True,
    )
    assert refusal is not None
    assert refusal.startswith("padded drafter")


# --- verdict.py ---------------------------------------------------------------------


def _verdict_line(concurrency: float, max_num_seqs: int, data_parallel_size: int) -> str:
    return Verdict(
        starts=True,
        tokens=1000,
        concurrency=concurrency,
        max_model_len=100,
        max_num_seqs=max_num_seqs,
        data_parallel_size=data_parallel_size,
    ).line


def test_the_verdict_line_names_engines_from_two_and_the_cap_only_past_it() -> None:
    # Data-parallel engines are planned alike, tokens per engine (docs/serve.md).
    assert "x2 engines" in _verdict_line(4.0, 8, 2)
    assert "engines" not in _verdict_line(4.0, 8, 1)
    # max_num_seqs caps the requests at once only when more would fit.
    assert "caps" not in _verdict_line(4.0, 4, 1)
    assert "requests of" in _verdict_line(4.0, 4, 1)
    assert "(max_num_seqs caps it at 4)" in _verdict_line(4.5, 4, 1)


def test_the_largest_length_ignores_max_model_len_auto() -> None:
    layout = llama()
    flags = ServeFlags(kv_cache_memory_bytes=(100 * 2**20,), max_model_len=2048)
    auto = replace(flags, max_model_len=None, max_model_len_auto=True)
    best = largest_fitting_max_model_len(layout, flags, 2048)
    assert best is not None
    assert largest_fitting_max_model_len(layout, auto, 2048) == best
