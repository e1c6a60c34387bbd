"""The ``vllm serve`` defaults of each release, as one frozen record per release.

:class:`ServeRules` names every serve-default rule that changed between the
releases kvpure answers for; :func:`serve_rules` looks a release's record up
from its name (``"0.26"``, ``"0.33"``, ``"0.34"``) once, at the edge, and the
resolvers (:mod:`kvpure.serve.defaults`, :mod:`kvpure.serve.backends`,
:mod:`kvpure.models.derive`) read its fields. 0.33 is built from 0.26 and 0.34
from 0.33 with :func:`dataclasses.replace`, so the fields given there are the
list of rule changes.

This module imports nothing of kvpure but :mod:`kvpure.versions` and its
data module :mod:`kvpure.serve.runner_types`, so the model package can read it
without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from kvpure.serve.runner_types import (
    ARCHITECTURE_SUFFIX_RUNNERS,
    GENERATIVE_BY_REGISTRY_0_26,
    GENERATIVE_BY_REGISTRY_0_33,
    GENERATIVE_BY_REGISTRY_0_34,
    POOLING_BY_REGISTRY_0_26,
    POOLING_BY_REGISTRY_0_33,
    POOLING_BY_REGISTRY_0_34,
    RunnerType,
)
from kvpure.versions import normalize_vllm_version

__all__ = [
    "MAMBA_PREFIX_CACHING_ARCHITECTURES",
    "SERVE_RULES",
    "SERVE_RULES_0_26",
    "SERVE_RULES_0_33",
    "SERVE_RULES_0_34",
    "ServeRules",
    "default_async_scheduling",
    "default_mamba_cache_mode",
    "default_prefix_caching",
    "default_runner_type",
    "is_pooling_architecture",
    "is_pooling_runner",
    "serve_rules",
    "uses_model_runner_v2",
]

_GIB: Final = 2**30

#: vLLM 0.26's ``EagleModelTypes`` + ``NgramGPUTypes`` + ``dspark``: the methods
#: that keep async scheduling on (vllm/config/speculative.py; MTP variants are "mtp").
ASYNC_SPECULATIVE_METHODS_0_26: Final = frozenset(
    {"eagle", "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark"}
)
#: vLLM 0.33's methods the V1 model runner still takes for async scheduling
#: (``VllmConfig.__post_init__``: ``EagleModelTypes``, ``NgramGPUTypes``,
#: ``draft_model``, ``dspark``, ``dflash``).
ASYNC_SPECULATIVE_METHODS_V1_0_33: Final = ASYNC_SPECULATIVE_METHODS_0_26 | {"draft_model"}
#: Architectures implementing ``SupportsMambaPrefixCaching`` (0.26's Mamba cache mode "all").
MAMBA_PREFIX_CACHING_ARCHITECTURES: Final = frozenset(
    {
        "NemotronHForCausalLM",
        "JambaForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "FalconH1ForCausalLM",
        "Zamba2ForCausalLM",
        "Mamba2ForCausalLM",
        "MambaForCausalLM",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeRules:
    """The serve-default rules of one vLLM release (each field: what changed, and where).

    - ``large_gpu_batch_tier_bytes``: GPUs with at least this much memory get
      16384 batched tokens and 1024 sequences in both usage contexts; None =
      no such tier. 0.26: none; 0.33/0.34: 160 GiB
      (vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``).
    - ``gb10_in_small_batch_tier``: a compute-capability 12.1 GPU (GB10, DGX
      Spark) is kept out of the 70 GiB tier. 0.26: no; 0.33/0.34: yes (same function).
    - ``model_runner_v2``: the V2 model runner is the default, so async
      scheduling keeps ``pp + 1`` batches in flight. 0.26: V1 (``VllmConfig``
      has no V2 default); 0.33: V2 unless a feature falls back to V1
      (``VllmConfig.use_v2_model_runner``, vllm/config/vllm.py); 0.34: V2
      everywhere (``VllmConfig.max_concurrent_batches``).
    - ``v1_runner_speculative_methods``: 0.33's speculative methods that fall
      back to the V1 runner (``_get_v2_model_runner_unsupported_features``).
    - ``async_scheduling_speculative_methods``: the speculative methods async
      scheduling runs with on the V1 runner; None = any method. 0.26: EAGLE,
      MTP, n-gram GPU, DSpark (``VllmConfig.__post_init__``); 0.33: the same
      plus draft models, and only on the V1 runner; 0.34: any method (the
      check is gone from ``VllmConfig.__post_init__``).
    - ``prefix_caching_on_for_hybrid``: prefix caching is on by default for
      attention + Mamba hybrids. 0.26: off (opt-in); 0.33/0.34: on
      (``EngineArgs._set_default_chunked_prefill_and_prefix_caching_args``).
    - ``mamba_cache_mode_always_align``: with prefix caching the Mamba cache
      mode is "align" (there is no "all"; ``--mamba-cache-mode`` has no effect).
      0.26: "all" for models with Mamba prefix caching, else "align"; 0.33/0.34:
      always "align" (vllm/model_executor/models/config.py
      ``MambaModelConfig.verify_and_update_config``; vllm/config/cache.py
      ``MambaCacheMode``).
    - ``hybrid_mla_block_alignment``: an MLA + Mamba hybrid's attention block
      is a multiple of this. 0.26: 1; 0.33/0.34: 128
      (vllm/platforms/interface.py ``Platform._align_hybrid_block_size``).
    - ``mm_prefix_backends``: multimodal prefix-LM models (Gemma-3, PaliGemma)
      first try the Triton + FlashAttention (SM90) or Triton + FlashInfer
      (SM100) composite backends. 0.26: no; 0.33/0.34: yes
      (vllm/platforms/cuda.py ``_get_backend_priorities``).
    - ``yarn_factor_scales_max_model_len``: YaRN's ``factor`` multiplies the
      derived ``max_model_len`` (from ``original_max_position_embeddings``).
      0.26: yes; 0.33/0.34: no, ``max_position_embeddings`` is already scaled
      (vllm/config/model.py ``_get_and_verify_max_len``).
    - ``default_gpu_memory_utilization``: ``--gpu-memory-utilization`` when
      unset and the KV cache is not extensible: 0.92 in every release
      (vllm/config/cache.py ``CacheConfig.gpu_memory_utilization``,
      ``DEFAULT_GPU_MEMORY_UTILIZATION``).
    - ``extensible_kv_cache_by_default``: the extensible KV cache is on by
      default on CUDA and ROCm (unless ``--kv-cache-memory`` or
      ``--num-gpu-blocks-override`` is given), and an unset
      ``gpu_memory_utilization`` then means 1.0. 0.26/0.33: no such cache;
      0.34: on (vllm/config/vllm.py ``VllmConfig._resolve_extensible_kv_cache``,
      vllm/config/cache.py ``CacheConfig.resolved_gpu_memory_utilization``).
    - ``pooling_by_registry`` / ``generative_by_registry``: architectures the
      release registers whose model class runs the pooling / generate runner
      where the name's ending says otherwise (:func:`default_runner_type`;
      the lists per release: :mod:`kvpure.serve.runner_types`).
    - ``sentence_transformers_pooling_modules``: the ``modules.json`` module
      types that make vLLM run the pooling runner before it looks at the
      architecture (vllm/transformers_utils/config.py ``get_pooling_config``,
      ``_ST_POOLING_MODULE_TYPES``). 0.26: ``sentence_transformers.models.Pooling``
      only; 0.33/0.34: also Sentence Transformers 5's
      ``sentence_transformers.sentence_transformer.modules.pooling.Pooling``.
    """

    vllm_version: str
    large_gpu_batch_tier_bytes: int | None = None
    gb10_in_small_batch_tier: bool = False
    model_runner_v2: bool = False
    v1_runner_speculative_methods: frozenset[str] = frozenset()
    async_scheduling_speculative_methods: frozenset[str] | None = ASYNC_SPECULATIVE_METHODS_0_26
    prefix_caching_on_for_hybrid: bool = False
    mamba_cache_mode_always_align: bool = False
    hybrid_mla_block_alignment: int = 1
    mm_prefix_backends: bool = False
    yarn_factor_scales_max_model_len: bool = True
    default_gpu_memory_utilization: float = 0.92
    extensible_kv_cache_by_default: bool = False
    pooling_by_registry: frozenset[str] = POOLING_BY_REGISTRY_0_26
    generative_by_registry: frozenset[str] = GENERATIVE_BY_REGISTRY_0_26
    sentence_transformers_pooling_modules: frozenset[str] = frozenset(
        {"sentence_transformers.models.Pooling"}
    )


SERVE_RULES_0_26: Final = ServeRules(vllm_version="0.26")
SERVE_RULES_0_33: Final = replace(
    SERVE_RULES_0_26,
    vllm_version="0.33",
    large_gpu_batch_tier_bytes=160 * _GIB,
    gb10_in_small_batch_tier=True,
    model_runner_v2=True,
    v1_runner_speculative_methods=frozenset({"suffix", "custom_class"}),
    async_scheduling_speculative_methods=ASYNC_SPECULATIVE_METHODS_V1_0_33,
    prefix_caching_on_for_hybrid=True,
    mamba_cache_mode_always_align=True,
    hybrid_mla_block_alignment=128,
    mm_prefix_backends=True,
    yarn_factor_scales_max_model_len=False,
    pooling_by_registry=POOLING_BY_REGISTRY_0_33,
    generative_by_registry=GENERATIVE_BY_REGISTRY_0_33,
    sentence_transformers_pooling_modules=SERVE_RULES_0_26.sentence_transformers_pooling_modules
    | {"sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
)
SERVE_RULES_0_34: Final = replace(
    SERVE_RULES_0_33,
    vllm_version="0.34",
    v1_runner_speculative_methods=frozenset(),
    async_scheduling_speculative_methods=None,
    extensible_kv_cache_by_default=True,
    pooling_by_registry=POOLING_BY_REGISTRY_0_34,
    generative_by_registry=GENERATIVE_BY_REGISTRY_0_34,
)

#: Release name -> its rules.
SERVE_RULES: Final = {
    rules.vllm_version: rules for rules in (SERVE_RULES_0_26, SERVE_RULES_0_33, SERVE_RULES_0_34)
}


def serve_rules(vllm_version: str) -> ServeRules:
    """The serve rules of ``vllm_version`` (``0.26``, ``0.33``, ``0.34`` or ``X.Y.0``)."""
    return SERVE_RULES[normalize_vllm_version(vllm_version)]


def default_runner_type(rules: ServeRules, architecture: str) -> RunnerType:
    """The runner vLLM picks for ``architecture`` with ``--runner auto`` (no Sentence
    Transformers pooling config in the model folder).

    ``ModelConfig._get_default_runner_type`` (vllm/config/model.py, the same in
    0.26, 0.33 and 0.34): an architecture the release registers runs the runner
    its model class implements (``is_pooling_model`` first, then
    ``is_text_generation_model``; vllm/model_executor/models/registry.py), any
    other the first of ``_SUFFIX_TO_DEFAULTS`` its name ends with, else
    "generate". The registered classes that the suffix would get wrong are the
    release's ``pooling_by_registry`` / ``generative_by_registry``.
    """
    if architecture in rules.pooling_by_registry:
        return "pooling"
    if architecture in rules.generative_by_registry:
        return "generate"
    for suffix, runner in ARCHITECTURE_SUFFIX_RUNNERS:
        if architecture.endswith(suffix):
            return runner
    return "generate"


def is_pooling_architecture(rules: ServeRules, architecture: str) -> bool:
    """Whether vLLM runs ``architecture`` with its pooling runner (:func:`default_runner_type`)."""
    return default_runner_type(rules, architecture) == "pooling"


def is_pooling_runner(
    rules: ServeRules, architecture: str, module_types: tuple[str, ...] = ()
) -> bool:
    """Whether vLLM runs the model with its pooling runner (``--runner auto``).

    ``module_types``: what the model folder's Sentence Transformers
    ``modules.json`` lists. vLLM checks it first: a pooling module the release
    knows means pooling whatever the architecture; else
    :func:`is_pooling_architecture` decides.
    """
    if any(kind in rules.sentence_transformers_pooling_modules for kind in module_types):
        return True
    return is_pooling_architecture(rules, architecture)


def speculative_method_name(method: str) -> str:
    """vLLM's name of a method: every ``*_mtp`` model type is folded into ``mtp``."""
    return "mtp" if method.endswith("_mtp") else method


def uses_model_runner_v2(rules: ServeRules, speculative_method: str | None) -> bool:
    """Whether vLLM runs the model with its V2 model runner."""
    if not rules.model_runner_v2:
        return False
    return speculative_method not in rules.v1_runner_speculative_methods


def async_scheduling_refusal(
    rules: ServeRules,
    *,
    speculative_method: str | None,
    disable_padded_drafter_batch: bool,
    pipeline_parallel_size: int,
    explicit: bool = False,
) -> str | None:
    """Why async scheduling cannot run with this configuration, or None.

    On the V1 runner (0.26; 0.33's fallbacks): only with the speculative
    methods the release lists, a padded drafter batch, and (0.33) no pipeline
    parallelism; 0.26 also takes draft models when the flag asks for async
    scheduling (``explicit``). On the V2 runner (0.33, 0.34): always.
    """
    method = None if speculative_method is None else speculative_method_name(speculative_method)
    methods = rules.async_scheduling_speculative_methods
    if uses_model_runner_v2(rules, method) or methods is None:
        return None
    if explicit:
        methods = methods | {"draft_model"}
    if method is not None and method not in methods:
        return f"{method} speculative decoding"
    if method is not None and disable_padded_drafter_batch:
        return "padded drafter off"
    if rules.model_runner_v2 and pipeline_parallel_size > 1:
        return "pipeline parallelism on the V1 model runner"
    return None


def default_async_scheduling(
    rules: ServeRules,
    *,
    pooling: bool,
    speculative_method: str | None,
    disable_padded_drafter_batch: bool = False,
    pipeline_parallel_size: int = 1,
) -> bool:
    """vLLM's ``async_scheduling`` when the flag is not given (``VllmConfig.__post_init__``)."""
    if pooling:
        return False
    refusal = async_scheduling_refusal(
        rules,
        speculative_method=speculative_method,
        disable_padded_drafter_batch=disable_padded_drafter_batch,
        pipeline_parallel_size=pipeline_parallel_size,
    )
    return refusal is None


def default_prefix_caching(
    rules: ServeRules, *, has_attention: bool, has_mamba: bool, is_encoder_decoder: bool = False
) -> bool:
    """vLLM's ``enable_prefix_caching`` when not given.

    ``ModelConfig.is_prefix_caching_supported`` (off for attention-free and
    encoder-decoder models) and, in 0.26 only, off for hybrids
    (``EngineArgs._set_default_chunked_prefill_and_prefix_caching_args``).
    """
    if is_encoder_decoder or (has_mamba and not has_attention):
        return False
    return not has_mamba or rules.prefix_caching_on_for_hybrid


def default_mamba_cache_mode(rules: ServeRules, *, architecture: str, prefix_caching: bool) -> str:
    """The Mamba cache mode vLLM settles on (``MambaModelConfig.verify_and_update_config``)."""
    if not prefix_caching:
        return "none"
    if rules.mamba_cache_mode_always_align:
        return "align"
    return "all" if architecture in MAMBA_PREFIX_CACHING_ARCHITECTURES else "align"
