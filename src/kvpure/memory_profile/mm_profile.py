"""The multimodal part of vLLM's profiling run: the encoder outputs it keeps.

``GPUModelRunner.profile_run`` (v1/worker/gpu_model_runner.py, 0.10-0.34) first
runs the encoder on a dummy batch of one modality -- ``max_items_per_batch``
items of the largest feature size, ``encoder_budget // max_tokens_per_item`` of
them (``MultiModalBudget``; the budget is ``max(max_num_batched_tokens,
max_tokens_per_item)``, ``compute_mm_encoder_budget`` in
v1/core/encoder_cache_manager.py) -- and stores the outputs in
``self.encoder_cache`` until the decoder's dummy run and the sampler's are over.
So the peak the release logs holds, beside the decoder's, the encoder outputs:
``rows x width x dtype bytes``, where

- ``rows`` is the items times the rows each output has. vLLM 0.11 and 0.12
  expand an output shorter than the item's placeholder tokens to that length
  (``expanded_outputs``: ``output.new_zeros((max_mm_tokens_per_item, hidden))``);
  the other releases keep the output as it is;
- ``width`` is the language model's hidden size, times ``1 +
  len(deepstack_visual_indexes)`` for Qwen3-VL, whose encoder output carries
  the deepstack features beside the main one (qwen3_vl.py:
  ``Qwen3_VisionTransformer.forward`` concatenates them, ``out_hidden_size * (1 +
  depth_of_deepstack)``).

The encoder's own peak runs before the decoder's, and is not modelled: where it
exceeds the decoder's peak plus the outputs, the logged peak is higher still.
Where the item's size is not in config.json (it comes from the processor:
Qwen-VL's videos, Pixtral's, Llama-4's and Kimi-VL's images), the outputs are
not charged; the KV band is widened below by their upper bound
(:func:`uncharged_outputs_bytes`): the sign is known, the output can only
take memory from the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.memory_profile.model_traits import model_family
from kvpure.models.config import HFConfig

__all__ = [
    "EXPANDING_RELEASES",
    "QWEN3_VL_VIDEO_SOFT_TOKENS",
    "QWEN3_VL_VIDEO_TOKEN_FACTOR",
    "EncoderBatch",
    "encoder_batch",
    "encoder_output_width",
    "encoder_outputs_bytes",
    "uncharged_outputs_bytes",
]

EXPANDING_RELEASES = ((0, 11), (0, 12))
"""Releases whose ``profile_run`` expands each dummy output to the item's placeholder
tokens (``expanded_outputs`` in 0.11.0 and 0.12.0's gpu_model_runner.py; not in 0.10 or
0.13 and later)."""

QWEN3_VL_VIDEO_TOKEN_FACTOR = 12.5
"""vLLM 0.12.0 counts a Qwen3-VL video's placeholder tokens as its soft tokens x 12.5
(timestamps and the vision start/end tokens, ``Qwen3VLProcessingInfo.get_max_video_tokens``);
0.13.0 and later count the soft tokens (the same function returns them as they are)."""

QWEN3_VL_VIDEO_SOFT_TOKENS = 12_288
"""The soft tokens of the video vLLM 0.12.0 profiles Qwen3-VL-30B-A3B on with its processor's
defaults and a 65,536-token context: the log's "Encoder cache will be initialized with a
budget of 153600 tokens, and profiled with 1 video items" is 12,288 x 12.5. The processor's
sizes are not in config.json, so it bounds a Qwen3-VL plan's band, not its estimate."""

_DEEPSTACK = frozenset({"qwen3_vl", "qwen3_vl_moe"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderBatch:
    """The profile's dummy encoder batch: its budget and one item's size."""

    budget_tokens: int
    """The encoder budget (the number vLLM logs: "a budget of N tokens")."""
    item_tokens: int
    """One item's placeholder tokens (``max_tokens_per_item``)."""
    item_rows: int
    """The rows of one item's encoder output."""

    @property
    def items(self) -> int:
        """``encoder_budget // max_tokens_per_item``, at least one (``MultiModalBudget``)."""
        return max(1, self.budget_tokens // self.item_tokens)

    def kept_rows(self, version: tuple[int, int]) -> int:
        """Rows of encoder output ``profile_run`` keeps through the decoder's dummy run."""
        expands = version in EXPANDING_RELEASES
        return self.items * (max(self.item_rows, self.item_tokens) if expands else self.item_rows)


def encoder_output_width(config: HFConfig) -> int:
    """Elements per encoder output row: the text hidden size (x deepstack levels + 1)."""
    if not config.has("vision_config"):
        return 0
    text = config.sub("text_config") if config.has("text_config") else config
    hidden = text.int_("hidden_size", 0)
    if model_family(config) in _DEEPSTACK:
        vision = config.sub("vision_config")
        out = vision.int_("out_hidden_size", hidden)
        levels = (
            len(vision.int_list("deepstack_visual_indexes"))
            if vision.has("deepstack_visual_indexes")
            else 0
        )
        return out * (1 + levels)
    return hidden


def _video_factor(version: tuple[int, int]) -> float:
    """Placeholder tokens per Qwen3-VL video soft token: 12.5 in 0.11-0.12 (0.11 taken as
    0.12: either way those releases keep the whole placeholder length), else 1."""
    return QWEN3_VL_VIDEO_TOKEN_FACTOR if version in EXPANDING_RELEASES else 1.0


def encoder_batch(
    config: HFConfig,
    *,
    version: tuple[int, int],
    max_num_batched_tokens: int,
    budget_tokens: int | None = None,
) -> EncoderBatch | None:
    """The dummy batch where config.json (or the logged budget) fixes it; else None.

    Gemma-3: ``mm_tokens_per_image`` (256) rows per image, pan-and-scan off (the
    processor's default: no crops). Qwen3-VL with the budget vLLM logged: one video of
    the whole budget, ``budget / 12.5`` output rows in 0.12 (``budget`` from 0.13). Other
    families: None.
    """
    family = model_family(config)
    if family == "gemma3" and config.has("vision_config"):  # not Gemma-3n (its own encoders)
        per_image = config.int_("mm_tokens_per_image", 256, minimum=1)
        budget = budget_tokens or max(max_num_batched_tokens, per_image)
        return EncoderBatch(budget_tokens=budget, item_tokens=per_image, item_rows=per_image)
    if family in _DEEPSTACK and budget_tokens:
        rows = int(budget_tokens / _video_factor(version))
        return EncoderBatch(budget_tokens=budget_tokens, item_tokens=budget_tokens, item_rows=rows)
    return None


def uncharged_outputs_bytes(
    width: int,
    *,
    deepstack: bool,
    version: tuple[int, int],
    max_num_batched_tokens: int,
    dtype_bytes: int,
) -> int:
    """The most encoder output an uncharged dummy batch keeps (the band's widening below).

    Qwen3-VL (``deepstack``): the outputs of its default video
    (:data:`QWEN3_VL_VIDEO_SOFT_TOKENS`, as each release keeps it). Other multimodal
    families: one batch of outputs (``max_num_batched_tokens`` rows), the most an
    image-only dummy batch keeps when an image is smaller than the batch
    (``items x tokens <= budget``).
    """
    if deepstack:
        rows = QWEN3_VL_VIDEO_SOFT_TOKENS
        budget = int(rows * _video_factor(version))
        batch = EncoderBatch(budget_tokens=budget, item_tokens=budget, item_rows=rows)
        return batch.kept_rows(version) * width * dtype_bytes
    return max_num_batched_tokens * width * dtype_bytes


def encoder_outputs_bytes(
    config: HFConfig,
    *,
    version: tuple[int, int],
    max_num_batched_tokens: int,
    dtype_bytes: int,
    budget_tokens: int | None = None,
) -> tuple[int, int]:
    """``(charged, band_below)`` bytes of encoder output held through the decoder's run.

    ``charged`` where :func:`encoder_batch` fixes the batch, else 0 and ``band_below``
    is :func:`uncharged_outputs_bytes`; both 0 for a text-only model.
    """
    width = encoder_output_width(config)
    if not width:
        return 0, 0
    batch = encoder_batch(
        config,
        version=version,
        max_num_batched_tokens=max_num_batched_tokens,
        budget_tokens=budget_tokens,
    )
    if batch is not None:
        return batch.kept_rows(version) * width * dtype_bytes, 0
    band = uncharged_outputs_bytes(
        width,
        deepstack=model_family(config) in _DEEPSTACK,
        version=version,
        max_num_batched_tokens=max_num_batched_tokens,
        dtype_bytes=dtype_bytes,
    )
    return 0, band
