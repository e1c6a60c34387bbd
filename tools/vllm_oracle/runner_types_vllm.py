"""vLLM's default runner ("generate" / "pooling") for every architecture it registers.

Runs the release's own ``ModelConfig._get_default_runner_type`` (vllm/config/model.py)
on each registered architecture and on made-up names for every ending of
``_SUFFIX_TO_DEFAULTS``, with no Sentence Transformers pooling config (kvpure sees
config.json only). Model classes are loaded in this process instead of vLLM's
one-subprocess-per-class inspection; import-only packages a CPU box lacks
(torchvision, fastapi, ...) are stubbed. Classes whose modules still fail to
import (CUDA-only extensions) are written as null: read them in the source.

    PYTHONPATH=/path/to/vllm-X:/path/to/oracle_deps .venv/bin/python \\
        tools/vllm_oracle/runner_types_vllm.py X.Y.Z tests/data/vllm-X.Y.Z-oracle/runner_types.json

It wrote ``tests/data/vllm-{0.26.0,0.33.0,0.34.0}-oracle/runner_types.json``, which
``tests/test_serve_runner_types.py`` reads.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types
from typing import Any
from unittest import mock

_STUBS = (
    "partial_json_parser",
    "fastapi",
    "starlette",
    "torchvision",
    "compressed_tensors",
    "numba",
    "timm",
    "torchaudio",
    "terratorch",
)
SAMPLES = [
    "Qwen3ForSequenceClassification",
    "Foo",
    "FooForTextEncoding",
    "FooModel",
    "FooRewardModel",
    "FooForRewardModeling",
    "FooEmbeddingModel",
    "FooForEmbedding",
    "FooClassificationModel",
    "FooForAudioClassification",
    "FooChatModel",
    "FooLMHeadModel",
    "FooForCausalLM",
    "FooForConditionalGeneration",
    "FooForImageClassification",
    "FooForVideoClassification",
    "FooForTokenClassification",
    "FooForSequenceClassification",
    "FooForMaskedLM",
]


class _StubModule(types.ModuleType):
    __path__: list[str] = []  # noqa: RUF012  (a package: its submodules import too)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in _STUBS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def main(release: str, out_path: str) -> None:
    import transformers.models.auto.image_processing_auto  # noqa: F401  (before the stubs)
    import vllm.config.model as config_model
    from vllm.model_executor.models.registry import _VLLM_MODELS, ModelRegistry, _ModelInfo

    sys.meta_path.insert(0, _StubFinder())
    config_model.get_pooling_config = lambda *args, **kwargs: None  # type: ignore[assignment]  # no modules.json
    infos: dict[str, Any] = {}

    def inspect_in_process(arch: str) -> Any:
        if arch not in infos:
            cls = ModelRegistry._try_load_model_cls(arch)
            infos[arch] = None if cls is None else _ModelInfo.from_model_cls(cls)
        return infos[arch]

    ModelRegistry._try_inspect_model_cls = inspect_in_process  # type: ignore[method-assign]
    model_config = types.SimpleNamespace(
        registry=ModelRegistry, model="x", revision=None, model_impl="auto"
    )
    answers: dict[str, str | None] = {}
    for arch in sorted(set(_VLLM_MODELS) | set(SAMPLES)):
        try:
            answers[arch] = config_model.ModelConfig._get_default_runner_type(
                model_config, [arch]
            )
        except Exception:  # the class did not load on CPU: read it in the source
            answers[arch] = None
    data = {
        "vllm": release,
        "source": "vllm/config/model.py ModelConfig._get_default_runner_type, no pooling config",
        "runner_types": answers,
    }
    with open(out_path, "w") as out:
        json.dump(data, out, indent=1, sort_keys=True)
        out.write("\n")
    print(sum(v is None for v in answers.values()), "not loaded of", len(answers))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
