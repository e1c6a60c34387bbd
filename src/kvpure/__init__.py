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
from kvpure.layers import LayerMap
from kvpure.plan import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
    PlannerSettings,
)
from kvpure.planning import KVCachePlan, get_kv_cache_configs
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
