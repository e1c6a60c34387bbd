"""Which runner vLLM picks for an architecture name, per release (data only).

vLLM's ``ModelConfig._get_default_runner_type`` (vllm/config/model.py, the same
function in 0.26, 0.33 and 0.34) runs an architecture its registry lists with
the runner its model class implements, and any other by the first
``_SUFFIX_TO_DEFAULTS`` ending its name has (:data:`ARCHITECTURE_SUFFIX_RUNNERS`).
The sets below are the registered architectures whose class disagrees with
their name's ending, read from each release's own registry by
``tools/vllm_oracle/runner_types_vllm.py`` (every registered class loaded on
CPU; the full answers are ``tests/data/vllm-X-oracle/runner_types.json``).
Architectures whose modules need CUDA-only extensions to import were read in
the source instead: all are generative, and only ``Dots3NoteMTPModel``
(0.33, 0.34: a ``DeepseekV32MTP``) and ``MistralLarge4DSparkModel`` (0.34: a
draft model with ``compute_logits``) end in ``Model``.

No kvpure import here: :mod:`kvpure.serve.rules` reads it.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "ARCHITECTURE_SUFFIX_RUNNERS",
    "GENERATIVE_BY_REGISTRY_0_26",
    "GENERATIVE_BY_REGISTRY_0_33",
    "GENERATIVE_BY_REGISTRY_0_34",
    "POOLING_BY_REGISTRY_0_26",
    "POOLING_BY_REGISTRY_0_33",
    "POOLING_BY_REGISTRY_0_34",
    "RunnerType",
]

RunnerType = Literal["generate", "pooling"]
"""vLLM's ``RunnerType`` for the two runners a served model takes (``draft`` aside)."""

#: vLLM's ``_SUFFIX_TO_DEFAULTS`` (vllm/config/model.py; the same in 0.26, 0.33 and 0.34),
#: in its order: the first ending an unregistered architecture has decides.
ARCHITECTURE_SUFFIX_RUNNERS: Final[tuple[tuple[str, RunnerType], ...]] = (
    ("ForCausalLM", "generate"),
    ("ForConditionalGeneration", "generate"),
    ("ChatModel", "generate"),
    ("LMHeadModel", "generate"),
    ("ForTextEncoding", "pooling"),
    ("EmbeddingModel", "pooling"),
    ("ForSequenceClassification", "pooling"),
    ("ForTokenClassification", "pooling"),
    ("ForAudioClassification", "pooling"),
    ("ForImageClassification", "pooling"),
    ("ForVideoClassification", "pooling"),
    ("ClassificationModel", "pooling"),
    ("ForRewardModeling", "pooling"),
    ("RewardModel", "pooling"),
    ("Model", "pooling"),
)

#: vLLM 0.26's registered architectures that run the pooling runner; their names
#: end as generative ones or in no listed ending.
POOLING_BY_REGISTRY_0_26: Final = frozenset(
    {
        "BertForMaskedLM",
        "ColModernVBertForRetrieval",
        "ColPaliForRetrieval",
        "ColQwen3",
        "ColQwen3_5",
        "GritLM",
        "HF_ColBERT",
        "JinaForRanking",
        "JinaVLForRanking",
        "PrithviGeoSpatialMAE",
        "RobertaForMaskedLM",
        "Terratorch",
    }
)

#: vLLM 0.26's registered architectures that run the generate runner; their names
#: end in a pooling ending (mostly ``Model``).
GENERATIVE_BY_REGISTRY_0_26: Final = frozenset(
    {
        "BailingMoeV25MTPModel",
        "ChatGLMModel",
        "DFlashDraftModel",
        "DSparkDraftModel",
        "DeepSeekMTPModel",
        "DeepSeekV4MTPModel",
        "EagleDeepSeekMTPModel",
        "ErnieMTPModel",
        "Gemma2Model",
        "Gemma4DSparkModel",
        "Gemma4MTPModel",
        "Glm4MoeLiteMTPModel",
        "Glm4MoeMTPModel",
        "GlmOcrMTPModel",
        "InklingMTPModel",
        "LlamaModel",
        "MiDashengLMModel",
        "MiMoMTPModel",
        "MiMoV2MTPModel",
        "MiMoV2OmniMTPModel",
        "MistralModel",
        "MossAudioModel",
        "OpenPanguMTPModel",
        "PEagleDraftModel",
        "Qwen2Model",
        "Qwen2_5OmniModel",
        "Qwen3DSparkModel",
        "UltravoxModel",
    }
)

#: vLLM 0.33's registered pooling-runner architectures: 0.26's, with these registered
#: and ``GritLM`` / ``PrithviGeoSpatialMAE`` no longer registered.
POOLING_BY_REGISTRY_0_33: Final = (
    POOLING_BY_REGISTRY_0_26
    | {
        "ClefFlashForJointSchema",
        "ClefOmniForJointSchema",
        "ColUltraVBertForRetrieval",
    }
) - {"GritLM", "PrithviGeoSpatialMAE"}

#: vLLM 0.33's registered generate-runner architectures with pooling endings: 0.26's and
#: the drafters and models registered since.
GENERATIVE_BY_REGISTRY_0_33: Final = GENERATIVE_BY_REGISTRY_0_26 | {
    "BailingMoeV3MTPModel",
    "DFlash2BeamDraftModel",
    "DFlash2DraftModel",
    "DFlashMuseGlimmerAssistantModel",
    "DFlashQwen3XPressModel",
    "DSparkV41DraftModel",
    "DeepseekV32MTPModel",
    "DeepseekV3BidirectionalModel",
    "Dots3NoteMTPModel",
    "Glm5NextMTPModel",
    "K3DSparkModel",
    "KimiK3MTPModel",
    "LiLiCorrDraftModel",
    "MuseGlimmerAssistantModel",
    "MuseSparkDSparkModel",
    "ParseAuxMTPModel",
    "Qwen3OmniDSparkModel",
    "Qwen3XPressModel",
}

#: vLLM 0.34's registered pooling-runner architectures: 0.33's unchanged.
POOLING_BY_REGISTRY_0_34: Final = POOLING_BY_REGISTRY_0_33

#: vLLM 0.34's registered generate-runner architectures with pooling endings: 0.33's, with
#: four drafters registered and ``PEagleDraftModel`` no longer registered.
GENERATIVE_BY_REGISTRY_0_34: Final = (
    GENERATIVE_BY_REGISTRY_0_33
    | {
        "DFlash2RicursiveDraftModel",
        "DSparkMiniMaxDraftModel",
        "MistralLarge4DSparkModel",
        "Nemotron3_5TranscribeMTPModel",
    }
) - {"PEagleDraftModel"}
