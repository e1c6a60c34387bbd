"""Build each bundled model with vLLM 0.26's own model code and record the KV cache specs.

Run with vLLM's source on the path (tools/vllm_oracle/README.md; the model
modules also need einops, compressed-tensors and loguru in /tmp/oracle_deps):

    PYTHONPATH=/tmp/vllmsrc:/tmp/oracle_deps python tools/model_configs/vllm_model_specs.py \
        OUT.json CONFIG.json...

For each config.json it makes vLLM's ``ModelConfig`` and ``VllmConfig`` (the
cache config's sliding window set as ``EngineArgs.create_engine_config`` sets
it), builds the model class vLLM's registry picks on the meta device (no
weights, no GPU; the CPU platform is forced, custom ops that only need to
exist are stubbed, and MLA layers get an MLA backend's class path because
the CPU platform refuses MLA), then asks every layer in the forward context
for ``get_kv_cache_spec`` as the GPU model runner does (layers sharing
another's KV cache are skipped, as there). Tensor parallelism is 1.

Not built here: MLA models (their prefill backends need a GPU),
multimodal wrappers (vLLM's registry inspects them in a subprocess that needs
torchvision and friends) and InternLM/InternLM2 (remote-code configs).
``tests/data/model_configs/vllm_model_specs.json`` keeps the fields kvpure
derives.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import traceback
from typing import Any

import torch
import vllm.platforms as _platforms
from vllm.platforms.cpu import CpuPlatform

_platforms._current_platform = CpuPlatform()  # noqa: SLF001

from vllm.config import CacheConfig, ModelConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.distributed import (  # noqa: E402
    init_distributed_environment,
    initialize_model_parallel,
)
from vllm.model_executor.model_loader.utils import get_model_architecture  # noqa: E402
from vllm.transformers_utils.config import is_interleaved  # noqa: E402
from vllm.v1.attention.backends.registry import AttentionBackendEnum  # noqa: E402

_KEEP = (
    "num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
    "dtype", "shapes", "dtypes", "mamba_type",
)
_cpu_backend = CpuPlatform.get_attn_backend_cls.__func__


def _backend(
    cls: Any, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None
) -> str:
    if attn_selector_config.use_sparse:
        return AttentionBackendEnum.FLASHMLA_SPARSE.get_path()
    if attn_selector_config.use_mla:
        return AttentionBackendEnum.TRITON_MLA.get_path()
    return str(_cpu_backend(cls, selected_backend, attn_selector_config, num_heads))


CpuPlatform.get_attn_backend_cls = classmethod(_backend)  # type: ignore[method-assign, assignment]


def _plain(value: Any) -> Any:
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(x) for x in value]
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return getattr(value, "name", str(value))


def specs_for(config_path: str) -> tuple[str, dict[str, Any]]:
    folder = tempfile.mkdtemp()
    config = json.loads(open(config_path).read())
    config.pop("quantization_config", None)
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump(config, handle)
    limit = 448 if config.get("model_type") == "whisper" else 2048
    model_config = ModelConfig(model=folder, skip_tokenizer_init=True, max_model_len=limit)
    window = None if is_interleaved(model_config.hf_text_config) else model_config.get_sliding_window()
    vllm_config = VllmConfig(
        model_config=model_config, cache_config=CacheConfig(block_size=16, sliding_window=window)
    )
    model_class, arch = get_model_architecture(model_config)
    out: dict[str, Any] = {}
    with set_current_vllm_config(vllm_config):
        for _ in range(60):
            try:
                vllm_config.compilation_config.static_forward_context.clear()
                with torch.device("meta"):
                    model_class(vllm_config=vllm_config, prefix="")
                break
            except AttributeError as err:  # a custom op looked up at build time
                found = re.search(r"'_OpNamespace' '(\w+)' object has no attribute '(\w+)'", str(err))
                if not found:
                    raise
                setattr(getattr(torch.ops, found[1]), found[2], lambda *a, **k: None)
        for name, layer in vllm_config.compilation_config.static_forward_context.items():
            if not hasattr(layer, "get_kv_cache_spec"):
                continue
            if getattr(layer, "kv_sharing_target_layer_name", None):
                continue
            spec = layer.get_kv_cache_spec(vllm_config)
            if spec is None:
                continue
            fields = {k: _plain(v) for k, v in vars(spec).items() if k in _KEEP}
            out[name] = {"type": type(spec).__name__, **fields}
    return arch, out


def main() -> None:
    init_distributed_environment(
        world_size=1, rank=0, distributed_init_method=f"file://{tempfile.mktemp()}",
        local_rank=0, backend="gloo",
    )
    with set_current_vllm_config(VllmConfig()):
        initialize_model_parallel(1, 1)
    result: dict[str, Any] = {}
    for path in sys.argv[2:]:
        try:
            arch, specs = specs_for(path)
        except Exception:  # noqa: BLE001 - recorded as not built
            traceback.print_exc(limit=2)
            continue
        result[os.path.basename(path)] = {"architecture": arch, "specs": specs}
    data = {"vllm_version": "0.26.0", "conv_layout": "SD", "tensor_parallel_size": 1,
            "models": result}
    with open(sys.argv[1], "w") as handle:
        handle.write(json.dumps(data, indent=0) + "\n")


if __name__ == "__main__":
    main()
