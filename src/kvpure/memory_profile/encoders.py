"""Vision towers and projectors of multimodal models, counted from config.json.

Used only when the checkpoint's safetensors headers are not at hand (with the
headers every tensor is counted exactly). vLLM loads the encoder of Llama-4
(``Llama4VisionModel``), Gemma-3 (``SiglipVisionModel``), Qwen2/2.5/3-VL
(``Qwen2VisionTransformer``...), Mistral-3 (``PixtralHFVisionModel``) and
Kimi-VL (``MoonVitPretrainedModel``) with tensor-parallel linear layers
(``QKVParallelLinear``/``ColumnParallelLinear`` then ``RowParallelLinear``,
the default ``mm_encoder_tp_mode="weights"``) on the first pipeline stage, in
the model's dtype whatever the text layers' quantization. Each encoder layer
holds ``qkv`` (``3h x h`` plus bias), the output projection (``h x h``), the MLP
(``fc1``/``fc2``, or a gated ``gate_up``/``down`` for Qwen2.5/3-VL) and two
norms; the patch embedding is ``channels x patch^2 (x temporal patch) x h``;
learned position embeddings where the family has them; then the family's
projector. Counted parameters, so the estimate stays inside the weights' band
only where vLLM adds nothing of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.models.config import HFConfig

__all__ = ["EncoderShape", "encoder_buffer_bytes", "encoder_bytes_per_rank", "encoder_shape"]

_QWEN_VISION_ROPE_POSITIONS = 8192
"""Qwen2/2.5/3-VL's vision rotary: ``get_rope(head_dim, max_position=8192,
partial_rotary_factor=0.5)`` (qwen2_vl.py, qwen2_5_vl.py, qwen3_vl.py)."""

_GATED_MLP = frozenset({"qwen2_5_vl", "qwen2_5_vl_text"})
_LEARNED_POSITIONS = frozenset({"gemma3", "siglip_vision_model", "llama4", "kimi_vl"})
_QWEN3_VL = frozenset({"qwen3_vl", "qwen3_vl_moe"})
_QWEN3_VL_DEFAULTS = {"intermediate_size": 4304, "num_position_embeddings": 2304, "in_channels": 3}
"""transformers' ``Qwen3VLVisionConfig`` defaults for fields config.json may omit."""
_QWEN3_5 = frozenset({"qwen3_5", "qwen3_5_moe"})
"""Qwen3.5 / Qwen3.6: Qwen3-VL's vision transformer (qwen3_5.py reuses it), no deepstack."""
_QWEN3_5_DEFAULTS = {**_QWEN3_VL_DEFAULTS, "out_hidden_size": 3584, "num_heads": 16}
"""transformers' ``Qwen3_5VisionConfig`` defaults (out_hidden_size 3584 whatever the
language model's width, 16 heads) for fields config.json may omit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderShape:
    """Parameter counts of one model's encoder: sharded over TP, and replicated."""

    sharded: int
    replicated: int


def _first_int(cfg: HFConfig, *keys: str, default: int = 0) -> int:
    for key in keys:
        if cfg.has(key):
            return cfg.int_(key, default)
    return default


def _projector(config: HFConfig, vision: HFConfig, h: int, text_h: int) -> tuple[int, int]:
    """The projector between the encoder and the language model: (sharded, replicated).

    Sharded where vLLM uses parallel linear layers (Llama-4's adapter MLP and
    ``multi_modal_projector``, the Qwen mergers' ``4h -> 4h -> out`` MLP);
    replicated for Gemma-3's projection weight and Kimi-VL's ``ReplicatedLinear``s.
    """
    family = config.str_("model_type", "")
    if family.startswith("gemma3"):
        return 0, h * text_h + h  # mm_input_projection_weight + mm_soft_emb_norm
    if family.startswith("llama4"):
        ratio = 0.5
        merged = int(h / (ratio * ratio))
        inp = _first_int(vision, "projector_input_dim", default=4096)
        out = _first_int(vision, "projector_output_dim", default=4096)
        vout = _first_int(vision, "vision_output_dim", default=out)
        return merged * inp + inp * out + vout * text_h, 0  # adapter MLP + projector
    if family.startswith("kimi_vl"):
        merged = h * 4
        return 0, h * 2 + merged * merged + merged + merged * text_h + text_h
    if family.startswith("qwen"):
        merge = vision.int_("spatial_merge_size", 2)
        merged = h * merge * merge
        out = _first_int(vision, "out_hidden_size", "hidden_size", default=text_h)
        return merged * merged + merged + merged * out, h * 2 + out
    return 0, h * text_h


def _qwen3_vl(vision: HFConfig, text_hidden: int, *, qwen3_5: bool = False) -> EncoderShape:
    """Qwen3-VL's vision transformer (vLLM's ``Qwen3_VisionTransformer``, qwen3_vl.py).

    Plain (ungated) MLP blocks with biases and LayerNorms, a learned position table
    (``num_position_embeddings x h``), the patch merger (LayerNorm on ``h``, then
    ``4h -> 4h -> out``) and one more merger per ``deepstack_visual_indexes`` entry
    (its LayerNorm on ``4h``).
    """

    defaults = _QWEN3_5_DEFAULTS if qwen3_5 else _QWEN3_VL_DEFAULTS

    def field(key: str) -> int:
        return vision.int_(key, defaults.get(key))

    h = vision.int_("hidden_size", minimum=1)
    inter = field("intermediate_size")
    merge = vision.int_("spatial_merge_size", 2)
    merged = h * merge * merge
    out = vision.int_(
        "out_hidden_size", _QWEN3_5_DEFAULTS["out_hidden_size"] if qwen3_5 else text_hidden
    )
    per_layer = 3 * h * h + 3 * h + h * h + h + 2 * h * inter + inter + h + 4 * h
    patch = vision.int_("patch_size", 16)
    embed = field("in_channels") * vision.int_("temporal_patch_size", 2) * patch * patch * h + h
    merger_mlp = merged * merged + merged + merged * out  # column then row parallel
    deepstack = (
        len(vision.int_list("deepstack_visual_indexes"))
        if vision.has("deepstack_visual_indexes")
        else 0
    )
    replicated = (
        embed + field("num_position_embeddings") * h + 2 * h + out + deepstack * (2 * merged + out)
    )
    sharded = vision.int_("depth", minimum=1) * per_layer + (1 + deepstack) * merger_mlp
    return EncoderShape(sharded=sharded, replicated=replicated)


def _pixtral(config: HFConfig, vision: HFConfig, text_hidden: int) -> EncoderShape:
    """Mistral-3's Pixtral tower (vLLM's ``PixtralHFVisionModel``, pixtral.py).

    No biases: ``qkv_proj`` (``3h x h``), ``o_proj``, a gated MLP (``gate_up_proj``
    and ``down_proj``) and two RMSNorms per layer; the patch convolution and
    ``ln_pre``; rotary positions (no learned table). Then mistral3.py's projector:
    RMSNorm, the patch merger (``h x merge^2 -> h``) and two linear layers (with
    biases when ``multimodal_projector_bias``).
    """
    h = vision.int_("hidden_size", minimum=1)
    inter = vision.int_("intermediate_size", minimum=1)
    per_layer = 4 * h * h + 3 * h * inter + 2 * h
    patch = vision.int_("patch_size", 14)
    embed = vision.int_("num_channels", 3) * patch * patch * h + h
    merge = config.int_("spatial_merge_size", 2)
    bias = text_hidden * 2 if config.bool_("multimodal_projector_bias", False) else 0
    linears = h * text_hidden + text_hidden * text_hidden  # column then row parallel
    layers = vision.int_("num_hidden_layers", minimum=1)
    replicated = embed + h + h * merge * merge * h + bias
    return EncoderShape(sharded=layers * per_layer + linears, replicated=replicated)


def encoder_shape(config: HFConfig, text_hidden: int) -> EncoderShape | None:
    """The encoder's parameter counts, or None when config.json names no vision tower."""
    if not config.has("vision_config"):
        return None
    vision = config.sub("vision_config")
    family = config.str_("model_type", "")
    if family in _QWEN3_VL or family in _QWEN3_5:
        return _qwen3_vl(vision, text_hidden, qwen3_5=family in _QWEN3_5)
    if family.startswith(("mistral3", "ministral3")) or vision.str_("model_type", "") == "pixtral":
        return _pixtral(config, vision, text_hidden)
    h = _first_int(vision, "hidden_size", "embed_dim")
    if family.startswith("qwen2_vl") and vision.has("embed_dim"):
        h = vision.int_("embed_dim")
    layers = _first_int(vision, "num_hidden_layers", "depth")
    if h <= 0 or layers <= 0:
        return None
    inter = _first_int(vision, "intermediate_size", default=0)
    if not inter:
        ratio = vision.data.get("mlp_ratio", 4)
        inter = int(h * (ratio if isinstance(ratio, int | float) and ratio > 0 else 4))
    gated = family in _GATED_MLP
    mlp = (3 if gated else 2) * h * inter + (2 * inter if gated else inter) + h
    per_layer = 3 * h * h + 3 * h + h * h + h + mlp + 4 * h
    patch = _first_int(vision, "patch_size", default=14)
    channels = _first_int(vision, "num_channels", "in_channels", "in_chans", default=3)
    temporal = _first_int(vision, "temporal_patch_size", default=1)
    qwen = family.startswith("qwen2")
    llama4 = family.startswith("llama4")
    if family in _GATED_MLP:  # Qwen2.5-VL: RMSNorms (one weight each) instead of LayerNorms
        per_layer -= 2 * h
    embed = channels * patch * patch * temporal * h + (0 if qwen or llama4 else h)
    positions = 0
    image = _first_int(vision, "image_size", default=0)
    if image and (family in _LEARNED_POSITIONS or family.startswith(("gemma3", "llama4"))):
        # SigLIP has no class token; Llama-4 adds one (class_embedding + its position).
        positions = ((image // patch) ** 2 + (2 if llama4 else 0)) * h
    if vision.has("init_pos_emb_height"):  # MoonViT's Learnable2DInterpPosEmb: (H, W, h)
        grid = vision.int_("init_pos_emb_height") * vision.int_("init_pos_emb_width", 0)
        positions = grid * h
    # The final LayerNorm: none in Qwen2/2.5-VL, two (pre and post) in Llama-4.
    norms = 0 if qwen else 4 * h if llama4 else 2 * h
    if family in _GATED_MLP:
        norms -= h  # Qwen2.5-VL's merger norm is an RMSNorm (counted in the projector as 2h)
    projector_sharded, projector_replicated = _projector(config, vision, h, text_hidden)
    sharded = layers * per_layer + projector_sharded
    if llama4:  # Llama4UnfoldConvolution is a ColumnParallelLinear
        sharded, embed = sharded + embed, 0
    replicated = embed + positions + norms + projector_replicated
    return EncoderShape(sharded=sharded, replicated=replicated)


def encoder_bytes_per_rank(shape: EncoderShape, *, tp: int, dtype_bytes: int) -> int:
    """Bytes of the encoder on one first-stage rank: the parallel layers split over TP."""
    return (-(-shape.sharded // tp) + shape.replicated) * dtype_bytes


def encoder_buffer_bytes(config: HFConfig, *, dtype_bytes: int) -> int:
    """Bytes of the buffers vLLM 0.26 registers in the encoder, on each first-stage rank.

    - Qwen2/2.5/3-VL: the vision rotary's cos/sin cache, 8192 positions x half the
      vision head size, in the model dtype;
    - Gemma-3 (SigLIP): ``position_ids``, one int64 per patch (siglip.py);
    - Mistral-3 (Pixtral): the rotary's ``inv_freq`` and ``original_inv_freq``, float32;
    - Llama-4: the 2D vision rotary, one complex64 per (patch + class token) and
      quarter head size pair (``Llama4VisionRotaryEmbedding._compute_cos_sin_cache``).
    """
    if not config.has("vision_config"):
        return 0
    vision = config.sub("vision_config")
    family = config.str_("model_type", "")
    h = _first_int(vision, "embed_dim" if family.startswith("qwen2_vl") else "hidden_size")
    heads = _first_int(
        vision,
        "num_heads",
        "num_attention_heads",
        default=_QWEN3_5_DEFAULTS["num_heads"] if family in _QWEN3_5 else 0,
    )
    if h <= 0 or heads <= 0:
        return 0
    head_dim = h // heads
    if family.startswith(("qwen2_vl", "qwen2_5_vl")) or family in _QWEN3_VL | _QWEN3_5:
        return _QWEN_VISION_ROPE_POSITIONS * (head_dim // 2) * dtype_bytes
    image = _first_int(vision, "image_size", default=0)
    patch = _first_int(vision, "patch_size", default=14)
    if not image or patch <= 0:
        return 0
    patches = (image // patch) ** 2
    if family.startswith("gemma3"):
        return patches * 8
    if family.startswith(("mistral3", "ministral3")) or vision.str_("model_type", "") == "pixtral":
        # transformers' PixtralRotaryEmbedding (which pixtral.py builds): inv_freq and
        # original_inv_freq, half the head size each, float32 (transformers 5.x).
        dim = vision.int_("head_dim", head_dim)
        return 2 * (dim // 2) * 4
    if family.startswith("llama4"):
        return (patches + 1) * (head_dim // 2) * 8
    return 0
