"""Routed experts of MXFP4 checkpoints as vLLM stores them on a GPU (gpt-oss).

vLLM quantizes only the routed experts of an MXFP4 checkpoint: its linear
layers fall back to ``UnquantizedLinearMethod`` (``Mxfp4Config.get_quant_method``
in vllm/model_executor/layers/quantization/mxfp4.py: "MXFP4 linear layer is
not implemented"), so attention, dense MLPs, embeddings and the LM head load
in the model dtype. Each MoE layer then holds, per local expert
(``Mxfp4MoEMethod.create_weights``), with ``I`` the intermediate size per
TP rank and ``H`` the hidden size, both rounded up for the kernel
(``mxfp4_round_up_hidden_size_and_intermediate_size`` in
vllm/model_executor/layers/fused_moe/oracle/mxfp4.py):

- ``w13_weight``: ``2I x H/2`` bytes (two 4-bit values a byte),
  ``w13_weight_scale``: ``2I x H/32`` (one E8M0 byte per 32 values);
- ``w2_weight``: ``H x I/2``, ``w2_weight_scale``: ``H x I/32``;
- with biases (gpt-oss: ``has_bias=True`` in gpt_oss.py) ``w13_bias``
  (``2I``) and ``w2_bias`` (``H``) in bfloat16.

The rounding depends on the kernel vLLM picks. On Hopper (and Ampere/Ada)
without FlashInfer's TRT-LLM kernels gpt-oss runs on Marlin, which rounds
``I`` up to 128 and ``H`` up to 256 (``Mxfp4MoeBackend.MARLIN``); the Blackwell
TRT-LLM kernels round both up to 256 in vLLM 0.26 (``TRTLLM_BACKENDS``).
kvpure takes the Marlin rounding: on the two public H100 logs (vLLM 0.19,
llm-d-planner) it is 0.04 and 0.07 GiB over the logged weights, where the
unrounded sizes (OpenAI's Triton kernels: ``I`` to 64 only) are 0.8 GiB under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.memory_profile.checkpoint_tensors import is_moe_layer, num_experts
from kvpure.memory_profile.sharding import Parallelism
from kvpure.models.config import HFConfig
from kvpure.models.derive import pipeline_layer_ranges

__all__ = [
    "MARLIN_ROUNDING",
    "MXFP4_BLOCK",
    "MoeRounding",
    "mxfp4_expert_bytes_per_rank",
    "mxfp4_experts_per_worker",
]

MXFP4_BLOCK: Final = 32
"""Values per E8M0 scale (``OCP_MX_BLOCK_SIZE``)."""


@dataclass(frozen=True, slots=True)
class MoeRounding:
    """Multiples the kernel rounds the hidden and per-rank intermediate sizes up to."""

    hidden: int
    intermediate: int


MARLIN_ROUNDING: Final = MoeRounding(hidden=256, intermediate=128)
"""``Mxfp4MoeBackend.MARLIN`` on CUDA (``mxfp4_round_up_hidden_size_and_intermediate_size``)."""


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def mxfp4_expert_bytes_per_rank(
    cfg: HFConfig,
    *,
    num_experts: int,
    local_experts: int,
    tp: int,
    has_bias: bool,
    rounding: MoeRounding = MARLIN_ROUNDING,
) -> int:
    """Bytes of one MoE layer's routed experts on one rank (``local_experts`` of them).

    Without expert parallelism every rank holds all ``num_experts`` with the
    intermediate size split over ``tp``; with it (``local_experts < num_experts``)
    each rank holds whole experts.
    """
    hidden = _round_up(cfg.int_("hidden_size", minimum=1), rounding.hidden)
    key = "moe_intermediate_size" if cfg.has("moe_intermediate_size") else "intermediate_size"
    inter = cfg.int_(key, minimum=1)
    split = tp if local_experts == num_experts else 1
    inter = _round_up(-(-inter // split), rounding.intermediate)
    w13 = 2 * inter * hidden // 2 + 2 * inter * (hidden // MXFP4_BLOCK)
    w2 = hidden * inter // 2 + hidden * (inter // MXFP4_BLOCK)
    bias = (2 * inter + hidden) * 2 if has_bias else 0
    return local_experts * (w13 + w2 + bias)


def mxfp4_experts_per_worker(cfg: HFConfig, parallel: Parallelism) -> tuple[int, ...]:
    """Bytes of the MXFP4 routed experts on each worker (rank order, pipeline-major).

    Layers go to pipeline stages by ``get_pp_indices``; with expert parallelism EP
    rank ``r`` holds ``E // ep`` experts, one more when ``r < E % ep``
    (``determine_expert_map``).
    """
    experts = num_experts(cfg)
    has_bias = cfg.str_("model_type", "") == "gpt_oss"
    ranges = pipeline_layer_ranges(cfg.int_("num_hidden_layers", minimum=1), parallel.pp)
    totals: list[int] = []
    for start, end in ranges:
        moe_layers = sum(is_moe_layer(cfg, i) for i in range(start, end))
        for rank in range(parallel.tp):
            local = experts
            if parallel.ep > 1:
                base, extra = divmod(experts, parallel.ep)
                local = base + (1 if rank < extra else 0)
            per_layer = mxfp4_expert_bytes_per_rank(
                cfg, num_experts=experts, local_experts=local, tp=parallel.tp, has_bias=has_bias
            )
            totals.append(moe_layers * per_layer)
    return tuple(totals)
