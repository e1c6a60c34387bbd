"""kvpure: vLLM's KV-cache planning and block hashing, exactly and offline.

The core is pure: frozen values in, frozen values out, no torch, no
environment reads. ``kvpure.free_queue`` is the one mutable shell and
``kvpure_gpu`` (a separate package) turns plans into torch tensors.
"""

from __future__ import annotations

from kvpure.errors import (
    InvalidFieldError,
    KVPureError,
    KVPureNotImplementedError,
    KVPureRuntimeError,
    KVPureValueError,
)

__version__ = "0.1.0"

__all__ = [
    "InvalidFieldError",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureValueError",
    "__version__",
]

# --- hashing ---------------------------------------------------------------
# (the hashing area re-exports its public names here)
from kvpure.errors import (
    BlockSizeMismatchError,
    CborEncodeError,
    GroupIdOutOfRangeError,
    RandomNoneHashNotRequestedError,
    UnknownHashAlgorithmError,
    UnknownHashProfileError,
)
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    BlockHash,
    BlockHashListWithBlockSize,
    BlockHashWithGroupId,
    ExternalBlockHash,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    RequestBlockHashes,
    VllmHashProfile,
    extend_block_hashes,
    generate_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    get_hash_fn_by_name,
    get_hash_profile,
    hash_block_tokens,
    hash_prompt,
    hash_token_blocks,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    none_hash_seed_from_environment,
    resolve_block_hashes,
)

__all__ += [
    "VLLM_0_26",
    "VLLM_0_33",
    "BlockHash",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "BlockSizeMismatchError",
    "CborEncodeError",
    "ExternalBlockHash",
    "GroupIdOutOfRangeError",
    "HashRequest",
    "HashScheme",
    "MultiModalFeature",
    "PromptEmbeds",
    "RandomNoneHashNotRequestedError",
    "RequestBlockHashes",
    "UnknownHashAlgorithmError",
    "UnknownHashProfileError",
    "VllmHashProfile",
    "extend_block_hashes",
    "generate_block_hash_extra_keys",
    "get_block_hash",
    "get_group_id",
    "get_hash_fn_by_name",
    "get_hash_profile",
    "hash_block_tokens",
    "hash_prompt",
    "hash_token_blocks",
    "make_block_hash_with_group_id",
    "maybe_convert_block_hash",
    "none_hash_seed_from_environment",
    "resolve_block_hashes",
]


# --- specs and planning ----------------------------------------------------
from kvpure.errors import (
    AutoFitError,
    ContextParallelUnsupportedError,
    HybridUnificationError,
    InsufficientKVCacheMemoryError,
    NoKVCacheMemoryError,
    PageSizeUnificationError,
    PlanningAssertionError,
    PrefixMatchUnitError,
    SpecMergeError,
    UnregisteredSpecError,
    WindowSizeMismatchError,
    WorkerSpecMismatchError,
)
from kvpure.grouping import (
    KVCacheGrouping,
    PaddingFact,
    get_kv_cache_groups,
    unify_hybrid_kv_cache_specs,
    unify_kv_cache_spec_page_size,
)
from kvpure.layers import LayerMap
from kvpure.plan import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
    PlannerSettings,
)
from kvpure.planning import (
    AutoFitFact,
    KVCachePlan,
    NumBlocksOverrideFact,
    WorkerPlanFacts,
    generate_scheduler_kv_cache_config,
    get_kv_cache_configs,
)
from kvpure.planning_log import LogLine, vllm_log_lines
from kvpure.planning_memory import (
    check_enough_kv_cache_memory,
    estimate_max_model_len,
    get_kv_cache_capacity,
    get_max_concurrency_for_kv_cache_config,
    max_memory_usage_bytes_from_groups,
    resolve_kv_cache_block_sizes,
)
from kvpure.planning_tensors import get_kv_cache_config_from_groups
from kvpure.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    KVCacheSpecKind,
    KVDtype,
    KVQuantMode,
    MambaAttentionBackendEnum,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    TQFullAttentionSpec,
    UniformTypeKVCacheSpecs,
    get_kv_cache_spec_kind,
    get_kv_cache_spec_sliding_window,
    get_kv_quant_mode,
)

__all__ += [
    "AttentionSpec",
    "AutoFitFact",
    "KVCacheGrouping",
    "LogLine",
    "MambaAttentionBackendEnum",
    "NumBlocksOverrideFact",
    "PaddingFact",
    "WorkerPlanFacts",
    "check_enough_kv_cache_memory",
    "estimate_max_model_len",
    "generate_scheduler_kv_cache_config",
    "get_kv_cache_capacity",
    "get_kv_cache_config_from_groups",
    "get_kv_cache_groups",
    "get_max_concurrency_for_kv_cache_config",
    "max_memory_usage_bytes_from_groups",
    "resolve_kv_cache_block_sizes",
    "unify_hybrid_kv_cache_specs",
    "unify_kv_cache_spec_page_size",
    "vllm_log_lines",
    "AutoFitError",
    "ChunkedLocalAttentionSpec",
    "ContextParallelUnsupportedError",
    "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec",
    "FullAttentionSpec",
    "HiddenStateCacheSpec",
    "HybridUnificationError",
    "InsufficientKVCacheMemoryError",
    "KVCacheConfig",
    "KVCacheGroupSpec",
    "KVCachePlan",
    "KVCacheSpec",
    "KVCacheSpecKind",
    "KVCacheTensor",
    "KVDtype",
    "KVQuantMode",
    "LayerMap",
    "MLAAttentionSpec",
    "MambaSpec",
    "NoKVCacheMemoryError",
    "PageSizeUnificationError",
    "PlannerSettings",
    "PlanningAssertionError",
    "PrefixMatchUnitError",
    "RSWASpec",
    "SinkFullAttentionSpec",
    "SlidingWindowMLASpec",
    "SlidingWindowSpec",
    "SpecMergeError",
    "TQFullAttentionSpec",
    "UniformTypeKVCacheSpecs",
    "UnregisteredSpecError",
    "WindowSizeMismatchError",
    "WorkerSpecMismatchError",
    "get_kv_cache_configs",
    "get_kv_cache_spec_kind",
    "get_kv_cache_spec_sliding_window",
    "get_kv_quant_mode",
]


# --- free block queue ------------------------------------------------------
# (the free-queue area re-exports its public names here)
from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockHashAlreadySetError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    FreeBlockQueueMisuseError,
    NoFreeBlocksError,
    NotEnoughFreeBlocksError,
)
from kvpure.free_queue import (
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    KVCacheBlockCopy,
)

__all__ += [
    "BlockAlreadyQueuedError",
    "BlockHashAlreadySetError",
    "BlockInOtherQueueError",
    "BlockNotQueuedError",
    "FreeBlockQueueMisuseError",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "KVCacheBlockCopy",
    "NoFreeBlocksError",
    "NotEnoughFreeBlocksError",
]


# --- model configs and reports ---------------------------------------------
from kvpure.errors import (  # noqa: E402
    MissingConfigFieldError,
    MissingOptionError,
    ModelConfigError,
    UnknownArchitectureError,
)
from kvpure.models.architectures import SUPPORTED_ARCHITECTURES, model_layout  # noqa: E402
from kvpure.models.config import HFConfig, parse_model_config  # noqa: E402
from kvpure.models.deployment import AttentionBackend, Deployment  # noqa: E402
from kvpure.models.derive import DerivedSpecs, derive_kv_cache_specs  # noqa: E402
from kvpure.models.layout import (  # noqa: E402
    AttentionKind,
    AttentionLayer,
    Mamba2Layer,
    ModelLayout,
)
from kvpure.report import (  # noqa: E402
    CapacityReport,
    GroupReport,
    ModelSummary,
    WasteReport,
    build_capacity_report,
)
from kvpure.report_plan import capacity_report, plan_deployment  # noqa: E402
from kvpure.report_text import render_report, report_to_json  # noqa: E402

__all__ += [
    "SUPPORTED_ARCHITECTURES",
    "AttentionBackend",
    "AttentionKind",
    "AttentionLayer",
    "CapacityReport",
    "DerivedSpecs",
    "Deployment",
    "GroupReport",
    "HFConfig",
    "Mamba2Layer",
    "MissingConfigFieldError",
    "MissingOptionError",
    "ModelConfigError",
    "ModelLayout",
    "ModelSummary",
    "UnknownArchitectureError",
    "WasteReport",
    "build_capacity_report",
    "capacity_report",
    "derive_kv_cache_specs",
    "model_layout",
    "parse_model_config",
    "plan_deployment",
    "render_report",
    "report_to_json",
]
