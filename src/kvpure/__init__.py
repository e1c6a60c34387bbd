"""kvpure: vLLM's KV-cache planning and block hashing, exactly and offline.

The public face, in vLLM's vocabulary:

- specs and plans (``kvpure.specs``): ``FullAttentionSpec``, ... ``KVCacheConfig``;
- planning (``kvpure.planning``): ``get_kv_cache_configs`` and the helpers users call;
- models (``kvpure.models``, ``kvpure.report``): a config.json to a capacity report;
- hashing (``kvpure.hashing``): ``HashScheme``, ``HashRequest``, ``hash_prompt``, ...;
- the free block queue (``kvpure.free_queue``), the one mutable shell;
- the error root and the errors users catch (``kvpure.errors``).

Everything else stays importable from its subpackage. The names load on
first use, so ``import kvpure`` itself is cheap (see README, "Import time"). The core is pure:
frozen values in, frozen values out, no torch, no environment reads;
``kvpure_gpu`` (a separate package) turns plans into torch tensors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvpure.cli.deployment_plan import (
        DeploymentPlan,
    )
    from kvpure.cli.plan_api import (
        estimate_kv_cache_memory,
        plan_deployment,
    )
    from kvpure.errors import (
        FreeBlockQueueMisuseError,
        InsufficientKVCacheMemoryError,
        InvalidFieldError,
        KVPureError,
        KVPureNotImplementedError,
        KVPureRuntimeError,
        KVPureValueError,
        NoKVCacheMemoryError,
    )
    from kvpure.free_queue import (
        FreeKVCacheBlockQueue,
        KVCacheBlock,
    )
    from kvpure.hashing import (
        VLLM_0_26,
        VLLM_0_33,
        VLLM_0_34,
        BlockHashListWithBlockSize,
        HashAlgorithm,
        HashRequest,
        HashScheme,
        MultiModalFeature,
        PromptEmbeds,
        RequestBlockHashes,
        get_block_hash,
        get_group_id,
        hash_block_tokens,
        hash_prompt,
        make_block_hash_with_group_id,
        maybe_convert_block_hash,
    )
    from kvpure.hashing.errors import (
        RandomNoneHashNotRequestedError,
    )
    from kvpure.models.architectures import (
        model_layout,
    )
    from kvpure.models.config import (
        parse_model_config,
    )
    from kvpure.models.deployment import (
        Deployment,
    )
    from kvpure.models.errors import (
        ModelConfigError,
    )
    from kvpure.planning.grouping import (
        get_kv_cache_groups,
    )
    from kvpure.planning.memory import (
        estimate_max_model_len,
        get_max_concurrency_for_kv_cache_config,
    )
    from kvpure.planning.planner import (
        KVCachePlan,
        get_kv_cache_configs,
    )
    from kvpure.report.model_plan import (
        capacity_report,
    )
    from kvpure.settings import (
        PlannerSettings,
    )
    from kvpure.specs import (
        ChunkedLocalAttentionSpec,
        CrossAttentionSpec,
        EncoderOnlyAttentionSpec,
        FullAttentionSpec,
        HiddenStateCacheSpec,
        KVCacheSpec,
        KVDtype,
        MambaSpec,
        MLAAttentionSpec,
        SinkFullAttentionSpec,
        SlidingWindowMLASpec,
        SlidingWindowSpec,
        UniformTypeKVCacheSpecs,
    )
    from kvpure.specs.kv_cache_config import (
        KVCacheConfig,
        KVCacheGroupSpec,
        KVCacheTensor,
    )
    from kvpure.specs.layer_map import (
        LayerMap,
    )

__version__ = "0.1.0"

_WHERE: dict[str, str] = {
    "BlockHashListWithBlockSize": "kvpure.hashing",
    "ChunkedLocalAttentionSpec": "kvpure.specs",
    "CrossAttentionSpec": "kvpure.specs",
    "Deployment": "kvpure.models.deployment",
    "DeploymentPlan": "kvpure.cli.deployment_plan",
    "EncoderOnlyAttentionSpec": "kvpure.specs",
    "FreeBlockQueueMisuseError": "kvpure.errors",
    "FreeKVCacheBlockQueue": "kvpure.free_queue",
    "FullAttentionSpec": "kvpure.specs",
    "HashAlgorithm": "kvpure.hashing",
    "HashRequest": "kvpure.hashing",
    "HashScheme": "kvpure.hashing",
    "HiddenStateCacheSpec": "kvpure.specs",
    "InsufficientKVCacheMemoryError": "kvpure.errors",
    "InvalidFieldError": "kvpure.errors",
    "KVCacheBlock": "kvpure.free_queue",
    "KVCacheConfig": "kvpure.specs.kv_cache_config",
    "KVCacheGroupSpec": "kvpure.specs.kv_cache_config",
    "KVCachePlan": "kvpure.planning.planner",
    "KVCacheSpec": "kvpure.specs",
    "KVCacheTensor": "kvpure.specs.kv_cache_config",
    "KVDtype": "kvpure.specs",
    "KVPureError": "kvpure.errors",
    "KVPureNotImplementedError": "kvpure.errors",
    "KVPureRuntimeError": "kvpure.errors",
    "KVPureValueError": "kvpure.errors",
    "LayerMap": "kvpure.specs.layer_map",
    "MLAAttentionSpec": "kvpure.specs",
    "MambaSpec": "kvpure.specs",
    "ModelConfigError": "kvpure.models.errors",
    "MultiModalFeature": "kvpure.hashing",
    "NoKVCacheMemoryError": "kvpure.errors",
    "PlannerSettings": "kvpure.settings",
    "PromptEmbeds": "kvpure.hashing",
    "RandomNoneHashNotRequestedError": "kvpure.hashing.errors",
    "RequestBlockHashes": "kvpure.hashing",
    "SinkFullAttentionSpec": "kvpure.specs",
    "SlidingWindowMLASpec": "kvpure.specs",
    "SlidingWindowSpec": "kvpure.specs",
    "UniformTypeKVCacheSpecs": "kvpure.specs",
    "VLLM_0_26": "kvpure.hashing",
    "VLLM_0_33": "kvpure.hashing",
    "VLLM_0_34": "kvpure.hashing",
    "capacity_report": "kvpure.report.model_plan",
    "estimate_kv_cache_memory": "kvpure.cli.plan_api",
    "estimate_max_model_len": "kvpure.planning.memory",
    "get_block_hash": "kvpure.hashing",
    "get_group_id": "kvpure.hashing",
    "get_kv_cache_configs": "kvpure.planning.planner",
    "get_kv_cache_groups": "kvpure.planning.grouping",
    "get_max_concurrency_for_kv_cache_config": "kvpure.planning.memory",
    "hash_block_tokens": "kvpure.hashing",
    "hash_prompt": "kvpure.hashing",
    "make_block_hash_with_group_id": "kvpure.hashing",
    "maybe_convert_block_hash": "kvpure.hashing",
    "model_layout": "kvpure.models.architectures",
    "parse_model_config": "kvpure.models.config",
    "plan_deployment": "kvpure.cli.plan_api",
}


def __getattr__(name: str) -> object:
    """Load a public name from its subpackage on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kvpure' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BlockHashListWithBlockSize",
    "ChunkedLocalAttentionSpec",
    "CrossAttentionSpec",
    "Deployment",
    "DeploymentPlan",
    "EncoderOnlyAttentionSpec",
    "FreeBlockQueueMisuseError",
    "FreeKVCacheBlockQueue",
    "FullAttentionSpec",
    "HashAlgorithm",
    "HashRequest",
    "HashScheme",
    "HiddenStateCacheSpec",
    "InsufficientKVCacheMemoryError",
    "InvalidFieldError",
    "KVCacheBlock",
    "KVCacheConfig",
    "KVCacheGroupSpec",
    "KVCachePlan",
    "KVCacheSpec",
    "KVCacheTensor",
    "KVDtype",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureValueError",
    "LayerMap",
    "MLAAttentionSpec",
    "MambaSpec",
    "ModelConfigError",
    "MultiModalFeature",
    "NoKVCacheMemoryError",
    "PlannerSettings",
    "PromptEmbeds",
    "RandomNoneHashNotRequestedError",
    "RequestBlockHashes",
    "SinkFullAttentionSpec",
    "SlidingWindowMLASpec",
    "SlidingWindowSpec",
    "UniformTypeKVCacheSpecs",
    "VLLM_0_26",
    "VLLM_0_33",
    "VLLM_0_34",
    "__version__",
    "capacity_report",
    "estimate_kv_cache_memory",
    "estimate_max_model_len",
    "get_block_hash",
    "get_group_id",
    "get_kv_cache_configs",
    "get_kv_cache_groups",
    "get_max_concurrency_for_kv_cache_config",
    "hash_block_tokens",
    "hash_prompt",
    "make_block_hash_with_group_id",
    "maybe_convert_block_hash",
    "model_layout",
    "parse_model_config",
    "plan_deployment",
]
