"""The one frozen value holding every setting vLLM's KV cache planner reads.

Instead of a whole ``VllmConfig``, the planner takes :class:`PlannerSettings`:
the cache, parallel, scheduler, model, KV-transfer and speculative settings it
actually reads, flattened, with vLLM's field names. vLLM's derived numbers
(``max_concurrent_batches``, ``max_in_flight_tokens``) are properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyrsistent import PMap

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.planning.rules import PlannerRules, planner_rules
from kvpure.runtime_types import typed_init
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version

#: ``speculative_config.method`` values for which vLLM's ``use_eagle()`` is true.
EAGLE_METHODS: frozenset[str] = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})

#: ``original_max_model_len`` value that asks the planner to auto-fit max_model_len.
AUTO_FIT_MAX_MODEL_LEN = -1

MAMBA_CACHE_MODES: tuple[str, ...] = ("none", "align", "all")
"""vLLM's ``mamba_cache_mode`` values."""

PREFIX_CACHING_HASH_ALGOS: tuple[str, ...] = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
"""vLLM's ``prefix_caching_hash_algo`` values (``PrefixCachingHashAlgo``, vllm/config/cache.py)."""


#: vLLM's ``CacheDType`` literal (``vllm/config/cache.py``), all three releases together.
CACHE_DTYPES: frozenset[str] = frozenset(
    (
        "auto",
        "float16",
        "bfloat16",
        "fp8",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_inc",
        "fp8_ds_mla",
        "nvfp4_ds_mla",
        "turboquant_k8v4",
        "turboquant_4bit_nc",
        "turboquant_k3v4_nc",
        "turboquant_3bit_nc",
        "octave_k3v4",
        "octave_k3v3",
        "octave_k3v3_compact",
        "ultraquant_4bit",
        "int4_per_token_head",
        "int8_per_token_head",
        "fp8_per_token_head",
        "nvfp4",
        "nvfp4_4over6",
    )
)

MAX_SETTING_INT = 2**40
"""The largest integer setting accepted (as config.json's sizes and lengths)."""


def _check_int(field: str, value: int, minimum: int) -> None:
    if type(value) is not int or not minimum <= value <= MAX_SETTING_INT:
        check_int(field, value, minimum=minimum, maximum=MAX_SETTING_INT)


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerSettings:
    """Everything ``get_kv_cache_configs`` reads from vLLM's config, as one value.

    Cache: ``block_size``, ``enable_prefix_caching``, ``prefix_match_unit``,
    ``num_gpu_blocks_override``, ``mamba_cache_mode``, ``cache_dtype``,
    ``prefix_caching_hash_algo``. Parallel: ``decode_context_parallel_size``,
    ``prefill_context_parallel_size``, ``pipeline_parallel_size``,
    ``tensor_parallel_size``. Scheduler: ``disable_hybrid_kv_cache_manager``,
    ``max_num_batched_tokens``, ``max_num_encoder_input_tokens``,
    ``async_scheduling``. Model: ``max_model_len`` and
    ``original_max_model_len`` (``-1`` asks for auto-fit). KV transfer:
    ``kv_connector_extra_config`` (``None`` means no KV connector is
    configured). Speculative decoding: ``speculative_method`` (``None``: no
    speculative config) and ``num_speculative_tokens``.

    ``use_v2_model_runner`` cannot be read from the planner's inputs: it picks
    vLLM's V2 model runner, which changes ``max_concurrent_batches`` under
    async scheduling. It defaults to the V1 runner.
    """

    block_size: int = 16
    enable_prefix_caching: bool = True
    prefix_match_unit: int | None = None
    num_gpu_blocks_override: int | None = None
    mamba_cache_mode: str = "none"
    cache_dtype: str = "auto"
    prefix_caching_hash_algo: str = "sha256"
    decode_context_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    disable_hybrid_kv_cache_manager: bool = False
    max_num_batched_tokens: int = 8192
    max_num_encoder_input_tokens: int = 8192
    async_scheduling: bool = False
    max_model_len: int = 8192
    original_max_model_len: int | None = None
    kv_connector_extra_config: PMap[str, object] | None = None
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    use_v2_model_runner: bool = False
    num_prefill_lookahead_tokens: int = 0
    """vLLM 0.33+'s ``VllmConfig.num_prefill_lookahead_tokens`` (prefill tokens the drafter
    reads past the computed range); sets ``SlidingWindowSpec.extra_retained_tokens``."""
    vllm_version: str = DEFAULT_VLLM_VERSION
    """The vLLM release whose rules plan and replay with these settings (``"0.26"``,
    ``"0.33"``, ``"0.34"``; ``"X.Y.0"`` is read as ``"X.Y"``)."""
    _rules: PlannerRules = field(init=False, repr=False, compare=False)
    """The rules of ``vllm_version``, looked up once (the planner reads them often)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "vllm_version", normalize_vllm_version(self.vllm_version, field="vllm_version")
        )
        object.__setattr__(self, "_rules", planner_rules(self.vllm_version))
        _check_int("block_size", self.block_size, 1)
        if self.prefix_match_unit is not None:
            _check_int("prefix_match_unit", self.prefix_match_unit, 1)
        if self.num_gpu_blocks_override is not None:
            _check_int("num_gpu_blocks_override", self.num_gpu_blocks_override, 1)
        if self.mamba_cache_mode not in MAMBA_CACHE_MODES:
            raise InvalidFieldError(
                field="mamba_cache_mode",
                value=self.mamba_cache_mode,
                reason=f"must be one of {', '.join(MAMBA_CACHE_MODES)}",
            )
        if self.cache_dtype not in CACHE_DTYPES:
            raise InvalidFieldError(
                field="cache_dtype",
                value=self.cache_dtype,
                reason="must be one of vLLM's cache dtypes: " + ", ".join(sorted(CACHE_DTYPES)),
            )
        if self.prefix_caching_hash_algo not in PREFIX_CACHING_HASH_ALGOS:
            raise InvalidFieldError(
                field="prefix_caching_hash_algo",
                value=self.prefix_caching_hash_algo,
                reason=f"must be one of {', '.join(PREFIX_CACHING_HASH_ALGOS)}",
            )
        _check_int("decode_context_parallel_size", self.decode_context_parallel_size, 1)
        _check_int("prefill_context_parallel_size", self.prefill_context_parallel_size, 1)
        _check_int("pipeline_parallel_size", self.pipeline_parallel_size, 1)
        _check_int("tensor_parallel_size", self.tensor_parallel_size, 1)
        _check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _check_int("max_num_encoder_input_tokens", self.max_num_encoder_input_tokens, 0)
        _check_int("max_model_len", self.max_model_len, 1)
        if self.original_max_model_len is not None:
            _check_int("original_max_model_len", self.original_max_model_len, -1)
        if self.num_speculative_tokens is not None:
            _check_int("num_speculative_tokens", self.num_speculative_tokens, 0)
        _check_int("num_prefill_lookahead_tokens", self.num_prefill_lookahead_tokens, 0)

    @property
    def rules(self) -> PlannerRules:
        """The planning rules of ``vllm_version`` (one frozen record per release)."""
        return self._rules

    @property
    def max_concurrent_batches(self) -> int:
        """Batches in flight at once: the pipeline depth, more with async scheduling.

        Rule ``v2_model_runner_only`` (``VllmConfig.max_concurrent_batches``): from 0.33
        on, async scheduling gives ``pp + 1``; vLLM 0.26's V1 runner gave ``pp`` (2 when
        ``pp == 1``) unless ``use_v2_model_runner``.
        """
        pp = self.pipeline_parallel_size
        if self.async_scheduling:
            if self.use_v2_model_runner or self.rules.v2_model_runner_only:
                return pp + 1
            if pp <= 1:
                return 2
        return pp

    @property
    def max_in_flight_tokens(self) -> int:
        """Tokens scheduled but not yet settled: one full batch per concurrent step."""
        return self.max_concurrent_batches * self.max_num_batched_tokens

    @property
    def has_kv_connector(self) -> bool:
        """Whether a KV transfer config (a KV connector) is present."""
        return self.kv_connector_extra_config is not None

    @property
    def enable_cross_layers_blocks(self) -> bool:
        """The connector's experimental ``enable_cross_layers_blocks`` flag, as vLLM reads it."""
        extra = self.kv_connector_extra_config
        if extra is None:
            return False
        return str(extra.get("enable_cross_layers_blocks", "False")).lower() == "true"

    @property
    def has_speculative_config(self) -> bool:
        """Whether speculative decoding is configured."""
        return self.speculative_method is not None or self.num_speculative_tokens is not None

    @property
    def use_eagle(self) -> bool:
        """vLLM's ``speculative_config.use_eagle()``: EAGLE, EAGLE-3 or MTP drafting."""
        return self.speculative_method in EAGLE_METHODS

    @property
    def use_eagle_block_drop(self) -> bool:
        """vLLM 0.33+'s ``SpeculativeConfig.use_eagle_block_drop()``: EAGLE, EAGLE-3, MTP."""
        return self.speculative_method in ("eagle", "eagle3", "mtp")

    @property
    def auto_fit_max_model_len(self) -> bool:
        """Whether max_model_len is to be fitted to memory (``original_max_model_len == -1``)."""
        return self.original_max_model_len == AUTO_FIT_MAX_MODEL_LEN

    def with_max_model_len(self, max_model_len: int) -> PlannerSettings:
        """A copy with another max_model_len (the estimate searches over these).

        Only the new value is checked: every other field was checked when ``self``
        was built, so the copy is made field by field without the full check.
        """
        _check_int("max_model_len", max_model_len, 1)
        cls = type(self)
        copy = object.__new__(cls)
        for name in cls.__dataclass_fields__:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "max_model_len", max_model_len)
        return copy
