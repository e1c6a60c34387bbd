"""Per-worker weight bytes: checkpoint tensors split as vLLM 0.26's parallel layers split them.

Each tensor is classified by its Hugging Face name (vLLM's model files map
the same names onto their layers):

- **column parallel** (``q_proj``, ``gate_proj``, ``up_proj``, ``w1``/``w3``,
  ``qkv_proj``, ``in_proj``, ``q_b_proj``, ``kv_b_proj`` ...): the output
  dimension splits over the TP ranks (``ColumnParallelLinear`` in
  vllm/model_executor/layers/linear.py); ``k_proj``/``v_proj`` split by KV
  head, and when TP is at least the KV heads every rank holds one whole head
  (``QKVParallelLinear.__init__``: ``num_kv_heads = 1``,
  ``num_kv_head_replicas = tp // total_num_kv_heads``);
- **row parallel** (``o_proj``, ``down_proj``, ``w2``, ``out_proj`` ...): the
  input dimension splits; the bias is kept whole (``RowParallelLinear``);
- **vocabulary** (``embed_tokens``, ``lm_head``): rows padded to a multiple
  of 64 (``pad_vocab_size``, ``DEFAULT_VOCAB_PADDING_SIZE`` in
  vllm/model_executor/layers/vocab_parallel_embedding.py), then split evenly
  over TP (``VocabParallelEmbedding.__init__``); with tied embeddings the LM
  head is the embedding, except on the last pipeline stage of a PP>1 model,
  which holds its own copy;
- **experts** (``experts.<i>.``): without expert parallelism split over TP
  like the dense MLP; with it whole experts go to the EP ranks, ``E // ep``
  each and one more to the first ``E % ep`` ranks (``determine_expert_map``
  in vllm/model_executor/layers/fused_moe/expert_map_manager.py);
- everything else (norms, routers, small projections) is **replicated**.

Decoder layers go to pipeline stages by vLLM's ``get_pp_indices``
(:func:`kvpure.models.derive.pipeline_layer_ranges`); the embedding and any
vision or audio encoder live on the first stage, the final norm and LM head on
the last. Layers numbered past ``num_hidden_layers`` (DeepSeek-V3's
multi-token-prediction layer) are not loaded, as vLLM skips them. Packed quantized
tensors (GPTQ/AWQ ``qweight``, ``qzeros``, ``scales``) keep the output
dimension second and split accordingly. Floating-point weights are counted in
the served dtype (a float32 checkpoint served in bfloat16 takes 2 bytes per
element); scales and integer tensors keep their stored size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int
from kvpure.memory_profile.safetensors_header import TensorInfo
from kvpure.models.derive import pipeline_layer_ranges

__all__ = [
    "Parallelism",
    "ShardKind",
    "ShardingLayout",
    "VOCAB_PADDING",
    "classify",
    "pad_vocab_size",
    "worker_weight_bytes",
]

VOCAB_PADDING: Final = 64
"""vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``."""

_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
_COLUMN: Final = frozenset(
    {
        "q_proj",
        "qkv_proj",
        "query_key_value",
        "gate_proj",
        "up_proj",
        "gate_up_proj",
        "w1",
        "w3",
        "c_fc",
        "fc1",
        "in_proj",
        "in_proj_qkvz",  # gated delta nets (Qwen3-Next; Qwen3.5 stores four parts)
        "in_proj_ba",
        "in_proj_qkv",
        "in_proj_z",
        "in_proj_b",
        "in_proj_a",
        "f_b_proj",  # Kimi-Linear's KDA (its q/k/v_proj are the attention names)
        "g_b_proj",
        "b_proj",
        "q_conv1d",
        "k_conv1d",
        "v_conv1d",
        "q_b_proj",
        "kv_b_proj",
        "kv_proj",
        "dense_h_to_4h",
        "c_attn",
    }
)
_KV: Final = frozenset({"k_proj", "v_proj"})
_ROW: Final = frozenset(
    {"o_proj", "down_proj", "w2", "dense", "out_proj", "c_proj", "fc2", "dense_4h_to_h"}
)
_VOCAB: Final = frozenset({"embed_tokens", "lm_head", "wte", "word_embeddings", "embed_out"})
_ENCODERS: Final = frozenset(
    {
        "vision_tower",
        "vision_model",
        "visual",
        "multi_modal_projector",
        "mm_projector",
        "vision_encoder",
        "audio_tower",
        "vision_language_adapter",
        "patch_merger",
    }
)
_FINAL_NORMS: Final = frozenset({"norm", "ln_f", "final_layernorm", "final_layer_norm"})
_PACKED_OUT_SECOND: Final = frozenset({"qweight", "qzeros", "scales"})
_FLOAT_DTYPES: Final = frozenset({"F16", "BF16", "F32"})


def pad_vocab_size(vocab_size: int, pad_to: int = VOCAB_PADDING) -> int:
    """``vocab_size`` rounded up to a multiple of ``pad_to`` (vLLM's ``pad_vocab_size``)."""
    return -(-vocab_size // pad_to) * pad_to


class ShardKind(Enum):
    """How one tensor is split over tensor-parallel ranks."""

    COLUMN = "column"
    KV_HEADS = "kv_heads"
    ROW = "row"
    VOCAB = "vocab"
    REPLICATED = "replicated"


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingLayout:
    """The model facts sharding needs (from config.json)."""

    num_layers: int
    num_kv_heads: int
    tie_word_embeddings: bool
    float32_params: frozenset[str] = frozenset()
    """``module.param`` or bare param names (``gate.e_score_correction_bias``, ``A_log``)
    vLLM allocates in float32
    whatever the model dtype: counted at 4 bytes an element, not in the served dtype."""

    plain_modules: frozenset[str] = frozenset()
    """Modules vLLM builds as plain torch layers (Whisper's ``embed_tokens``): whole on
    every rank, the vocabulary not padded."""

    def __post_init__(self) -> None:
        check_int("num_layers", self.num_layers, minimum=1)
        check_int("num_kv_heads", self.num_kv_heads, minimum=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """Tensor, pipeline and expert parallel sizes (``ep = 1``: no expert parallelism).

    With expert parallelism vLLM's EP group spans TP x DP ranks; the workers
    listed here are those of data-parallel rank 0, so worker ``tp_rank`` is
    EP rank ``tp_rank`` and ``ep`` must be a multiple of ``tp``.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        check_int("tensor_parallel_size", self.tp, minimum=1)
        check_int("pipeline_parallel_size", self.pp, minimum=1)
        check_int("expert_parallel_size", self.ep, minimum=1)
        if self.ep > 1 and self.ep % self.tp:
            raise InvalidFieldError(
                field="expert_parallel_size",
                value=self.ep,
                reason=f"must be a multiple of tensor_parallel_size ({self.tp}): TP x DP ranks",
            )

    @property
    def num_workers(self) -> int:
        """GPUs of one data-parallel replica."""
        return self.tp * self.pp


def _module(name: str) -> tuple[str, str]:
    parts = name.split(".")
    if len(parts) < 2:
        return name, ""
    return parts[-2], parts[-1]


def classify(name: str) -> ShardKind:
    """How vLLM splits the tensor ``name`` over tensor-parallel ranks."""
    module, param = _module(name)
    if module in _VOCAB:
        return ShardKind.VOCAB
    if module in _KV:
        return ShardKind.KV_HEADS
    if module in _COLUMN:
        return ShardKind.COLUMN
    if module in _ROW:
        return ShardKind.REPLICATED if param == "bias" else ShardKind.ROW
    return ShardKind.REPLICATED


def _split(info: TensorInfo, dim: int, local: int, total: int) -> int:
    """Bytes of ``local`` of ``total`` equal parts along ``dim`` (the whole when 0-d)."""
    if not info.shape:
        return info.nbytes
    dim = min(dim, len(info.shape) - 1)
    size = info.shape[dim]
    if size % total:
        raise InvalidFieldError(
            field=f"tensor {info.name}",
            value=list(info.shape),
            reason=f"dimension {dim} ({size}) does not divide into {total} parts, "
            "so vLLM cannot shard it; choose a tensor_parallel_size that divides it",
        )
    return info.nbytes // total * local


def _tp_bytes(info: TensorInfo, kind: ShardKind, tp: int, kv_heads: int) -> int:
    """Bytes of ``info`` on one TP rank (all ranks hold the same amount)."""
    _, param = _module(info.name)
    out_dim, in_dim = (1, 0) if param in _PACKED_OUT_SECOND else (0, 1)
    per_channel = param.endswith("scale") and len(info.shape) >= 1 and info.shape[-1] == 1
    if kind is ShardKind.VOCAB and info.shape:
        rows = pad_vocab_size(info.shape[0])
        if rows % tp:
            raise InvalidFieldError(
                field=f"tensor {info.name}",
                value=rows,
                reason=f"the padded vocabulary ({rows} rows) does not divide over {tp} ranks",
            )
        return rows // tp * (info.nbytes // info.shape[0] if info.shape[0] else 0)
    if kind is ShardKind.REPLICATED or tp == 1 or not info.shape:
        return info.nbytes
    if kind is ShardKind.COLUMN:
        return _split(info, out_dim, 1, tp)
    if kind is ShardKind.KV_HEADS:
        if tp >= kv_heads:
            return _split(info, out_dim, 1, kv_heads)
        return _split(info, out_dim, 1, tp)
    if per_channel or (len(info.shape) < 2 and param != "g_idx"):
        return info.nbytes
    if info.shape[min(in_dim, len(info.shape) - 1)] == 1:
        return info.nbytes  # one quantization group: vLLM keeps it whole on every rank
    return _split(info, in_dim, 1, tp)


def _served(info: TensorInfo, dtype_bytes: int | None, float32: frozenset[str]) -> TensorInfo:
    module, param = _module(info.name)
    if float32 and (param in float32 or f"{module}.{param}" in float32):
        return TensorInfo(name=info.name, dtype="F32", shape=info.shape)
    if dtype_bytes is None or info.dtype not in _FLOAT_DTYPES or "scale" in param:
        return info
    dtype = {2: "BF16", 4: "F32", 1: "U8"}.get(dtype_bytes, info.dtype)
    return TensorInfo(name=info.name, dtype=dtype, shape=info.shape)


def _stages_of(name: str, layout: ShardingLayout, pp: int) -> tuple[int, ...]:
    """The pipeline stages holding ``name`` (none: a layer vLLM does not load)."""
    if _ENCODERS.intersection(name.split(".")):
        return (0,)  # vision/audio encoders and projectors run before the first decoder layer
    match = _LAYER.search(name)
    if match is not None:
        layer = int(match.group(1))
        for stage, (start, end) in enumerate(pipeline_layer_ranges(layout.num_layers, pp)):
            if start <= layer < end:
                return (stage,)
        # Layers past num_hidden_layers are multi-token-prediction heads (DeepSeek-V3,
        # GLM): vLLM skips them unless they serve as the speculative draft model.
        return ()
    module, _ = _module(name)
    if module in ("lm_head", "embed_out"):
        return (pp - 1,)
    if module in _VOCAB:
        return (0, pp - 1) if layout.tie_word_embeddings and pp > 1 else (0,)
    if module in _FINAL_NORMS or module == "rotary_emb":
        # The Transformers backend (OLMo-1, -2) keeps the modules after the decoder
        # layers, the norm and Hugging Face's rotary, on the last stage only (base.py).
        return (pp - 1,)
    return (0,)


def _expert_owner(expert: int, num_experts: int, ep: int) -> int:
    base, extra = divmod(num_experts, ep)
    cut = extra * (base + 1)
    return expert // (base + 1) if expert < cut else extra + (expert - cut) // base


def worker_weight_bytes(
    tensors: tuple[TensorInfo, ...],
    layout: ShardingLayout,
    parallel: Parallelism,
    *,
    served_dtype_bytes: int | None = None,
) -> tuple[int, ...]:
    """Weight bytes on each worker, in rank order (pipeline-major, as vLLM numbers ranks).

    ``served_dtype_bytes`` converts floating-point weights to the model dtype
    vLLM serves in (None keeps each tensor's stored dtype).
    """
    tp, pp, ep = parallel.tp, parallel.pp, parallel.ep
    if pp > layout.num_layers:
        pipeline_layer_ranges(layout.num_layers, pp)
    experts = [int(m.group(1)) for t in tensors if (m := _EXPERT.search(t.name))]
    num_experts = max(experts) + 1 if experts else 0
    totals = [0] * (tp * pp)
    for raw in tensors:
        module, _ = _module(raw.name)
        if layout.tie_word_embeddings and module in ("lm_head", "embed_out"):
            continue  # vLLM skips a tied checkpoint's lm_head and reuses the embedding
        info = _served(raw, served_dtype_bytes, layout.float32_params)
        kind = ShardKind.REPLICATED if module in layout.plain_modules else classify(info.name)
        expert = _EXPERT.search(info.name)
        for stage in _stages_of(info.name, layout, pp):
            if expert is not None and ep > 1:
                owner = _expert_owner(int(expert.group(1)), num_experts, ep)
                if owner < tp:
                    totals[stage * tp + owner] += info.nbytes
                continue
            share = _tp_bytes(info, kind, tp, layout.num_kv_heads)
            for rank in range(tp):
                totals[stage * tp + rank] += share
    return tuple(totals)
