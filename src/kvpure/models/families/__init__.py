"""Architecture -> layout rule: one function per family of vLLM model code.

Each rule reads the config.json fields that family's vLLM 0.26 model code
reads and decides each layer's kind (full, sliding-window, chunked-local or
latent attention, or a recurrent state) the way that code does; the rules
live in ``dense``, ``gemma``, ``llama4``, ``mla``, ``hybrid``, ``linear`` and
``encoder_decoder``.
:data:`FAMILY_RULES` names the rule each architecture uses, so relatives
that share vLLM's model class share kvpure's rule, and
``model_layout(config, architecture_as=...)`` plans an architecture kvpure
does not list by a listed one's rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from kvpure.models.config import HFConfig
from kvpure.models.errors import ModelConfigError, UnknownArchitectureError
from kvpure.models.families import dense, encoder_decoder, gemma, hybrid, linear, llama4, mla
from kvpure.models.layout import ModelLayout

__all__ = ["FAMILY_RULES", "SUPPORTED_ARCHITECTURES", "model_layout"]

Rule = Callable[[HFConfig], ModelLayout]

_RULES: Final[dict[str, tuple[Rule, tuple[str, ...]]]] = {
    "llama": (
        dense.llama,
        (
            "LlamaForCausalLM",
            "MistralForCausalLM",
            "MixtralForCausalLM",
            "Phi3ForCausalLM",
            "GemmaForCausalLM",
            "InternLMForCausalLM",
            "InternLM3ForCausalLM",
        ),
    ),
    "mistral3": (dense.mistral3, ("Mistral3ForConditionalGeneration",)),
    "qwen": (
        dense.qwen,
        ("Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"),
    ),
    "qwen-vl": (
        dense.qwen_vl,
        (
            "Qwen2VLForConditionalGeneration",
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLMoeForConditionalGeneration",
        ),
    ),
    "head-dim": (
        dense.glm_like,
        ("Glm4ForCausalLM", "Glm4MoeForCausalLM", "GraniteForCausalLM", "MiniMaxM2ForCausalLM"),
    ),
    "granite-moe": (dense.granite_moe, ("GraniteMoeForCausalLM",)),
    "cohere": (dense.cohere, ("CohereForCausalLM",)),
    "every-fourth-full": (dense.every_fourth_full, ("Cohere2ForCausalLM", "Olmo3ForCausalLM")),
    "internlm2": (dense.internlm2, ("InternLM2ForCausalLM",)),
    "transformers-backend": (dense.olmo2, ("Olmo2ForCausalLM",)),
    "gemma2": (gemma.gemma2, ("Gemma2ForCausalLM",)),
    "gemma3": (gemma.gemma3, ("Gemma3ForCausalLM",)),
    "gemma3-mm": (gemma.gemma3_mm, ("Gemma3ForConditionalGeneration",)),
    "gemma3n": (gemma.gemma3n, ("Gemma3nForConditionalGeneration",)),
    "gpt-oss": (gemma.gpt_oss, ("GptOssForCausalLM",)),
    "llama4": (llama4.llama4, ("Llama4ForCausalLM",)),
    "llama4-mm": (llama4.llama4_mm, ("Llama4ForConditionalGeneration",)),
    "deepseek-mla": (
        mla.deepseek,
        ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"),
    ),
    "kimi-linear": (mla.kimi_linear, ("KimiLinearForCausalLM",)),
    "granite-hybrid": (hybrid.granite_hybrid, ("GraniteMoeHybridForCausalLM",)),
    "nemotron-h": (hybrid.nemotron_h, ("NemotronHForCausalLM",)),
    "falcon-h1": (hybrid.falcon_h1, ("FalconH1ForCausalLM",)),
    "jamba": (hybrid.jamba, ("JambaForCausalLM",)),
    "qwen3-next": (linear.qwen3_next, ("Qwen3NextForCausalLM",)),
    "whisper": (encoder_decoder.whisper, ("WhisperForConditionalGeneration",)),
    "qwen3.5": (
        linear.qwen3_5,
        ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    ),
}

FAMILY_RULES: Final[dict[str, str]] = {
    arch: rule_name for rule_name, (_, archs) in _RULES.items() for arch in archs
}
"""Each supported architecture -> the name of the family rule that plans it."""

_FAMILIES: Final[dict[str, Rule]] = {
    arch: rule for rule, archs in _RULES.values() for arch in archs
}

SUPPORTED_ARCHITECTURES: Final[tuple[str, ...]] = tuple(sorted(_FAMILIES))


def model_layout(config: HFConfig, *, architecture_as: str | None = None) -> ModelLayout:
    """The stateful layers of the model config.json describes.

    The first entry of ``architectures`` that kvpure knows is used (vLLM
    tries them in order too); none known raises UnknownArchitectureError.
    ``architecture_as`` (a supported architecture) plans the model by that
    architecture's rule instead, whatever the config names; the layout
    records it in ``planned_as``.
    """
    if not isinstance(config, HFConfig):
        raise ModelConfigError(
            f"model_layout: config must be an HFConfig (parse_model_config(data)), "
            f"got {type(config).__name__}"
        )
    if architecture_as is not None and not isinstance(architecture_as, str):
        raise ModelConfigError(
            f"model_layout: architecture_as must be a string, got {type(architecture_as).__name__}"
        )
    if architecture_as is not None:
        rule = _FAMILIES.get(architecture_as)
        if rule is None:
            raise UnknownArchitectureError(
                architecture=architecture_as,
                supported=SUPPORTED_ARCHITECTURES,
                field="--architecture-as",
            )
        names = config.str_list("architectures") if config.has("architectures") else ()
        own = names[0] if names else architecture_as
        layout = rule(config.with_architecture(own))
        return replace(layout, planned_as=architecture_as)
    names = config.architectures()
    for name in names:
        family = _FAMILIES.get(name)
        if family is not None:
            return family(config.with_architecture(name))
    raise UnknownArchitectureError(architecture=", ".join(names), supported=SUPPORTED_ARCHITECTURES)
