"""Per-worker weight bytes follow vLLM 0.26's sharding rules (expected values worked by hand).

Rules, from vLLM 0.26 source:
- column/row parallel splits: vllm/model_executor/layers/linear.py
  (ColumnParallelLinear, RowParallelLinear: the row-parallel bias is not split);
- KV heads replicated when TP >= KV heads: QKVParallelLinear.__init__
  (num_kv_heads = 1, num_kv_head_replicas = tp // total_num_kv_heads);
- vocabulary padded to a multiple of 64 and split evenly:
  vllm/model_executor/layers/vocab_parallel_embedding.py (pad_vocab_size,
  VocabParallelEmbedding.__init__);
- experts under EP: determine_expert_map in
  vllm/model_executor/layers/fused_moe/expert_map_manager.py (E // ep each,
  one more to the first E % ep ranks);
- pipeline stages: get_pp_indices in vllm/distributed/utils.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.safetensors_header import TensorInfo, read_model_folder
from kvpure.memory_profile.sharding import (
    Parallelism,
    ShardingLayout,
    pad_vocab_size,
    worker_weight_bytes,
)
from tests.safetensors_files import write_index

# A tiny Llama: hidden 8, 4 heads of 2, 2 KV heads, MLP 16, vocab 100 (padded to 128), 4 layers.
Spec = dict[str, tuple[str, tuple[int, ...]]]


def _layer(i: int) -> Spec:
    p = f"model.layers.{i}"
    return {
        f"{p}.self_attn.q_proj.weight": ("BF16", (8, 8)),
        f"{p}.self_attn.q_proj.bias": ("BF16", (8,)),
        f"{p}.self_attn.k_proj.weight": ("BF16", (4, 8)),
        f"{p}.self_attn.v_proj.weight": ("BF16", (4, 8)),
        f"{p}.self_attn.o_proj.weight": ("BF16", (8, 8)),
        f"{p}.self_attn.o_proj.bias": ("BF16", (8,)),
        f"{p}.mlp.gate_proj.weight": ("BF16", (16, 8)),
        f"{p}.mlp.up_proj.weight": ("BF16", (16, 8)),
        f"{p}.mlp.down_proj.weight": ("BF16", (8, 16)),
        f"{p}.input_layernorm.weight": ("BF16", (8,)),
        f"{p}.post_attention_layernorm.weight": ("BF16", (8,)),
    }


def _model(tmp_path: Path, *, lm_head: bool = True) -> tuple[TensorInfo, ...]:
    first: Spec = {"model.embed_tokens.weight": ("BF16", (100, 8))}
    first.update(_layer(0))
    first.update(_layer(1))
    second: Spec = {**_layer(2), **_layer(3), "model.norm.weight": ("BF16", (8,))}
    if lm_head:
        second["lm_head.weight"] = ("BF16", (100, 8))
    write_index(tmp_path, {"a.safetensors": first, "b.safetensors": second})
    return read_model_folder(tmp_path)


UNTIED = ShardingLayout(num_layers=4, num_kv_heads=2, tie_word_embeddings=False)
TIED = ShardingLayout(num_layers=4, num_kv_heads=2, tie_word_embeddings=True)
VOCAB_BYTES = 128 * 8 * 2  # 100 rows padded to 128, hidden 8, bfloat16
# One layer's bytes per TP rank, worked term by term:
# q 128/tp, q bias 16/tp, k and v 64/tp each (32 each, one whole head, once tp >= 2 KV heads),
# o 128/tp, o bias 16 (row parallel: kept whole), gate/up/down 256/tp each, two norms 32.
LAYER = {
    1: 128 + 16 + 64 + 64 + 128 + 16 + 768 + 32,
    2: 64 + 8 + 32 + 32 + 64 + 16 + 384 + 32,
    4: 32 + 4 + 32 + 32 + 32 + 16 + 192 + 32,
}


def test_padding_rounds_up_to_64() -> None:
    assert [pad_vocab_size(v) for v in (1, 64, 65, 100, 128256, 151936)] == [
        64,
        64,
        128,
        128,
        128256,
        151936,
    ]


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tensor_parallel_split_with_kv_replication(tmp_path: Path, tp: int) -> None:
    tensors = _model(tmp_path)
    expected = 4 * LAYER[tp] + 2 * VOCAB_BYTES // tp + 16
    assert worker_weight_bytes(tensors, UNTIED, Parallelism(tp=tp)) == (expected,) * tp


def test_pipeline_stages_follow_get_pp_indices(tmp_path: Path) -> None:
    tensors = _model(tmp_path)
    # 4 layers on 2 stages: 2 + 2; the embedding on the first, norm and LM head on the last.
    assert worker_weight_bytes(tensors, UNTIED, Parallelism(pp=2)) == (
        2 * LAYER[1] + VOCAB_BYTES,
        2 * LAYER[1] + VOCAB_BYTES + 16,
    )
    # 4 layers on 3 stages: 1, 2, 1 (the remainder goes to the second-to-last stage).
    assert worker_weight_bytes(tensors, UNTIED, Parallelism(pp=3)) == (
        LAYER[1] + VOCAB_BYTES,
        2 * LAYER[1],
        LAYER[1] + VOCAB_BYTES + 16,
    )
    # TP x PP: ranks are pipeline-major.
    assert worker_weight_bytes(tensors, UNTIED, Parallelism(tp=2, pp=2)) == (
        (2 * LAYER[2] + VOCAB_BYTES // 2,) * 2 + (2 * LAYER[2] + VOCAB_BYTES // 2 + 16,) * 2
    )


@pytest.mark.parametrize("lm_head", [True, False])
def test_tied_embeddings_count_once_except_on_a_separate_last_stage(
    tmp_path: Path, lm_head: bool
) -> None:
    tensors = _model(tmp_path, lm_head=lm_head)
    assert worker_weight_bytes(tensors, TIED, Parallelism()) == (4 * LAYER[1] + VOCAB_BYTES + 16,)
    assert worker_weight_bytes(tensors, TIED, Parallelism(pp=2)) == (
        2 * LAYER[1] + VOCAB_BYTES,
        2 * LAYER[1] + VOCAB_BYTES + 16,
    )


def _moe(experts: int) -> tuple[TensorInfo, ...]:
    out = [TensorInfo(name="model.layers.0.mlp.gate.weight", dtype="BF16", shape=(experts, 8))]
    for e in range(experts):
        p = f"model.layers.0.mlp.experts.{e}"
        out += [
            TensorInfo(name=f"{p}.gate_proj.weight", dtype="BF16", shape=(16, 8)),
            TensorInfo(name=f"{p}.up_proj.weight", dtype="BF16", shape=(16, 8)),
            TensorInfo(name=f"{p}.down_proj.weight", dtype="BF16", shape=(8, 16)),
        ]
    return tuple(out)


def test_experts_split_by_tp_or_whole_by_expert_parallelism() -> None:
    layout = ShardingLayout(num_layers=1, num_kv_heads=1, tie_word_embeddings=False)
    router = 5 * 8 * 2
    expert = 3 * 16 * 8 * 2
    # No EP: every expert split over both TP ranks.
    assert (
        worker_weight_bytes(_moe(5), layout, Parallelism(tp=2)) == (router + 5 * expert // 2,) * 2
    )
    # EP over 2 ranks: 5 experts -> 3 on rank 0, 2 on rank 1, whole.
    assert worker_weight_bytes(_moe(5), layout, Parallelism(tp=2, ep=2)) == (
        router + 3 * expert,
        router + 2 * expert,
    )
    # EP over 4 ranks (DP 2 x TP 2): DP rank 0 holds EP ranks 0 and 1 -> 2 and 1 experts.
    assert worker_weight_bytes(_moe(5), layout, Parallelism(tp=2, ep=4)) == (
        router + 2 * expert,
        router + expert,
    )


def test_packed_gptq_tensors_split_on_their_output_dimension_second() -> None:
    layout = ShardingLayout(num_layers=1, num_kv_heads=1, tie_word_embeddings=False)
    p = "model.layers.0"
    tensors = (
        TensorInfo(name=f"{p}.mlp.up_proj.qweight", dtype="I32", shape=(8, 64)),  # in 64 / 8
        TensorInfo(name=f"{p}.mlp.up_proj.scales", dtype="F16", shape=(1, 64)),
        TensorInfo(name=f"{p}.mlp.down_proj.qweight", dtype="I32", shape=(8, 64)),
        TensorInfo(name=f"{p}.mlp.down_proj.scales", dtype="F16", shape=(1, 64)),
    )
    # column: out (dim 1) halves; row: packed input (dim 0) halves, one group stays whole.
    assert (
        worker_weight_bytes(tensors, layout, Parallelism(tp=2))
        == ((8 * 32 * 4) + (32 * 2) + (4 * 64 * 4) + (64 * 2),) * 2
    )


def test_float32_checkpoints_count_in_the_served_dtype_but_scales_do_not() -> None:
    layout = ShardingLayout(num_layers=1, num_kv_heads=1, tie_word_embeddings=False)
    tensors = (
        TensorInfo(name="model.layers.0.mlp.up_proj.weight", dtype="F32", shape=(4, 4)),
        TensorInfo(name="model.layers.0.mlp.up_proj.weight_scale", dtype="F32", shape=()),
    )
    assert worker_weight_bytes(tensors, layout, Parallelism(), served_dtype_bytes=2) == (32 + 4,)
    assert worker_weight_bytes(tensors, layout, Parallelism()) == (64 + 4,)


def test_unshardable_tensors_and_bad_layouts_are_refused(tmp_path: Path) -> None:
    tensors = _model(tmp_path)
    with pytest.raises(InvalidFieldError, match="does not divide"):
        worker_weight_bytes(tensors, UNTIED, Parallelism(tp=3))
    with pytest.raises(InvalidFieldError, match="pipeline_parallel_size"):
        worker_weight_bytes(tensors, UNTIED, Parallelism(pp=5))
    with pytest.raises(InvalidFieldError, match="multiple of tensor_parallel_size"):
        Parallelism(tp=2, ep=3)


def test_layers_past_the_config_are_not_loaded_and_encoders_sit_on_the_first_stage(
    tmp_path: Path,
) -> None:
    tensors = _model(tmp_path)
    three = ShardingLayout(num_layers=3, num_kv_heads=2, tie_word_embeddings=False)
    # Layer 3 is past num_hidden_layers = 3 (an MTP layer): vLLM does not load it.
    assert worker_weight_bytes(tensors, three, Parallelism()) == (
        3 * LAYER[1] + 2 * VOCAB_BYTES + 16,
    )
    vision = TensorInfo(
        name="vision_tower.vision_model.encoder.layers.3.mlp.fc1.weight", dtype="BF16", shape=(4, 8)
    )
    # A vision layer numbered 3 stays on the first stage, split like a column-parallel layer.
    assert worker_weight_bytes((*tensors, vision), UNTIED, Parallelism(pp=2)) == (
        2 * LAYER[1] + VOCAB_BYTES + 64,
        2 * LAYER[1] + VOCAB_BYTES + 16,
    )
