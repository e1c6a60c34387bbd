"""What vLLM's engine picks for a deployment before it sizes any spec.

The model and KV cache dtypes, the attention backend, ``max_model_len``,
prefix caching with the Mamba cache mode, and async scheduling: each as the
deployment gives it, else the release's default (``kvpure.serve.rules``).
:func:`kvpure.models.derive.derive_kv_cache_specs` calls these.
"""

from __future__ import annotations

from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import AttentionBackend, Deployment
from kvpure.models.layout import ModelLayout
from kvpure.serve.rules import (
    ServeRules,
    default_async_scheduling,
    default_mamba_cache_mode,
    default_prefix_caching,
    is_pooling_runner,
)
from kvpure.specs import KVDtype

__all__ = [
    "KV_CACHE_DTYPES",
    "MODEL_DTYPES",
    "pick_async_scheduling",
    "pick_attention_backend",
    "pick_max_model_len",
    "pick_model_dtype",
    "pick_prefix_and_mamba_mode",
]

KV_CACHE_DTYPES: Final = {
    "bfloat16": KVDtype.BFLOAT16,
    "float16": KVDtype.FLOAT16,
    "fp8": KVDtype.FLOAT8_E4M3FN,
    "fp8_e4m3": KVDtype.FLOAT8_E4M3FN,
    "fp8_e5m2": KVDtype.FLOAT8_E5M2,
}
MODEL_DTYPES: Final = {
    "bfloat16": KVDtype.BFLOAT16,
    "float16": KVDtype.FLOAT16,
    "half": KVDtype.FLOAT16,
    "float32": KVDtype.FLOAT32,
    "float": KVDtype.FLOAT32,
}


def pick_model_dtype(layout: ModelLayout, deployment: Deployment) -> KVDtype:
    name = layout.config_dtype if deployment.dtype == "auto" else deployment.dtype
    dtype = MODEL_DTYPES.get(name.removeprefix("torch."))
    if dtype is None:
        raise InvalidFieldError(
            field="config.json torch_dtype",
            value=name,
            reason="must be bfloat16, float16 or float32 (or pass --dtype)",
        )
    # vLLM serves float32 checkpoints in the platform's half type (bfloat16).
    return KVDtype.BFLOAT16 if dtype is KVDtype.FLOAT32 and deployment.dtype == "auto" else dtype


def pick_attention_backend(layout: ModelLayout, deployment: Deployment) -> AttentionBackend:
    backend = deployment.attention_backend
    if backend is None:
        return AttentionBackend.FLASHMLA if layout.uses_mla else AttentionBackend.FLASH_ATTN
    if backend.is_mla != layout.uses_mla and layout.attention_layers:
        wanted = "an MLA backend" if layout.uses_mla else "a non-MLA backend"
        raise InvalidFieldError(
            field="--attention-backend",
            value=backend.value,
            reason=f"{layout.architecture} needs {wanted}",
        )
    return backend


def pick_max_model_len(layout: ModelLayout, deployment: Deployment, rules: ServeRules) -> int:
    derived, default = layout.context_lengths(yarn_factor=rules.yarn_factor_scales_max_model_len)
    if deployment.max_model_len is None:
        return default
    if deployment.max_model_len > derived:
        raise InvalidFieldError(
            field="--max-model-len",
            value=deployment.max_model_len,
            reason=f"is longer than {layout.architecture}'s limit of {derived} tokens "
            "from config.json; pass at most that or auto",
        )
    return deployment.max_model_len


def pick_prefix_and_mamba_mode(
    layout: ModelLayout, deployment: Deployment, rules: ServeRules
) -> tuple[bool, str]:
    """Prefix caching and the Mamba cache mode: as given, else the release's defaults.

    A Mamba cache mode given without prefix caching implies it (mode ``none``
    turns it off for a model with Mamba layers), as before releases differed.
    """
    has_mamba = bool(layout.mamba_layers)
    prefix = deployment.enable_prefix_caching
    mode = deployment.mamba_cache_mode
    if prefix is None and mode is not None and has_mamba:
        prefix = mode != "none" and not layout.is_encoder_decoder
    if prefix is None:
        prefix = default_prefix_caching(
            rules,
            has_attention=bool(layout.attention_layers),
            has_mamba=has_mamba,
            is_encoder_decoder=layout.is_encoder_decoder,
        )
    if mode is None:
        mode = (
            default_mamba_cache_mode(rules, architecture=layout.architecture, prefix_caching=prefix)
            if has_mamba
            else "none"
        )
    return prefix, mode


def pick_async_scheduling(layout: ModelLayout, deployment: Deployment, rules: ServeRules) -> bool:
    if deployment.async_scheduling is not None:
        return deployment.async_scheduling
    return default_async_scheduling(
        rules,
        pooling=is_pooling_runner(rules, layout.architecture, layout.sentence_transformers_modules),
        speculative_method=deployment.speculative_method,
        pipeline_parallel_size=deployment.pipeline_parallel_size,
    )
