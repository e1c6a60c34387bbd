"""The runner vLLM picks per architecture (pooling turns async scheduling off), per release.

Expected values: each release's own ``ModelConfig._get_default_runner_type`` run
on every architecture its registry lists and on made-up names for every ending
of ``_SUFFIX_TO_DEFAULTS`` (tests/data/vllm-X-oracle/runner_types.json, written
by tools/vllm_oracle/runner_types_vllm.py), and vLLM's ``VllmConfig.__post_init__``
(0.26, 0.33, 0.34): ``runner_type == "pooling"`` -> ``async_scheduling = False``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.models.derive import derive_kv_cache_specs
from kvpure.models.layout import ModelLayout
from kvpure.serve.defaults import Source, resolve_serve_settings
from kvpure.serve.flags import ServeFlags
from kvpure.serve.rules import default_runner_type, is_pooling_architecture, serve_rules

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
RELEASES = ("0.26", "0.33", "0.34")
#: Architectures whose modules need CUDA-only extensions: read in the source, all generative.
NOT_LOADED_ON_CPU_RUNNERS = {
    "Dots3NoteMTPModel": "generate",
    "MistralLarge4DSparkModel": "generate",
}


def _vllm(release: str) -> dict[str, str | None]:
    path = DATA / f"vllm-{release}.0-oracle" / "runner_types.json"
    answers: dict[str, str | None] = json.loads(path.read_text())["runner_types"]
    return answers


@pytest.mark.parametrize("release", RELEASES)
def test_every_registered_architecture_runs_vllms_runner(release: str) -> None:
    rules = serve_rules(release)
    answers = _vllm(release)
    assert len(answers) > 300
    wrong = {}
    for architecture, runner in answers.items():
        expected = runner if runner is not None else NOT_LOADED_ON_CPU_RUNNERS.get(architecture)
        if expected is None:  # not loaded: every such name ends as a generative one
            assert architecture.endswith(
                ("ForCausalLM", "ForConditionalGeneration", "MTP", "V")
            ) or (architecture.endswith("Generation")), architecture
            expected = "generate"
        if default_runner_type(rules, architecture) != expected:
            wrong[architecture] = expected
    assert wrong == {}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    "architecture",
    [
        "BertModel",  # registered: BertEmbeddingModel
        "Qwen3ForSequenceClassification",  # not registered: the ending decides
        "LlamaForCausalLM",
        "LlamaModel",  # registered with LlamaForCausalLM's class: generative
        "Qwen2ForRewardModel",
        "BertForMaskedLM",  # registered pooling class, generative-looking name
        "ChatGLMModel",
        "FooForTextEncoding",
        "FooForAudioClassification",
        "FooClassificationModel",
        "FooRewardModel",
        "FooModel",
        "FooChatModel",
        "FooLMHeadModel",
        "FooForEmbedding",  # no such ending in vLLM: generate
        "Foo",
    ],
)
def test_named_architectures(release: str, architecture: str) -> None:
    expected = _vllm(release)[architecture]
    assert default_runner_type(serve_rules(release), architecture) == expected
    assert is_pooling_architecture(serve_rules(release), architecture) is (expected == "pooling")


def _layout(architecture: str) -> ModelLayout:
    path = ROOT / "examples" / "llama3_8b.json"
    base = model_layout(parse_model_config(json.loads(path.read_text())))
    return replace(base, architecture=architecture)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    "architecture",
    ["BertModel", "XLMRobertaForSequenceClassification", "FooForTextEncoding", "LlamaModel"],
)
def test_async_scheduling_follows_the_runner(release: str, architecture: str) -> None:
    pooling = _vllm(release)[architecture] == "pooling"
    flags = ServeFlags(kv_cache_memory_bytes=(24 * 2**30,), vllm_version=release)
    setting = resolve_serve_settings(_layout(architecture), flags)["async_scheduling"]
    assert setting.value is not pooling
    if pooling:
        assert (setting.source, setting.note) == (Source.MODEL_CONFIG, "pooling model")
    derived = derive_kv_cache_specs(
        _layout(architecture), Deployment(kv_cache_memory_bytes=24 * 2**30, vllm_version=release)
    )
    assert derived.settings.async_scheduling is not pooling
