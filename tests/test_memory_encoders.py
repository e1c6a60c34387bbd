"""Vision towers from config.json: counted as vLLM loads them (first stage, split over TP).

Published sizes are the reference: Qwen2-VL's vision encoder is 675M parameters
(Qwen2-VL technical report, arXiv 2409.12191, Table 1: "Vision Encoder 675M"
for every size), and SigLIP-So400m (Gemma-3's encoder) about 400M.
"""

from __future__ import annotations

from kvpure.memory_profile.encoders import (
    encoder_buffer_bytes,
    encoder_bytes_per_rank,
    encoder_shape,
)
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.weights import worker_weights
from kvpure.models.config import parse_model_config

QWEN2_VL_7B = {
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "torch_dtype": "bfloat16",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
    "vision_config": {
        "depth": 32,
        "embed_dim": 1280,
        "mlp_ratio": 4,
        "num_heads": 16,
        "in_chans": 3,
        "hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}
GEMMA3_VISION = {
    "hidden_size": 1152,
    "image_size": 896,
    "intermediate_size": 4304,
    "model_type": "siglip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
}


def test_qwen2_vl_vision_encoder_is_its_published_675m() -> None:
    shape = encoder_shape(parse_model_config(QWEN2_VL_7B), 3584)
    assert shape is not None
    total = shape.sharded + shape.replicated
    assert abs(total - 675_000_000) < 0.01 * 675_000_000


def test_gemma3_siglip_is_about_400m_and_text_only_models_have_none() -> None:
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {"hidden_size": 2560},
        "vision_config": GEMMA3_VISION,
    }
    shape = encoder_shape(parse_model_config(config), 2560)
    assert shape is not None
    assert 400e6 < shape.sharded + shape.replicated < 440e6
    text_only = {k: v for k, v in QWEN2_VL_7B.items() if k != "vision_config"}
    assert encoder_shape(parse_model_config(text_only), 3584) is None


def test_the_encoder_lands_on_the_first_stage_split_over_tp() -> None:
    with_tower = parse_model_config(QWEN2_VL_7B)
    without = parse_model_config({k: v for k, v in QWEN2_VL_7B.items() if k != "vision_config"})
    shape = encoder_shape(with_tower, 3584)
    assert shape is not None
    for tp, pp in ((1, 1), (2, 1), (2, 2)):
        a = worker_weights(with_tower, Parallelism(tp=tp, pp=pp)).bytes_per_worker
        b = worker_weights(without, Parallelism(tp=tp, pp=pp)).bytes_per_worker
        extra = encoder_bytes_per_rank(shape, tp=tp, dtype_bytes=2)
        # and the vision rotary's cos/sin cache (8192 x 40 in bf16), whole on each rank
        extra += encoder_buffer_bytes(with_tower, dtype_bytes=2)
        assert encoder_buffer_bytes(with_tower, dtype_bytes=2) == 8192 * 40 * 2
        assert [x - y for x, y in zip(a, b, strict=True)] == [extra] * tp + [0] * (tp * (pp - 1))
