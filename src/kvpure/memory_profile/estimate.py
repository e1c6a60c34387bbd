"""The terms of vLLM's memory profile that no file states, estimated with a fitted error.

vLLM sizes the KV cache at start-up as (``Worker.determine_available_memory``
in vllm/v1/worker/gpu_worker.py and ``memory_profiling`` in
vllm/utils/mem_utils.py)::

    kv = total x gpu_memory_utilization - weights - activation_peak
         - non_torch_increase - cuda_graph_estimate (when subtracted)

The weights can be exact (safetensors headers); the rest is measured on the
GPU. Here they are modelled from what drives them, with coefficients fitted
on public start-up logs (:mod:`kvpure.memory_profile.profile_logs`):

- **activation peak** (``torch peak memory increase``): the larger of the
  sampler's peak, ``a + b x (max_num_seqs x vocab x 4 B)`` (the dummy sampler
  run over float32 logits, last pipeline stage only; ``a`` alone elsewhere),
  and the forward pass's, ``c0 + c x (max_num_batched_tokens x 2 x
  intermediate_size / TP x 2 B)`` (the fused gate/up output, and ``c0`` for
  what the pass holds beside it; both double in float32; a MoE model's dense
  layers or shared experts set the width, none when every layer routes its MLP:
  ``ModelShape.dense_mlp_width``); MoE models
  add ``m x (max_num_batched_tokens x top_k x (3 x moe_intermediate / TP +
  hidden) x 2 B)``, the fused-MoE kernel's intermediate caches
  (``fused_experts`` in vllm/model_executor/layers/fused_moe). vLLM 0.17
  changed the sampler's peak (Qwen3-14B: 5.64 GiB in 0.15-0.16, 2.23 in
  0.17-0.18), so releases before 0.17 use their own ``b``;
- **non-torch memory**: a constant per parallel class (one GPU; TP > 1, which
  adds NCCL and custom all-reduce buffers; PP > 1 without TP);
- **CUDA graphs**: vLLM estimates their memory by capturing graphs while
  profiling (0.18 on) and, from 0.20 on (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
  defaults to 1 in vLLM 0.20.0's envs.py), subtracts it from the KV cache;
  0.18-0.19 only log it. Modelled as the median logged estimate.

Each term carries an error band: the largest absolute residual on the logs it
was fitted on (rounded up to 0.01 GiB). :func:`kvpure.memory_profile.fit.fit_coefficients`
refits from records, so tests recompute the fit and its held-out error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvpure.memory_profile.profile_logs import GIB, Capability, ModelShape
from kvpure.memory_profile.releases import (
    MemoryProfileRules,
    Version,
    memory_profile_rules,
    parse_version,
)

__all__ = [
    "COEFFICIENTS",
    "Coefficients",
    "FITTED_VERSIONS",
    "Version",
    "activation_gib",
    "cuda_graph_gib",
    "stage_layers",
    "cuda_graph_subtracted",
    "ffn_gib",
    "logits_gib",
    "moe_workspace_gib",
    "HOPPER",
    "NCCL_PCIE_MULTI_BAND_GIB",
    "NCCL_UNLOGGED_BAND_GIB",
    "NCCL_WITHOUT_NVLS_GIB",
    "non_torch_band_gib",
    "non_torch_class",
    "non_torch_gib",
    "parse_version",
]

FITTED_VERSIONS: Final = (
    "0.10-0.34 (fitted on vLLM 0.10-0.19 H100 and A100 logs; docs/memory-profile.md gives "
    "the error per release and GPU)"
)


def cuda_graph_subtracted(version: Version) -> bool:
    """Whether this release subtracts the CUDA-graph estimate from the KV cache by default."""
    return memory_profile_rules(f"{version[0]}.{version[1]}").cuda_graph_subtracted


@dataclass(frozen=True, slots=True, kw_only=True)
class Coefficients:
    """Fitted constants (GiB unless stated) and each term's error band."""

    activation_base: float
    logits_factor: float
    logits_factor_before_0_17: float
    ffn_factor: float
    ffn_base: float = 0.0
    """GiB the forward pass holds beside its MLP output (residual, norms, attention)."""
    moe_factor: float
    activation_band: float
    non_torch_single: float
    non_torch_single_before_0_18: float
    non_torch_tensor_parallel: float
    non_torch_tensor_parallel_nccl_only: float
    non_torch_pipeline: float
    non_torch_band: float
    cuda_graph_per_layer: float
    """GiB of ``Estimated CUDA graph memory`` per decoder layer (the layers a worker runs)."""
    cuda_graph_band: float


def logits_gib(max_num_seqs: int, vocab_size: int) -> float:
    """GiB of the sampler's float32 logits: ``max_num_seqs x vocab x 4`` bytes."""
    return max_num_seqs * vocab_size * 4 / GIB


def ffn_gib(max_num_batched_tokens: int, intermediate_size: int, tp: int) -> float:
    """GiB of the fused gate/up output of one forward pass, per TP rank, in 16 bits."""
    return max_num_batched_tokens * 2 * intermediate_size / tp * 2 / GIB


def moe_workspace_gib(max_num_batched_tokens: int, shape: ModelShape, tp: int) -> float:
    """GiB of the fused-MoE caches for one forward pass (0 for dense models)."""
    if not shape.num_experts or not shape.num_experts_per_tok:
        return 0.0
    per_token = 3 * shape.moe_intermediate_size / tp + shape.hidden_size
    return max_num_batched_tokens * shape.num_experts_per_tok * per_token * 2 / GIB


def activation_gib(
    coef: Coefficients,
    shape: ModelShape,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tp: int,
    last_stage: bool,
    rules: MemoryProfileRules,
    dtype_bytes: int = 2,
    quantization: str = "none",
    flashinfer_sampler: bool = False,
    model_runner_v2: bool = False,
) -> float:
    """The estimated ``torch peak memory increase`` of vLLM's profiling run.

    ``dtype_bytes``: the served dtype's size; the forward pass's activations
    scale with it (float32 doubles them), the sampler's float32 logits do not.
    ``quantization``: the checkpoint's layout; MXFP4 experts run their own
    fused kernel, which keeps no bf16 fused-MoE caches (gpt-oss logs its
    sampler's peak alone: 7.38 GiB on vLLM 0.11, 2.87 at TP 2 on 0.19).
    ``flashinfer_sampler``: top-k/top-p ran in FlashInfer's kernel ("Using
    FlashInfer for top-p & top-k sampling." in the log), which keeps none of
    the PyTorch sort's float32 copies: the larger peak of releases before 0.17
    does not apply, the later sampler's factor does.
    ``model_runner_v2``: Model Runner V2's dummy sampler run keeps the logits in
    the model's dtype alone (vllm 0.27.0 ``v1/worker/gpu/sample/sampler.py``:
    no float32 copy unless a request needs logits processing, Gumbel sampling in
    a Triton kernel): its peak is the logits tensor, not V1's fitted copies.
    """
    large = rules.large_sampler_peak and not flashinfer_sampler
    factor = coef.logits_factor_before_0_17 if large else coef.logits_factor
    sampler = 0.0 if model_runner_v2 else coef.activation_base
    if last_stage:
        logits = logits_gib(max_num_seqs, shape.vocab_size)
        sampler += logits * dtype_bytes / 4 if model_runner_v2 else factor * logits
    width = dtype_bytes / 2
    ffn = ffn_gib(max_num_batched_tokens, shape.dense_mlp_width, tp)
    # c0 is what the forward pass holds beside the MLP output: per token, so it scales
    # with the batch (fitted at 8192 tokens, the H100 default of the bundled logs).
    tokens = max_num_batched_tokens / FIT_TOKENS
    forward = (coef.ffn_base * tokens + coef.ffn_factor * ffn) * width
    moe = 0.0
    if quantization != "mxfp4":
        moe = coef.moe_factor * moe_workspace_gib(max_num_batched_tokens, shape, tp) * width
    if not rules.moe_workspace_persists:
        # 0.10-0.13: the fused-MoE caches are per-call temporaries, freed before the
        # sampler runs (MemoryProfileRules.moe_workspace_persists).
        return max(sampler, forward + moe)
    return max(sampler, forward) + moe


def stage_layers(shape: ModelShape, pp: int) -> int:
    """Decoder layers on one pipeline stage (the larger share), at least one."""
    return max(1, -(-shape.num_hidden_layers // pp))


def cudagraph_count(max_num_seqs: int, max_num_batched_tokens: int | None = None) -> int:
    """The graphs vLLM's default ``FULL_AND_PIECEWISE`` mode captures (0.26 ``config/vllm.py``).

    Piecewise sizes ``[1, 2, 4] + range(8, 256, 8) + range(256, largest + 1, 16)`` up to
    ``largest = min(2 x max_num_seqs, 512, max_num_batched_tokens)``, plus
    ``max_num_batched_tokens`` itself when it is ``largest`` (lines 1836-1841), and full
    decode graphs for the sizes up to ``max_num_seqs`` (logged as "Profiling CUDA graph
    memory: PIECEWISE=7 (largest=32), FULL=5 (largest=16)" with 16 sequences).
    """
    largest = min(2 * max_num_seqs, 512, max_num_batched_tokens or 512)
    sizes = [n for n in (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)) if n <= largest]
    if largest == max_num_batched_tokens and largest not in sizes:
        sizes.append(largest)  # "ensure max_num_tokens is captured if within max capture size"
    return len(sizes) + len([n for n in sizes if n <= max_num_seqs])


REFERENCE_GRAPHS: Final = 102
"""``cudagraph_count(1024)``: the graphs of the bundled logs the per-layer size is fitted on."""


def cuda_graph_gib(
    coef: Coefficients,
    shape: ModelShape,
    *,
    pp: int,
    max_num_seqs: int = 1024,
    max_num_batched_tokens: int | None = None,
) -> float:
    """The estimated ``Estimated CUDA graph memory``: a fitted size per decoder layer.

    The graphs vLLM captures hold each layer's static inputs and outputs, so the
    logged estimate grows with the layers a worker runs (0.52 GiB for Gemma-2-2B's
    26 layers, 1.70-1.82 GiB for Llama-3.3-70B's 80), and with the graphs captured,
    which ``max_num_seqs`` bounds (:func:`cudagraph_count`; fitted at 1024 sequences).
    """
    graphs = cudagraph_count(max_num_seqs, max_num_batched_tokens) / REFERENCE_GRAPHS
    return coef.cuda_graph_per_layer * stage_layers(shape, pp) * graphs


HOPPER: Final = (9, 0)
"""The compute capability the bundled logs were taken on (H100 80GB); the default."""


def non_torch_class(tp: int, pp: int, rules: MemoryProfileRules, capability: Capability) -> str:
    """The logged class a worker's non-torch increase falls in.

    ``fused``: TP > 1 with FlashInfer's fused all-reduce workspace
    (:meth:`MemoryProfileRules.fuses_all_reduce`); ``nccl``: TP > 1 without it;
    ``pp``: pipeline parallelism alone; ``single`` / ``single_old``: one GPU
    from / before vLLM 0.18.
    """
    if tp > 1:
        return "fused" if rules.fuses_all_reduce(tp=tp, pp=pp, capability=capability) else "nccl"
    if pp > 1:
        return "pp"
    return "single" if rules.larger_single_non_torch else "single_old"


def non_torch_gib(
    coef: Coefficients,
    *,
    tp: int,
    pp: int,
    rules: MemoryProfileRules,
    capability: Capability = HOPPER,
) -> float:
    """The estimated ``non-torch forward increase memory`` of one worker.

    ``capability``: the GPU's compute capability (the fused all-reduce runs on
    9.0 and 10.x only).
    """
    key = non_torch_class(tp, pp, rules, capability)
    if key == "nccl" and capability != HOPPER and capability[0] != 10:
        return NCCL_WITHOUT_NVLS_GIB
    if key == "nccl" and tp >= NCCL_WIDE_TP:
        return NCCL_TP8_NVSWITCH_GIB
    return {
        "fused": coef.non_torch_tensor_parallel,
        "nccl": coef.non_torch_tensor_parallel_nccl_only,
        "pp": coef.non_torch_pipeline,
        "single": coef.non_torch_single,
        "single_old": coef.non_torch_single_before_0_18,
    }[key]


def non_torch_band_gib(
    coef: Coefficients,
    *,
    tp: int,
    pp: int = 1,
    rules: MemoryProfileRules,
    capability: Capability = HOPPER,
) -> float:
    """The non-torch term's band, wider for TP > 1 off the logged Hopper boards.

    NCCL's buffers are logged over H100 NVLink only; on PCIe boards and other
    interconnects they differ, by up to :data:`NCCL_UNLOGGED_BAND_GIB`, and by up to
    :data:`NCCL_PCIE_MULTI_BAND_GIB` with more than two GPUs on boards without NVLink.
    """
    if tp > 2 and capability in PCIE_ONLY_CAPABILITIES:
        return coef.non_torch_band + NCCL_PCIE_MULTI_BAND_GIB
    unlogged = tp > 1 and capability != HOPPER and capability[0] != 10
    wide = tp >= NCCL_WIDE_TP and non_torch_class(tp, pp, rules, capability) == "nccl"
    return coef.non_torch_band + (NCCL_UNLOGGED_BAND_GIB if unlogged or wide else 0.0)


NCCL_UNLOGGED_BAND_GIB: Final = 0.15
PCIE_ONLY_CAPABILITIES: Final = frozenset({(7, 5), (8, 6), (8, 9), (12, 0)})
"""Boards without an NVLink mesh: T4 (7.5), A10/A40/RTX 30 (8.6, a bridge joins two at
most), L4/L40S/RTX 40/RTX 6000 Ada (8.9), RTX 50/RTX PRO 6000 Blackwell (12.0)."""
NCCL_PCIE_MULTI_BAND_GIB: Final = 1.40
"""TP > 2 on :data:`PCIE_ONLY_CAPABILITIES`: vLLM turns its custom all-reduce off
("Custom allreduce is disabled because it's not supported on more than two PCIe-only
GPUs", vllm/distributed/device_communicators/custom_all_reduce.py, 0.26.0) and no
symmetric-memory all-reduce runs there (``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` lists 9.0 and
10.x only), so NCCL carries every all-reduce, with the buffers it sizes for the ranks
and the PCIe topology. One start-up logs it: Qwen3-235B-A22B-FP8 at TP 4 on four RTX PRO
6000 Blackwell cards with vLLM 0.27.1 (tests/data/memory_logs/
qwen3_235b_a22b_fp8_rtx_pro_6000_v0_27_1_tp4) holds 1.70 GiB of non-torch memory where
:data:`NCCL_WITHOUT_NVLS_GIB` gives 0.30. The figure stays 0.30 (nothing else is logged);
the band covers the 1.40 GiB gap, so that log no longer tests this band."""
FIT_TOKENS: Final = 8192
"""The batch (``max_num_batched_tokens``) at which ``ffn_base`` holds; it scales per token."""
NCCL_WITHOUT_NVLS_GIB: Final = 0.30
"""TP > 1 without the fused all-reduce off Hopper and Blackwell (A100, L40S, RTX):
NCCL's state without the NVLink SHARP (NVLS) buffers it sets up on Hopper's
NVSwitch. Set from two vLLM 0.10.1 A100 80GB TP 2 logs (requested - weights -
KV = 0.67 GiB against 0.55 at TP 1; tests/data/memory_logs/qwen2_7b_a100_v0_10_tp2_*),
against 0.55 GiB on H100 (vLLM 0.11 logs)."""
NCCL_WIDE_TP: Final = 8
NCCL_TP8_NVSWITCH_GIB: Final = 2.2
"""TP 8 without the fused all-reduce on Hopper or Blackwell (an 8-GPU NVSwitch board):
NCCL's state grows with the ranks it connects. Set from a vLLM 0.10.0 log of Qwen3-32B
at TP 8 on eight H100 80GB (requested - weights - KV - the sampler's peak = 2.20 GiB,
against 0.55 at TP 2 with vLLM 0.11; tests/data/memory_logs/qwen3_32b_h100_v0_10_0_tp8,
in the fit split); the same node's Qwen3-235B-A22B-FP8 TP 8 log, held out, comes out
0.01 GiB off with it. One node logged: the band is :data:`NCCL_UNLOGGED_BAND_GIB`
wider. TP 3 to 7 keep the TP 2 figure (no log)."""


COEFFICIENTS: Final = Coefficients(
    activation_base=0.1451,
    logits_factor=3.563,
    logits_factor_before_0_17=9.5383,
    ffn_factor=1.76,
    ffn_base=0.33,
    moe_factor=0.7767,
    activation_band=0.18,
    non_torch_single=0.25,
    non_torch_single_before_0_18=0.13,
    non_torch_tensor_parallel=2.1,
    non_torch_tensor_parallel_nccl_only=0.55,
    non_torch_pipeline=0.07,
    non_torch_band=0.22,
    cuda_graph_per_layer=0.02363,
    cuda_graph_band=0.22,
)
"""The shipped fit: :func:`kvpure.memory_profile.fit.fit_coefficients` over the ``fit``
logs of tests/data/memory_logs."""
