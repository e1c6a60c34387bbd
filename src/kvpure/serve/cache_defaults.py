"""The cache settings of a ``vllm serve`` run: the KV cache dtype and the memory share.

- :func:`resolve_kv_cache_dtype`: ``--kv-cache-dtype auto`` as vLLM resolves it
  (``resolve_kv_cache_dtype_string``, vllm/utils/torch_utils.py: the
  checkpoint's KV quantization, else the model dtype);
- :func:`resolve_gpu_memory_utilization`: ``--gpu-memory-utilization`` unset
  (0.92; 1.0 under 0.34's extensible KV cache, vllm/config/cache.py
  ``CacheConfig.resolved_gpu_memory_utilization``), and 0.34's
  ``enable_extensible_kv_cache`` (vllm/config/vllm.py
  ``VllmConfig._resolve_extensible_kv_cache``).
"""

from __future__ import annotations

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import KV_CACHE_DTYPES
from kvpure.models.layout import ModelLayout
from kvpure.serve.flags import ServeFlags
from kvpure.serve.rules import ServeRules
from kvpure.serve.setting import Setting, Source

__all__ = ["resolve_gpu_memory_utilization", "resolve_kv_cache_dtype"]


def resolve_kv_cache_dtype(layout: ModelLayout, flags: ServeFlags) -> tuple[str, Setting]:
    """The ``--kv-cache-dtype`` the plan runs with, and the setting shown.

    vLLM's ``resolve_kv_cache_dtype_string`` (vllm/utils/torch_utils.py) turns
    ``auto`` into the checkpoint's KV quantization; what stays ``auto`` is the
    model dtype (``kv_cache_dtype_str_to_dtype``), shown by its name.
    """
    given = flags.kv_cache_dtype
    if given is not None and given != "auto":
        return given, Setting(value=given, source=Source.FLAG)
    source = Source.FLAG if given == "auto" else Source.VLLM_DEFAULT
    checkpoint = layout.checkpoint_kv_cache_dtype
    if checkpoint is not None and checkpoint != "auto":
        if checkpoint not in KV_CACHE_DTYPES:
            raise InvalidFieldError(
                field="config.json quantization_config",
                value=checkpoint,
                reason=f"asks for a {checkpoint} KV cache, which kvpure does not plan; give "
                "--kv-cache-dtype (e.g. fp8)",
            )
        note = "auto: the checkpoint's KV cache quantization"
        return checkpoint, Setting(value=checkpoint, source=Source.MODEL_CONFIG, note=note)
    dtype = flags.dtype if flags.dtype not in (None, "auto") else _served_dtype(layout)
    return "auto", Setting(value=dtype, source=source, note="auto: the model dtype")


def _served_dtype(layout: ModelLayout) -> str:
    """config.json's dtype as vLLM serves it (float32 checkpoints in bfloat16)."""
    name = {"float": "float32", "half": "float16", "bf16": "bfloat16"}.get(
        layout.config_dtype, layout.config_dtype
    )
    return "bfloat16" if name == "float32" else name


def resolve_gpu_memory_utilization(
    flags: ServeFlags, rules: ServeRules
) -> tuple[Setting, Setting | None]:
    """``gpu_memory_utilization`` and (0.34) ``enable_extensible_kv_cache``."""
    extensible: Setting | None = None
    on = False
    if rules.extensible_kv_cache_by_default:
        fixed = flags.num_gpu_blocks_override is not None
        on = not fixed and not flags.kv_cache_memory_given
        note = (
            ""
            if on
            else "off: --num-gpu-blocks-override fixes the size"
            if fixed
            else "off: --kv-cache-memory sizes the cache"
        )
        extensible = Setting(value=on, source=Source.VLLM_DEFAULT, note=note)
    if flags.gpu_memory_utilization is not None:
        return Setting(value=flags.gpu_memory_utilization, source=Source.FLAG), extensible
    if on:
        note = "unset: the extensible KV cache is sized from measured memory"
        return Setting(value=1.0, source=Source.VLLM_DEFAULT, note=note), extensible
    value = rules.default_gpu_memory_utilization
    return Setting(value=value, source=Source.VLLM_DEFAULT), extensible
