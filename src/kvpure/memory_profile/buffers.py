"""Buffers vLLM registers next to the weights: the rotary cos/sin caches.

Every rotary embedding vLLM builds (``get_rope`` in
vllm/model_executor/layers/rotary_embedding/__init__.py) registers its
``cos_sin_cache`` as a non-persistent buffer (``RotaryEmbeddingBase.__init__``
in ``base.py``): a ``positions x rotary_dim`` table (cos and sin halves) cast
to the rotary's dtype, which is the model dtype unless the model file passes
its own (gpt-oss: float32). The buffer is created on the GPU while the model is
built, so "Model loading took X GiB" includes it. ``get_rope`` keeps one
instance per distinct argument tuple (``_ROPE_DICT``), so all decoder layers
with the same rotary share a single cache; the cache is not split over TP and
each pipeline stage builds its own.

The number of positions depends on the scaling type (vLLM 0.34 files):

- default and ``llama3``: ``max_position_embeddings`` (``base.py``);
- MRoPE (a ``mrope_section``): ``4 x max_position_embeddings`` (``mrope.py``);
- ``linear``: ``max_position_embeddings x factor`` (``linear_scaling_rope.py``);
- ``yarn`` and ``deepseek_yarn``: ``original_max_position_embeddings x factor``
  (``yarn_scaling_rope.py``, ``deepseek_scaling_rope.py``; ``get_rope`` passes
  the original length as ``max_position``);
- DeepSeek-V3.2: a second cache of the same size for the sparse indexer
  (``indexer_rope_emb``, deepseek_v2.py);
- ``longrope``: a short and a long table stacked, ``original_max_position_embeddings +
  max_position_embeddings`` rows (``phi3_long_rope_scaled_rope.py``).

Next to the caches, small buffers vLLM 0.26 registers in the model (persistent or not,
moved to the GPU with it), listed by :func:`model_buffers` as tensors so that they go to
the pipeline stage of their layer:

- four float32 scalars per attention layer, ``_k_scale``, ``_v_scale``, ``_q_scale`` and
  ``_prob_scale`` (``set_default_quant_scales(register_buffer=True)`` in
  vllm/model_executor/layers/attention/attention.py, for ``Attention`` and
  ``MLAAttention``; Whisper: its decoder's self- and cross-attention, not the encoder's);
- Kimi-Linear's MLA layers: a fifth, ``_one_scale`` (one float32; vLLM 0.34's
  vllm/models/kimi_k3/nvidia/model.py);
- Gemma's embedding ``normalizer``, one scalar in the model dtype (gemma.py, gemma2.py,
  gemma3.py);
- Falcon-H1's ``mup_vector`` per layer, the width of the Mamba2 ``in_proj`` output in the
  model dtype (falcon_h1.py ``_init_mup_vector``; split over TP in vLLM, counted whole).

Sizes: Llama-4-Scout's 10,485,760 positions x 128 x 2 B = 2.5 GiB per worker
(its TP 4 log: 53.12 GiB loaded, 2.44 GiB over the parameters); Gemma-3-4B's
two rotaries (local: 131,072 x 256; global, linear x 8: 1,048,576 x 256) 0.56 GiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kvpure.memory_profile.checkpoint_tensors import layer_kinds, uses_vllm_rotary
from kvpure.memory_profile.hybrid_layers import falcon_h1_projected
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.config import HFConfig

__all__ = [
    "HF_ROTARY_BUFFERS",
    "MROPE_POSITIONS_FACTOR",
    "RotaryCache",
    "model_buffers",
    "rotary_cache_bytes",
    "rotary_caches",
]

HF_ROTARY_BUFFERS: Final = ("inv_freq", "original_inv_freq")
"""Hugging Face's rotary buffers (``rotary_emb``), float32 whatever the model dtype."""

_ATTENTION_SCALES: Final = ("_k_scale", "_v_scale", "_q_scale", "_prob_scale")

_FLOAT32_ROTARY: Final = frozenset({"gpt_oss"})
"""Families whose model file builds the rotary in float32 (gpt_oss.py: ``dtype=torch.float32``)."""
_TWO_ROTARIES: Final = frozenset({"gemma3", "gemma3_text"})
"""Gemma-3: sliding layers use a plain rotary at ``rope_local_base_freq``, full layers
the scaled one."""

_NO_ROTARY: Final = frozenset({"mamba", "mamba2", "nemotron_h", "jamba"})
"""Families without rotary positions (nemotron_h.py's and jamba.py's attention has none)."""
_UNSCALED_SLIDING: Final = frozenset({"olmo3"})
"""Families whose sliding-window layers take the rotary without its scaling (olmo3.py:
"Rope scaling is only applied on full attention layers"): a second cache of
``max_position_embeddings`` rows whenever the full layers' rotary is scaled (another
``get_rope`` key, so another cache, even of the same length)."""

MROPE_POSITIONS_FACTOR: Final = 4
"""MRoPE caches four times the positions (mrope.py: ``max_position_embeddings * 4`` in
vLLM 0.26, ``* positions_factor`` with the default 4 in 0.34). vLLM 0.33 and 0.34 build
Qwen3-VL's and Qwen3.5's language models with a factor of 1 unless video pruning is on
(qwen3_vl.py ``mrope_positions_factor``): pass ``mrope_positions_factor=1`` for them."""

RotaryCache = tuple[int, int, int]
"""(positions, rotary_dim, bytes per element) of one cos/sin cache."""


def _number(value: object, default: float) -> float:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default
    )


def _scaling(cfg: HFConfig) -> Mapping[str, object]:
    """The rope scaling of the (full-attention) layers: ``rope_scaling`` or ``rope_parameters``."""
    for key in ("rope_scaling", "rope_parameters"):
        raw = cfg.raw(key)
        if isinstance(raw, Mapping):
            full = raw.get("full_attention")  # transformers v5: one entry per layer type
            return full if isinstance(full, Mapping) else raw
    return {}


def _positions(
    scaling: Mapping[str, object], max_position: int, top_original: int, mrope_factor: int
) -> int:
    kind = str(scaling.get("rope_type", scaling.get("type", "default")))
    factor = _number(scaling.get("factor"), 1.0)
    original = int(_number(scaling.get("original_max_position_embeddings"), float(top_original)))
    if kind == "linear":
        return int(max_position * factor)
    if kind in ("yarn", "deepseek_yarn"):
        return int(original * factor)
    if kind == "longrope":
        return original + max_position
    if "mrope_section" in scaling:
        return max_position * mrope_factor
    return max_position


def _rotary_dim(cfg: HFConfig, scaling: Mapping[str, object]) -> int:
    if cfg.has("kv_lora_rank"):
        return cfg.int_("qk_rope_head_dim", minimum=1)  # MLA: only the rope part rotates
    heads = cfg.int_("num_attention_heads", minimum=1)
    head_dim = cfg.int_("head_dim", cfg.int_("hidden_size", minimum=1) // heads, minimum=1)
    if cfg.str_("model_type", "") == "minimax_m2" and cfg.has("rotary_dim"):
        return cfg.int_("rotary_dim", minimum=1)  # minimax_m2.py: rotary_dim / head_dim
    factor = _number(cfg.raw("partial_rotary_factor"), 1.0)
    factor = _number(scaling.get("partial_rotary_factor"), factor)
    return int(head_dim * factor)


def rotary_caches(
    cfg: HFConfig, *, dtype_bytes: int, mrope_positions_factor: int = MROPE_POSITIONS_FACTOR
) -> tuple[RotaryCache, ...]:
    """The distinct cos/sin caches of the language model ``cfg`` (its ``text_config``)."""
    if cfg.str_("model_type", "") in _NO_ROTARY or cfg.bool_("use_alibi", False):
        return ()
    if not uses_vllm_rotary(cfg):
        return ()
    max_position = cfg.int_("max_position_embeddings", 0)
    if max_position <= 0:
        return ()
    family = cfg.str_("model_type", "")
    size = 4 if family in _FLOAT32_ROTARY else dtype_bytes
    scaling = _scaling(cfg)
    dim = _rotary_dim(cfg, scaling)
    # Phi-3 keeps original_max_position_embeddings beside rope_scaling (phi3.py passes it).
    top_original = cfg.int_("original_max_position_embeddings", max_position, minimum=1)
    rows = _positions(scaling, max_position, top_original, mrope_positions_factor)
    caches = [(rows, dim, size)]
    if cfg.has("index_topk") and cfg.has("kv_lora_rank"):
        # DeepSeek-V3.2's indexer has its own rotary (not neox-style: another key).
        caches.append((rows, dim, size))
    elif family in _TWO_ROTARIES:
        # The sliding layers' rotary: another base frequency, so another _ROPE_DICT key.
        caches.append((max_position, dim, size))
    elif family in _UNSCALED_SLIDING and scaling.get("rope_type", scaling.get("type")):
        kinds = cfg.str_list("layer_types") if cfg.has("layer_types") else []
        if "sliding_attention" in kinds:
            caches.append((max_position, dim, size))
    return tuple(caches)


def rotary_cache_bytes(
    cfg: HFConfig, *, dtype_bytes: int, mrope_positions_factor: int = MROPE_POSITIONS_FACTOR
) -> int:
    """Bytes of the rotary caches on each worker (replicated over TP, per pipeline stage)."""
    caches = rotary_caches(
        cfg, dtype_bytes=dtype_bytes, mrope_positions_factor=mrope_positions_factor
    )
    return sum(rows * dim * size for rows, dim, size in caches)


def _hugging_face_rotary(cfg: HFConfig) -> tuple[TensorInfo, ...]:
    """The buffers of a model vLLM 0.26 runs through its Transformers backend (OLMo-1 and
    -2): Hugging Face's rotary's ``inv_freq`` and ``original_inv_freq``, one float32 per
    pair of rotated dimensions each (``torch.arange(0, dim, 2)``). Its ``Attention``
    instances are kept in a plain dict (``attention_instances``), not as submodules, so
    their scales are not the model's buffers."""
    pairs = (_rotary_dim(cfg, _scaling(cfg)) + 1) // 2
    return tuple(
        TensorInfo(name=f"model.rotary_emb.{name}", dtype="F32", shape=(pairs,))
        for name in HF_ROTARY_BUFFERS
    )


def model_buffers(cfg: HFConfig) -> tuple[TensorInfo, ...]:
    """The scalar buffers of the language model ``cfg`` (its ``text_config``), as tensors."""
    if cfg.str_("model_type", "") == "whisper":  # decoder self- and cross-attention
        return tuple(
            TensorInfo(name=f"model.decoder.layers.{i}.{a}.attn.{scale}", dtype="F32", shape=())
            for i in range(cfg.int_("decoder_layers", minimum=1))
            for a in ("self_attn", "encoder_attn")
            for scale in _ATTENTION_SCALES
        )
    if not uses_vllm_rotary(cfg):
        return _hugging_face_rotary(cfg)
    layers = cfg.int_("num_hidden_layers", minimum=1)
    out = [
        TensorInfo(name=f"model.layers.{index}.self_attn.attn.{scale}", dtype="F32", shape=())
        for index, kind in enumerate(layer_kinds(cfg, layers))
        if kind == "attention"
        for scale in _ATTENTION_SCALES
    ]
    if cfg.str_("model_type", "") == "kimi_linear":  # vLLM 0.34 kimi_k3: one more scale
        out += [
            TensorInfo(name=f"model.layers.{index}.self_attn._one_scale", dtype="F32", shape=(1,))
            for index, kind in enumerate(layer_kinds(cfg, layers))
            if kind == "attention"
        ]
    if cfg.str_("model_type", "").startswith("gemma"):
        out.append(TensorInfo(name="model.normalizer", dtype="BF16", shape=()))
    if cfg.str_("model_type", "") == "falcon_h1":
        width = falcon_h1_projected(cfg)
        out += [
            TensorInfo(name=f"model.layers.{i}.mamba.mup_vector", dtype="BF16", shape=(1, width))
            for i in range(layers)
        ]
    return tuple(out)
