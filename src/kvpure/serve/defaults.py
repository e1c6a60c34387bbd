"""Every setting of a ``vllm serve`` run, resolved as the named vLLM release resolves it.

:func:`resolve_serve_settings` takes a model layout and the flags given
(:class:`~kvpure.serve.flags.ServeFlags`, with the GPU and ``vllm_version``)
and returns :class:`ServeSettings`: one :class:`Setting` per vLLM name with
its value and its :class:`Source`, and the
:class:`~kvpure.models.deployment.Deployment` the planner runs. The release's
rules (:class:`~kvpure.serve.rules.ServeRules`, looked up once here) say which
side of each changed rule applies:

- ``async_scheduling``: on unless the runner is pooling; on the V1 model
  runner (0.26) also off for speculative methods other than
  EAGLE/MTP/n-gram-GPU/DSpark or without a padded drafter batch; 0.34 keeps it
  on whatever the method (``VllmConfig.__post_init__``, vllm/config/vllm.py);
- ``max_num_batched_tokens`` / ``max_num_seqs``: by usage context and GPU,
  then capped (``EngineArgs.get_batch_defaults`` and
  ``_set_default_max_num_seqs_and_batched_tokens_args``, vllm/engine/arg_utils.py);
  0.33+ adds a 16384/1024 tier for GPUs of 160 GiB or more and keeps GB10 out
  of the 70 GiB tier;
- ``attention_backend`` and ``block_size``: :mod:`kvpure.serve.backends`;
- ``enable_prefix_caching``: 0.26 on unless the model is a hybrid; 0.33+ on
  for hybrids too, off for attention-free models
  (``_set_default_chunked_prefill_and_prefix_caching_args``);
- ``mamba_cache_mode``: with prefix caching, 0.26 turns ``none`` into ``all``
  for models that support Mamba prefix caching, else ``align``; 0.33+ always
  ``align``; without it, always ``none`` (``MambaModelConfig.verify_and_update_config``,
  vllm/model_executor/models/config.py);
- ``disable_hybrid_kv_cache_manager``: on for a KV connector that does not
  support it and for chunked-local attention with EAGLE
  (``VllmConfig.__post_init__``);
- ``kv_cache_dtype``: ``auto`` resolves to the checkpoint's KV quantization
  (``resolve_kv_cache_dtype_string``), else the model dtype;
- ``gpu_memory_utilization``: unset means 0.92, or 1.0 under 0.34's extensible
  KV cache (``CacheConfig.resolved_gpu_memory_utilization``);
- ``max_model_len``: from the config (0.33+: no YaRN factor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import Deployment
from kvpure.models.layout import AttentionKind, ModelLayout
from kvpure.serve.backends import BackendChoice, select_attention_backend
from kvpure.serve.cache_defaults import resolve_gpu_memory_utilization, resolve_kv_cache_dtype
from kvpure.serve.flags import ServeFlags
from kvpure.serve.gpus import GPU, GPUS
from kvpure.serve.rules import (
    MAMBA_PREFIX_CACHING_ARCHITECTURES,
    ServeRules,
    async_scheduling_refusal,
    is_pooling_runner,
    serve_rules,
    speculative_method_name,
)
from kvpure.serve.setting import Setting, Source

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """The resolved settings (``settings``, by vLLM name, in display order) and the deployment."""

    gpu: GPU | None
    usage_context: str
    settings: tuple[tuple[str, Setting], ...]
    deployment: Deployment
    backend: BackendChoice
    enable_expert_parallel: bool = False
    vllm_version: str = "0.34"

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

    @property
    def gpu_memory_utilization(self) -> float:
        """The share of the GPU vLLM sizes its memory from (flag, or the release's default)."""
        return float(self["gpu_memory_utilization"].value)


def batch_defaults(gpu: GPU, usage_context: str, rules: ServeRules) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` before the caps (``get_batch_defaults``)."""
    memory = gpu.total_memory_bytes
    tier = rules.large_gpu_batch_tier_bytes
    if tier is not None and memory >= tier:
        return 16384, 1024
    gb10 = rules.gb10_in_small_batch_tier and gpu.compute_capability == (12, 1)
    large = memory >= 70 * _GIB and "a100" not in gpu.device_name.lower() and not gb10
    if large:
        return (16384 if usage_context == "llm" else 8192), 1024
    return (8192 if usage_context == "llm" else 2048), 256


def is_pooling_model(layout: ModelLayout, rules: ServeRules) -> bool:
    """Whether the release runs the model with its pooling runner (its architecture, or a
    Sentence Transformers pooling module in the model folder)."""
    return is_pooling_runner(rules, layout.architecture, layout.sentence_transformers_modules)


def _async_scheduling(layout: ModelLayout, flags: ServeFlags, rules: ServeRules) -> Setting:
    spec = flags.speculative_config
    method = None if spec is None else spec.method
    padded_off = spec is not None and spec.disable_padded_drafter_batch
    pp = flags.pipeline_parallel_size or 1
    refusal = async_scheduling_refusal(
        rules,
        speculative_method=method,
        disable_padded_drafter_batch=padded_off,
        pipeline_parallel_size=pp,
        explicit=flags.async_scheduling is True,
    )
    if flags.async_scheduling is True:
        if refusal is not None:
            raise InvalidFieldError(
                field="--async-scheduling",
                value=method,
                reason=f"vLLM {rules.vllm_version} cannot run it with {refusal} "
                "(EAGLE/MTP/draft-model/n-gram-GPU/DSpark speculative decoding and a padded "
                "drafter batch only)",
            )
        return Setting(value=True, source=Source.FLAG)
    if flags.async_scheduling is False:
        return Setting(value=False, source=Source.FLAG)
    if is_pooling_model(layout, rules):
        return Setting(value=False, source=Source.MODEL_CONFIG, note="pooling model")
    if refusal is not None:
        return Setting(value=False, source=Source.VLLM_DEFAULT, note=refusal)
    return Setting(value=True, source=Source.VLLM_DEFAULT)


def _hybrid_manager(layout: ModelLayout, flags: ServeFlags) -> Setting:
    spec = flags.speculative_config
    chunked = any(layer.kind is AttentionKind.CHUNKED_LOCAL for layer in layout.attention_layers)
    eagle = spec is not None and speculative_method_name(spec.method) in {"eagle", "eagle3", "mtp"}
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


def _prefix_caching(layout: ModelLayout, flags: ServeFlags, rules: ServeRules) -> Setting:
    if flags.enable_prefix_caching is not None:
        return Setting(value=flags.enable_prefix_caching, source=Source.FLAG)
    if not layout.mamba_layers:
        return Setting(value=True, source=Source.VLLM_DEFAULT)
    if not layout.attention_layers:
        return Setting(value=False, source=Source.VLLM_DEFAULT, note="attention-free model")
    if rules.prefix_caching_on_for_hybrid:
        return Setting(value=True, source=Source.VLLM_DEFAULT, note="hybrid model")
    return Setting(value=False, source=Source.VLLM_DEFAULT, note="hybrid model")


def _mamba_mode(layout: ModelLayout, flags: ServeFlags, rules: ServeRules, prefix: bool) -> Setting:
    given = flags.mamba_cache_mode
    if rules.mamba_cache_mode_always_align:
        if given == "all":
            raise InvalidFieldError(
                field="--mamba-cache-mode",
                value=given,
                reason=f"vLLM {rules.vllm_version} has only align and none (the mode follows "
                "prefix caching)",
            )
        value = "align" if prefix and layout.mamba_layers else "none"
        note = "" if given is None else "the flag has no effect; the mode follows prefix caching"
        return Setting(value=value, source=Source.VLLM_DEFAULT, note=note)
    if not layout.mamba_layers:
        mode = given or "none"
        return Setting(value=mode, source=Source.FLAG if given else Source.VLLM_DEFAULT)
    if not prefix:
        note = "" if given in (None, "none") else "prefix caching off forces none"
        source = Source.FLAG if given == "none" else Source.VLLM_DEFAULT
        return Setting(value="none", source=source, note=note)
    supports_all = layout.architecture in MAMBA_PREFIX_CACHING_ARCHITECTURES
    if given in (None, "none") or (given == "all" and not supports_all):
        value = "all" if supports_all else "align"
        note = "no Mamba prefix caching in this model" if given == "all" else "prefix caching on"
        return Setting(value=value, source=Source.MODEL_CONFIG, note=note)
    return Setting(value=given, source=Source.FLAG)


def _max_model_len(layout: ModelLayout, flags: ServeFlags, rules: ServeRules) -> Setting:
    if flags.max_model_len_auto:
        return Setting(value="auto", source=Source.FLAG)
    if flags.max_model_len is not None:
        return Setting(value=flags.max_model_len, source=Source.FLAG)
    _, default = layout.context_lengths(yarn_factor=rules.yarn_factor_scales_max_model_len)
    return Setting(value=default, source=Source.MODEL_CONFIG)


def _given(value: int | str | bool | None, default: Setting) -> Setting:
    return default if value is None else Setting(value=value, source=Source.FLAG)


def resolve_serve_settings(layout: ModelLayout, flags: ServeFlags) -> ServeSettings:
    """Every setting vLLM (``flags.vllm_version``) would run this model with, and the deployment."""
    rules = serve_rules(flags.vllm_version)
    gpu = flags.gpu or ASSUMED_GPU
    gpu_source = Source.GPU_DEFAULT if flags.gpu is not None else Source.ASSUMED
    max_len = _max_model_len(layout, flags, rules)
    cache_dtype, cache_setting = resolve_kv_cache_dtype(layout, flags)
    hybrid_off = _hybrid_manager(layout, flags)
    connector = flags.kv_transfer_config
    choice = select_attention_backend(
        layout,
        gpu,
        kv_cache_dtype=cache_dtype,
        block_size=flags.block_size,
        has_kv_connector=connector is not None,
        requested=flags.attention_backend,
        rules=rules,
    )
    backend = (
        Setting(value=choice.backend.value, source=Source.FLAG)
        if flags.attention_backend is not None
        else Setting(value=choice.backend.value, source=gpu_source)
    )
    block = _given(
        flags.block_size, Setting(value=choice.backend.default_block_size, source=gpu_source)
    )
    tokens, seqs = batch_defaults(gpu, flags.usage_context, rules)
    _, model_len = layout.context_lengths(yarn_factor=rules.yarn_factor_scales_max_model_len)
    length = max_len.value if isinstance(max_len.value, int) else model_len
    if flags.max_num_batched_tokens is None:
        seqs_for_cap = flags.max_num_seqs or seqs
        tokens = min(seqs_for_cap * length, tokens)
    batched = _given(flags.max_num_batched_tokens, Setting(value=tokens, source=gpu_source))
    if flags.max_num_seqs is None:
        seqs = min(seqs, int(batched.value))
    num_seqs = _given(flags.max_num_seqs, Setting(value=seqs, source=gpu_source))
    prefix = _prefix_caching(layout, flags, rules)
    mamba_mode = _mamba_mode(layout, flags, rules, bool(prefix.value))
    async_setting = _async_scheduling(layout, flags, rules)
    utilization, extensible = resolve_gpu_memory_utilization(flags, rules)
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
        ("kv_cache_dtype", cache_setting),
        ("enable_prefix_caching", prefix),
        ("mamba_cache_mode", mamba_mode),
        ("disable_hybrid_kv_cache_manager", hybrid_off),
        ("gpu_memory_utilization", utilization),
        *(() if extensible is None else (("enable_extensible_kv_cache", extensible),)),
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
        speculative_method=None if spec is None else speculative_method_name(spec.method),
        num_speculative_tokens=None if spec is None else spec.num_speculative_tokens,
        vllm_version=rules.vllm_version,
    )
    return ServeSettings(
        gpu=flags.gpu,
        usage_context=flags.usage_context,
        settings=settings,
        deployment=deployment,
        backend=choice,
        enable_expert_parallel=flags.enable_expert_parallel,
        vllm_version=rules.vllm_version,
    )
