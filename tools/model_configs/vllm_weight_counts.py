"""Count the bytes vLLM's own model classes allocate, parameters and buffers.

Run with vLLM's source on the path (see vllm_model_specs.py):

    PYTHONPATH=/work/vllm/0.26.0:/work/oracle_deps python \
        tools/model_configs/vllm_weight_counts.py OUT.json CONFIG.json...

The release is read from ``vllm._version`` and written into OUT.json. vLLM 0.34 runs
too (``vllm_weight_counts_034.json``): its CPU platform refuses x86 without Triton,
which the build never calls, so the check is told Triton is there; the wheel's
``vllm/third_party`` (flash-linear-attention, which the gated-delta-net layers import)
must be unpacked too: its Python files go to any folder named by
``VLLM_THIRD_PARTY=DIR/vllm`` (DIR/vllm/third_party/...), which is added to
``vllm.__path__``. Model classes are inspected in this process, not vLLM's subprocess,
so that the stubs below apply to them.

(einops in the deps folder, compressed-tensors and loguru for the Qwen3.5/Next classes;
without torchvision a stub is installed, as transformers' image processors import it at
module level. Mistral-3 needs mistral_common and a
transformers release whose pixtral module has ``PixtralRotaryEmbedding``.)

Each model class is built on the meta device at TP 1 (bfloat16, no
quantization) and every parameter and buffer is summed by its top-level
module (``vision_tower``, ``multi_modal_projector``, ``language_model``...),
so the vision tower, projector and rotary caches can be checked against
kvpure's config.json count (``tests/data/model_configs/vllm_weight_counts.json``;
``vllm_weight_counts_more.json`` holds 30 more configs, the bundled ones vLLM 0.26 could
build here: pass them all, those it cannot build are reported on stderr and skipped).
A buffer that is a view of a counted tensor (Mamba2's ``conv_weights``) is not counted
again.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import tempfile
import traceback
import types
from typing import Any

import torch

# Whisper's derived max_model_len is 448: let the fixed 2048 stand (nothing is run).
os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")


def _stub_missing(*packages: str) -> None:
    """Make each of ``packages`` (any submodule) importable when it is not installed.

    transformers' image processors import ``torchvision.transforms.v2.functional``
    at module level, timm (Gemma-3n's vision tower) ``torchvision.ops.misc`` and
    ``torchvision.datasets``; mistral_common (Pixtral) ``jsonschema``, ``tiktoken``, ``fastapi``...;
    building the models on the meta device never calls them.
    Every name such a module is asked for is a class that takes any argument and
    attribute.
    """
    missing = tuple(p for p in packages if importlib.util.find_spec(p) is None)
    if not missing:
        return

    class _AnyMeta(type):
        def __getattr__(cls, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Anything()

    class _Anything(metaclass=_AnyMeta):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __getattr__(self, name: str) -> _Anything:
            if name.startswith("__"):
                raise AttributeError(name)
            return _Anything()

        def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
            return _Anything()

    def _module_getattr(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _AnyMeta(name, (_Anything,), {})

    class _Loader(importlib.abc.Loader):
        def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
            module = types.ModuleType(spec.name)
            module.__getattr__ = _module_getattr  # type: ignore[method-assign]
            module.__path__ = []  # type: ignore[attr-defined]
            module.__version__ = "0.0"  # type: ignore[attr-defined]
            return module

        def exec_module(self, module: types.ModuleType) -> None:
            pass

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(
            self, fullname: str, path: Any, target: Any = None
        ) -> importlib.machinery.ModuleSpec | None:
            if fullname.split(".")[0] not in missing:
                return None
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)

    sys.meta_path.insert(0, _Finder())


_stub_missing("torchvision", "jsonschema", "tiktoken", "fastapi", "uvicorn")
# Kimi-Linear (vllm/models/kimi_k3 in 0.34) imports the CUTLASS DSL only for these fusions.
os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")
os.environ.setdefault("VLLM_ENABLE_GEMM_RS", "0")

import vllm  # noqa: E402
from vllm._version import __version__ as VLLM_VERSION  # noqa: E402

if os.environ.get("VLLM_THIRD_PARTY"):
    vllm.__path__.append(os.environ["VLLM_THIRD_PARTY"])

import vllm.platforms as _platforms  # noqa: E402
from vllm.platforms.cpu import CpuPlatform  # noqa: E402

_platforms._current_platform = CpuPlatform()

_check_config = CpuPlatform.check_and_update_config.__func__


def _check_without_triton(cls: Any, vllm_config: Any) -> None:
    """vLLM 0.34's CPU check refuses x86 without triton-cpu; nothing here runs a kernel."""
    import vllm.triton_utils as triton_utils

    saved = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    try:
        _check_config(cls, vllm_config)
    finally:
        triton_utils.HAS_TRITON = saved


CpuPlatform.check_and_update_config = classmethod(_check_without_triton)  # type: ignore[method-assign, assignment]

import vllm.v1.attention.backends.fa_utils as _fa_utils  # noqa: E402
from vllm.config import CacheConfig, ModelConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.distributed import init_distributed_environment, initialize_model_parallel  # noqa: E402
from vllm.model_executor.model_loader.utils import get_model_architecture  # noqa: E402
from vllm.model_executor.models import registry as _registry  # noqa: E402

_registry._run_in_subprocess = lambda fn: fn()  # inspect here, where the stubs apply

if not hasattr(_fa_utils, "compile_flash_attn_varlen_func_from_specs"):
    # Defined only where flash-attn is built; MLA's prefill module imports the name.
    _fa_utils.compile_flash_attn_varlen_func_from_specs = None  # type: ignore[attr-defined]
if getattr(_fa_utils, "flash_attn_varlen_func", None) is None:
    # MLA's prefill backend asserts the kernel exists; building needs only the name.
    _fa_utils.flash_attn_varlen_func = lambda *a, **k: None  # type: ignore[attr-defined]
    _fa_utils.is_flash_attn_varlen_func_available = lambda: True  # type: ignore[attr-defined]

_cpu_backend = CpuPlatform.get_attn_backend_cls.__func__


def _backend(
    cls: Any, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None
) -> str:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    if getattr(attn_selector_config, "use_sparse", False):  # DeepSeek-V3.2's sparse MLA
        return AttentionBackendEnum.FLASHMLA_SPARSE.get_path()
    if attn_selector_config.use_mla:
        return AttentionBackendEnum.TRITON_MLA.get_path()
    return str(_cpu_backend(cls, selected_backend, attn_selector_config, num_heads))


CpuPlatform.get_attn_backend_cls = classmethod(_backend)  # type: ignore[method-assign, assignment]


_REMOTE_CONFIGS = frozenset({"internlm", "internlm2"})
"""Families whose config class is remote code (not at hand here): a stub class holding
config.json's keys as attributes stands in for it (the model class is vLLM's own)."""
_REMOTE_CONFIG_STUB = """from transformers import PretrainedConfig


class StubConfig(PretrainedConfig):
    model_type = "{model_type}"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
"""


def _patch_for_meta_build() -> None:
    """Constructors that need a real device, for what holds no weight.

    Gemma-3n's ``GeluAndMulSparse`` turns its target sparsity into a float with
    ``.item()`` (run on the CPU instead of the meta device); the sparse MLA impl of
    DeepSeek-V3.2 (``FlashMLASparseImpl``) asks the accelerator for its SM count and
    reserves workspace (a meta-device workspace manager); vLLM 0.34's Kimi-Linear
    (vllm/models/kimi_k3) makes a CUDA stream for overlapping work.
    """
    try:
        from vllm.model_executor.layers import activation
    except ImportError:
        return
    sparse_gelu = getattr(activation, "GeluAndMulSparse", None)
    if sparse_gelu is not None:
        init = sparse_gelu.__init__

        def _on_cpu(self: Any, *args: Any, **kwargs: Any) -> None:
            with torch.device("cpu"):
                init(self, *args, **kwargs)

        sparse_gelu.__init__ = _on_cpu
    torch.accelerator.current_device_index = lambda: 0  # type: ignore[assignment]

    class _NoStream:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    torch.cuda.Stream = _NoStream  # type: ignore[assignment, misc]
    torch.accelerator.empty_cache = lambda: None  # type: ignore[assignment]
    try:
        from vllm.v1.worker.workspace import init_workspace_manager

        init_workspace_manager(torch.device("meta"))
    except ImportError:
        pass
    try:
        from vllm.v1.attention.backends.mla import flashmla_sparse
    except ImportError:
        return
    flashmla_sparse.num_compute_units = lambda *a, **k: 132  # type: ignore[attr-defined]


_patch_for_meta_build()


def counts_for(config_path: str) -> dict[str, Any]:
    folder = tempfile.mkdtemp()
    with open(config_path) as source:
        config = json.load(source)
    config.pop("quantization_config", None)
    if config.get("model_type") == "ministral3" and "vision_config" in config:
        # transformers reads a top-level "ministral3" as the text-only Ministral3Config;
        # the multimodal wrapper (same text_config and vision_config) is "mistral3".
        config["model_type"] = "mistral3"
    remote = config.get("model_type") in _REMOTE_CONFIGS
    if remote:
        with open(os.path.join(folder, "configuration_stub.py"), "w") as handle:
            handle.write(_REMOTE_CONFIG_STUB.format(model_type=config["model_type"]))
        config["auto_map"] = {"AutoConfig": "configuration_stub.StubConfig"}
    with open(os.path.join(folder, "config.json"), "w") as handle:
        json.dump(config, handle)
    model_config = ModelConfig(
        model=folder, skip_tokenizer_init=True, max_model_len=2048, trust_remote_code=remote
    )
    try:
        vllm_config = VllmConfig(model_config=model_config, cache_config=CacheConfig(block_size=16))
    except ValueError as err:  # Kimi-Linear's config sets a mamba block size
        if "--enable-prefix-caching" not in str(err):
            raise
        vllm_config = VllmConfig(
            model_config=model_config,
            cache_config=CacheConfig(block_size=16, enable_prefix_caching=True),
        )
    model_class, arch = get_model_architecture(model_config)
    torch.set_default_dtype(torch.bfloat16)
    with set_current_vllm_config(vllm_config):
        for _ in range(60):
            try:
                vllm_config.compilation_config.static_forward_context.clear()
                with torch.device("meta"):
                    model = model_class(vllm_config=vllm_config, prefix="")
                break
            except AttributeError as err:
                found = re.search(
                    r"'_OpNamespace' '(\w+)' object has no attribute '(\w+)'", str(err)
                )
                if not found:
                    raise
                setattr(getattr(torch.ops, found[1]), found[2], lambda *a, **k: None)
    if os.environ.get("DUMP"):  # every tensor's name, shape and dtype, for reading
        with open(os.environ["DUMP"] + os.path.basename(config_path) + ".txt", "w") as out:
            for name, t in [*model.named_parameters(), *model.named_buffers()]:
                out.write(f"{name} {tuple(t.shape)} {t.dtype}\n")
    parts: dict[str, dict[str, int]] = {}
    seen: set[int] = set()
    for kind, items in (("params", model.named_parameters()), ("buffers", model.named_buffers())):
        for name, tensor in items:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            if tensor._base is not None and id(tensor._base) in seen:
                # A view of a tensor already counted (MambaMixer2's ``conv_weights``
                # buffer views ``conv1d.weight``): no memory of its own.
                continue
            top = name.split(".")[0]
            part = parts.setdefault(
                top, {"params": 0, "buffers": 0, "param_bytes": 0, "buffer_bytes": 0}
            )
            part[kind] += tensor.numel()
            part[kind.removesuffix("s") + "_bytes"] += tensor.numel() * tensor.element_size()
    return {"architecture": arch, "parts": parts}


def main() -> None:
    init_distributed_environment(
        world_size=1,
        rank=0,
        distributed_init_method=f"file://{tempfile.mktemp()}",
        local_rank=0,
        backend="gloo",
    )
    with set_current_vllm_config(VllmConfig()):
        initialize_model_parallel(1, 1)
    result = {}
    for path in sys.argv[2:]:
        try:
            result[os.path.basename(path)] = counts_for(path)
        except Exception as err:
            if os.environ.get("TRACE"):
                traceback.print_exc()
            print(path, type(err).__name__, str(err)[:300], file=sys.stderr)
    with open(sys.argv[1], "w") as handle:
        handle.write(
            json.dumps(
                {"vllm_version": VLLM_VERSION, "tensor_parallel_size": 1, "models": result},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
