"""Every setting of a ``vllm serve`` run, resolved as vLLM 0.26 resolves it.

:func:`resolve_serve_settings` takes a model layout and the flags given
(:class:`~kvpure.serve.flags.ServeFlags`, with the GPU) and returns
:class:`ServeSettings`: one :class:`Setting` per vLLM name with its value and
its :class:`Source`, and the :class:`~kvpure.models.deployment.Deployment`
the planner runs. The rules, each from vLLM 0.26's source:

- ``async_scheduling``: on unless the runner is pooling, the speculative
  method is not EAGLE/MTP/n-gram-GPU/DSpark, or the padded drafter batch is
  off (``VllmConfig.__post_init__``, vllm/config/vllm.py);
- ``max_num_batched_tokens`` / ``max_num_seqs``: by usage context and GPU,
  then capped (``EngineArgs.get_batch_defaults`` and
  ``_set_default_max_num_seqs_and_batched_tokens_args``, vllm/engine/arg_utils.py);
- ``attention_backend`` and ``block_size``: :mod:`kvpure.serve.backends`;
- ``enable_prefix_caching``: on unless the model is a hybrid
  (``_set_default_chunked_prefill_and_prefix_caching_args``);
- ``mamba_cache_mode``: with prefix caching, ``none`` becomes ``all`` for
  models that support Mamba prefix caching, else ``align``; without it, always
  ``none`` (``MambaModelConfig.verify_and_update_config``,
  vllm/model_executor/models/config.py);
- ``disable_hybrid_kv_cache_manager``: on for a KV connector that does not
  support it and for chunked-local attention with EAGLE
  (``VllmConfig.__post_init__``);
- ``kv_cache_dtype``: ``auto``; ``max_model_len``: from the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import Deployment
from kvpure.models.layout import AttentionKind, ModelLayout
from kvpure.serve.backends import BackendChoice, select_attention_backend
from kvpure.serve.flags import ServeFlags, SpeculativeConfig
from kvpure.serve.gpus import GPU, GPUS

__all__ = [
    "ASSUMED_GPU",
    "ServeSettings",
    "Setting",
    "Source",
    "batch_defaults",
    "resolve_serve_settings",
]

#: The GPU assumed when none is named (kvpure's defaults before ``--gpu``).
ASSUMED_GPU: Final = GPUS["H100-80GB"]
_GIB: Final = 2**30

#: vLLM's ``EagleModelTypes`` + ``NgramGPUTypes`` + ``dspark``: methods that keep
#: async scheduling on (vllm/config/speculative.py). MTP variants are one entry.
_ASYNC_SPEC_METHODS: Final = frozenset(
    {"eagle", "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark"}
)
#: Connectors whose class implements ``SupportsHMA``
#: (vllm/distributed/kv_transfer/kv_connector/v1/).
HMA_CONNECTORS: Final = frozenset(
    {
        "ExampleHiddenStatesConnector",
        "MooncakeConnector",
        "MooncakeStoreConnector",
        "SimpleCPUOffloadConnector",
        "OffloadingConnector",
        "DecodeBenchConnector",
        "NixlConnector",
        "NixlPullConnector",
        "NixlPushConnector",
    }
)
#: Architectures implementing ``SupportsMambaPrefixCaching`` (mamba cache mode ``all``).
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
_POOLING_SUFFIXES: Final = (
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForRewardModeling",
    "ForEmbedding",
    "EmbeddingModel",
)


class Source(StrEnum):
    """Where a setting's value came from."""

    FLAG = "flag"
    GPU_DEFAULT = "gpu default"
    MODEL_CONFIG = "model config"
    VLLM_DEFAULT = "vllm default"
    ASSUMED = "assumed (no --gpu: H100-80GB)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One resolved setting: its value (as vLLM's config holds it) and source."""

    value: int | str | bool
    source: Source
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """The resolved settings (``settings``, by vLLM name, in display order) and the deployment."""

    gpu: GPU | None
    usage_context: str
    settings: tuple[tuple[str, Setting], ...]
    deployment: Deployment
    backend: BackendChoice
    enable_expert_parallel: bool = False

    def __getitem__(self, name: str) -> Setting:
        for key, setting in self.settings:
            if key == name:
                return setting
        raise KeyError(name)

    @property
    def data_parallel_size(self) -> int:
        """Engines (data-parallel ranks), each planned alike."""
        value = self["data_parallel_size"].value
        return value if isinstance(value, int) else 1


def batch_defaults(gpu: GPU, usage_context: str) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` before the caps (``get_batch_defaults``)."""
    large = gpu.total_memory_bytes >= 70 * _GIB and "a100" not in gpu.device_name.lower()
    if large:
        return (16384 if usage_context == "llm" else 8192), 1024
    return (8192 if usage_context == "llm" else 2048), 256


def _speculative_method(spec: SpeculativeConfig) -> str:
    # SpeculativeConfig folds every ``*_mtp`` model type into "mtp".
    return "mtp" if spec.method.endswith("_mtp") else spec.method


def is_pooling_model(layout: ModelLayout) -> bool:
    """Whether vLLM runs the architecture with its pooling runner."""
    return layout.architecture.endswith(_POOLING_SUFFIXES)


def _async_scheduling(layout: ModelLayout, flags: ServeFlags) -> Setting:
    spec = flags.speculative_config
    spec_ok = spec is None or _speculative_method(spec) in _ASYNC_SPEC_METHODS
    padded_off = spec is not None and spec.disable_padded_drafter_batch
    if flags.async_scheduling is True:
        if not (spec_ok or (spec is not None and spec.method == "draft_model")) or padded_off:
            raise InvalidFieldError(
                field="--async-scheduling",
                value=None if spec is None else spec.method,
                reason="works only with EAGLE/MTP/draft-model/n-gram-GPU/DSpark speculative "
                "decoding and a padded drafter batch",
            )
        return Setting(value=True, source=Source.FLAG)
    if flags.async_scheduling is False:
        return Setting(value=False, source=Source.FLAG)
    if is_pooling_model(layout):
        return Setting(value=False, source=Source.MODEL_CONFIG, note="pooling model")
    if not spec_ok:
        note = f"{spec.method if spec else ''} speculative decoding"
        return Setting(value=False, source=Source.VLLM_DEFAULT, note=note)
    if padded_off:
        return Setting(value=False, source=Source.VLLM_DEFAULT, note="padded drafter off")
    return Setting(value=True, source=Source.VLLM_DEFAULT)


def _hybrid_manager(layout: ModelLayout, flags: ServeFlags) -> Setting:
    spec = flags.speculative_config
    chunked = any(layer.kind is AttentionKind.CHUNKED_LOCAL for layer in layout.attention_layers)
    eagle = spec is not None and _speculative_method(spec) in {"eagle", "eagle3", "mtp"}
    need = chunked and eagle
    note = "chunked-local attention with EAGLE" if need else ""
    connector = flags.kv_transfer_config
    if connector is not None and not need:
        names = connector.children if connector.kv_connector == "MultiConnector" else ()
        supported = (
            all(name in HMA_CONNECTORS for name in names)
            if connector.kv_connector == "MultiConnector"
            else connector.kv_connector in HMA_CONNECTORS
        )
        if not supported and flags.disable_hybrid_kv_cache_manager is None:
            need = True
            note = f"KV connector {connector.kv_connector} does not support it"
    if flags.disable_hybrid_kv_cache_manager is True:
        return Setting(value=True, source=Source.FLAG)
    if flags.disable_hybrid_kv_cache_manager is False:
        if need:
            raise InvalidFieldError(
                field="--no-disable-hybrid-kv-cache-manager",
                value=note,
                reason="the hybrid KV cache manager cannot run in this configuration",
            )
        return Setting(value=False, source=Source.FLAG)
    return Setting(value=need, source=Source.VLLM_DEFAULT, note=note)


def _prefix_and_mamba(layout: ModelLayout, flags: ServeFlags) -> tuple[Setting, Setting]:
    hybrid = bool(layout.mamba_layers)
    if flags.enable_prefix_caching is None:
        note = "hybrid model" if hybrid else ""
        prefix = Setting(value=not hybrid, source=Source.VLLM_DEFAULT, note=note)
    else:
        prefix = Setting(value=flags.enable_prefix_caching, source=Source.FLAG)
    given = flags.mamba_cache_mode
    if not layout.mamba_layers:
        mode = given or "none"
        return prefix, Setting(value=mode, source=Source.FLAG if given else Source.VLLM_DEFAULT)
    if not prefix.value:
        note = "" if given in (None, "none") else "prefix caching off forces none"
        source = Source.FLAG if given == "none" else Source.VLLM_DEFAULT
        return prefix, Setting(value="none", source=source, note=note)
    supports_all = layout.architecture in MAMBA_PREFIX_CACHING_ARCHITECTURES
    if given in (None, "none") or (given == "all" and not supports_all):
        value = "all" if supports_all else "align"
        note = "no Mamba prefix caching in this model" if given == "all" else "prefix caching on"
        return prefix, Setting(value=value, source=Source.MODEL_CONFIG, note=note)
    return prefix, Setting(value=given, source=Source.FLAG)


def _max_model_len(layout: ModelLayout, flags: ServeFlags) -> Setting:
    if flags.max_model_len_auto:
        return Setting(value="auto", source=Source.FLAG)
    if flags.max_model_len is not None:
        return Setting(value=flags.max_model_len, source=Source.FLAG)
    value = layout.default_max_model_len or layout.derived_max_model_len
    return Setting(value=value, source=Source.MODEL_CONFIG)


def _given(value: int | str | bool | None, default: Setting) -> Setting:
    return default if value is None else Setting(value=value, source=Source.FLAG)


def resolve_serve_settings(layout: ModelLayout, flags: ServeFlags) -> ServeSettings:
    """Every setting vLLM 0.26 would run this model with, and the deployment to plan."""
    gpu = flags.gpu or ASSUMED_GPU
    gpu_source = Source.GPU_DEFAULT if flags.gpu is not None else Source.ASSUMED
    max_len = _max_model_len(layout, flags)
    cache_dtype = flags.kv_cache_dtype or "auto"
    hybrid_off = _hybrid_manager(layout, flags)
    connector = flags.kv_transfer_config
    choice = select_attention_backend(
        layout,
        gpu,
        kv_cache_dtype=cache_dtype,
        block_size=flags.block_size,
        has_kv_connector=connector is not None,
        requested=flags.attention_backend,
    )
    backend = (
        Setting(value=choice.backend.value, source=Source.FLAG)
        if flags.attention_backend is not None
        else Setting(value=choice.backend.value, source=gpu_source)
    )
    block = _given(
        flags.block_size, Setting(value=choice.backend.default_block_size, source=gpu_source)
    )
    tokens, seqs = batch_defaults(gpu, flags.usage_context)
    length = max_len.value if isinstance(max_len.value, int) else layout.derived_max_model_len
    if flags.max_num_batched_tokens is None:
        seqs_for_cap = flags.max_num_seqs or seqs
        tokens = min(seqs_for_cap * length, tokens)
    batched = _given(flags.max_num_batched_tokens, Setting(value=tokens, source=gpu_source))
    if flags.max_num_seqs is None:
        seqs = min(seqs, int(batched.value))
    num_seqs = _given(flags.max_num_seqs, Setting(value=seqs, source=gpu_source))
    prefix, mamba_mode = _prefix_and_mamba(layout, flags)
    async_setting = _async_scheduling(layout, flags)
    parallel = [
        (
            name,
            _given(getattr(flags, name), Setting(value=1, source=Source.VLLM_DEFAULT)),
        )
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    ]
    settings = (
        ("max_model_len", max_len),
        ("async_scheduling", async_setting),
        ("max_num_batched_tokens", batched),
        ("max_num_seqs", num_seqs),
        ("attention_backend", backend),
        ("block_size", block),
        (
            "kv_cache_dtype",
            _given(flags.kv_cache_dtype, Setting(value="auto", source=Source.VLLM_DEFAULT)),
        ),
        ("enable_prefix_caching", prefix),
        ("mamba_cache_mode", mamba_mode),
        ("disable_hybrid_kv_cache_manager", hybrid_off),
        *parallel,
    )
    memory = flags.kv_cache_memory_bytes
    spec = flags.speculative_config
    deployment = Deployment(
        kv_cache_memory_bytes=min(memory),
        kv_cache_memory_per_gpu=memory if len(memory) > 1 else (),
        block_size=int(block.value),
        max_model_len=flags.max_model_len,
        auto_fit_max_model_len=flags.max_model_len_auto,
        kv_cache_dtype=cache_dtype,
        dtype=flags.dtype or "auto",
        mamba_ssm_cache_dtype=flags.mamba_ssm_cache_dtype or "auto",
        tensor_parallel_size=flags.tensor_parallel_size or 1,
        pipeline_parallel_size=flags.pipeline_parallel_size or 1,
        num_gpu_blocks_override=flags.num_gpu_blocks_override,
        enable_prefix_caching=bool(prefix.value),
        enable_hybrid_kv_cache_manager=not hybrid_off.value,
        attention_backend=choice.backend,
        max_num_batched_tokens=int(batched.value),
        mamba_cache_mode=str(mamba_mode.value),
        async_scheduling=bool(async_setting.value),
        kv_connector_extra_config=None
        if connector is None
        else connector.kv_connector_extra_config,
        speculative_method=None if spec is None else _speculative_method(spec),
        num_speculative_tokens=None if spec is None else spec.num_speculative_tokens,
    )
    return ServeSettings(
        gpu=flags.gpu,
        usage_context=flags.usage_context,
        settings=settings,
        deployment=deployment,
        backend=choice,
        enable_expert_parallel=flags.enable_expert_parallel,
    )
