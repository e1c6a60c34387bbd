"""vLLM's start-up memory profile, one frozen rules record per range of V1 releases.

How vLLM sizes the KV cache changed across the V1 engine; each record names
the rule that changed and the vLLM file and function of each side (read in the
release's own wheel, ``pip download --no-deps vllm==X``):

- **0.10-0.13** (vllm 0.11.0 ``vllm/v1/worker/gpu_worker.py``,
  ``Worker.determine_available_memory``; ``vllm/utils/__init__.py``,
  ``memory_profiling``): ``kv = requested - (weights + torch peak increase +
  non-torch increase)``; no CUDA-graph term. The sampler's dummy run keeps
  several float32 copies of the logits (the larger sampler peak), and with
  TP > 1 the non-torch term is NCCL's state alone (0.54-0.55 GiB logged on
  H100 with vLLM 0.11). An unquantized MoE layer calls ``fused_experts``
  (0.12.0 and 0.13.0 ``fused_moe/unquantized_fused_moe_method.py``), whose
  caches are freed after each layer: they do not add to the sampler's peak.
- **0.14** (0.14.0 ``unquantized_fused_moe_method.py``: ``forward_cuda`` calls
  the modular kernel, ``self.kernel(...)``, whose workspaces the persistent
  ``WorkspaceManager`` of ``v1/worker/workspace.py`` holds): the MoE layers'
  workspace stays allocated and adds to the sampler's peak.
- **0.15-0.16** (0.15.0 and 0.16.0 ``vllm/config/vllm.py``: ``fuse_allreduce_rms``
  False at every optimization level): the same.
- **0.17** (vllm 0.17.0 ``vllm/config/vllm.py``, ``OPTIMIZATION_LEVEL_02``,
  ``enable_allreduce_rms_fusion``): the same formula; the sampler's peak
  shrinks (Qwen3-14B logs 5.64 GiB of activation in 0.16, 2.23 in 0.17), and
  with TP > 1 on compute capability exactly 9.0 or 10.0
  (``is_device_capability(90)`` / ``(100)``), PP 1 and DP 1, FlashInfer's fused
  all-reduce + RMSNorm is on by default: its workspace sits in the non-torch
  term (2.06-2.21 GiB logged on H100 with 0.19).
- **0.18** (0.18.0 ``config/vllm.py``: the 0.17 rule unchanged;
  ``gpu_worker.py``: the CUDA-graph estimate is made and logged but applied
  only with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``, default "0" in
  ``envs.py``): one GPU's non-torch increase grows from 0.13 to 0.25 GiB (the
  Qwen3-14B logs of 0.17 and 0.18).
- **0.19** (0.19.0 ``config/vllm.py``, ``enable_allreduce_rms_fusion``:
  ``is_device_capability_family(100)``): the fused all-reduce covers the
  whole 10.x family (B300/GB300's 10.3 too), still with PP 1 and DP 1.
- **0.20** (0.20.0 ``envs.py``: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
  defaults to "1"; ``gpu_worker.py``, ``determine_available_memory``:
  ``cudagraph_memory_estimate_applied`` subtracted, the estimate made where
  ``not current_platform.is_rocm()`` and ``cudagraph_mode != NONE``;
  ``config/cache.py``: ``gpu_memory_utilization`` defaults to 0.92):
  ``GPUModelRunner.profile_cudagraph_memory``'s estimate is subtracted too
  (the log line's "default since v0.21.0" notwithstanding), nothing on ROCm.
- **0.21** (vllm 0.21.0 ``config/vllm.py``, ``enable_allreduce_rms_fusion``: the
  PP 1 and DP 1 conditions dropped; ``gpu_worker.py``: the estimate made where
  ``current_platform.is_cuda()``, so ROCm still subtracts nothing; ``envs.py``:
  ``VLLM_USE_FLASHINFER_SAMPLER`` defaults to true): the fused all-reduce at
  any PP size.
- **0.22** (vllm 0.22.0 ``config/vllm.py``, ``_is_default_v2_model_runner_model``):
  GPU Model Runner V2 becomes the default for ``Qwen3ForCausalLM`` (dense,
  unquantized); its ``profile_cudagraph_memory`` returns 0
  (``vllm/v1/worker/gpu/model_runner.py``), so those models subtract no
  CUDA-graph estimate until 0.29.
- **0.23** (vllm 0.23.0 ``config/vllm.py``): ``enable_allreduce_rms_fusion``
  requires ``pipeline_parallel_size == 1`` again ("Gated off for PP > 1");
  Model Runner V2 also for ``LlamaForCausalLM`` and ``MistralForCausalLM``.
- **0.24** (vllm 0.24.0 ``config/vllm.py``): the PP condition dropped again;
  Model Runner V2 for the listed architectures, MoE and quantized ones included
  (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` adds DeepSeek-V2, Qwen2-MoE,
  Granite-MoE).
- **0.25** (vllm 0.25.0 ``config/vllm.py``): Model Runner V2 for every model
  that is not MoE (nor hybrid), and the listed MoE architectures.
- **0.26**: the same, with the estimate made on ROCm too (``is_cuda_alike()``).
- **0.27** (vllm 0.27.0 ``vllm/utils/mem_utils.py``, ``memory_profiling``): non-KV
  memory is ``total_consumed + transient_peak_headroom`` ("Total non KV cache
  memory"): the same sum measured another way, except that the model runner's
  buffers allocated after the first snapshot (about 0.1 GiB) now count; no
  public log of 0.27-0.33 is bundled, so their band is 0.1 GiB wider.
- **0.28** (vllm 0.28.0 ``config/vllm.py``): the V2 list adds DeepSeek-V4.
- **0.29-0.33** (vllm 0.29.0 ``config/vllm.py``, ``use_v2_model_runner``: V2 for
  every model unless a feature falls back; ``gpu/model_runner.py``:
  ``profile_cudagraph_memory`` estimates the graphs, as V1's does).
- **0.34** (vllm 0.34.0 ``vllm/v1/worker/extensible_kv_cache.py``,
  ``measure_kv_cache_bytes``; ``vllm/config/cache.py``,
  ``CacheConfig.resolved_gpu_memory_utilization``): the extensible KV cache,
  on by default on CUDA and ROCm, is sized after warm-up and CUDA-graph
  capture::

      available = min(requested - non_kv_used, headroom - margin)
                  - max(transient_peak, torch_reserve_growth)
      margin    = max(1 GiB (3 GiB on ROCm), 0.75 x transient_peak)

  and an unset ``gpu_memory_utilization`` resolves to 1.0.

Releases before 0.10 run the V0 engine (``vllm/worker/worker.py``), which
kvpure does not model; they are refused with one line that says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from kvpure.errors import InvalidFieldError

__all__ = [
    "MEMORY_PROFILE_RULES",
    "MemoryProfileRules",
    "V0EngineError",
    "Version",
    "memory_profile_rules",
    "parse_version",
]

Version = tuple[int, int]
OLDEST_V1: Final[Version] = (0, 10)
NEWEST: Final[Version] = (0, 34)


class V0EngineError(InvalidFieldError):
    """A vLLM release before 0.10: the V0 engine (and 0.8-0.9's early V1), not modelled."""

    def __init__(self, *, field: str, value: object) -> None:
        super().__init__(
            field=field,
            value=value,
            reason="vLLM releases before 0.10 are not modelled: the V0 engine, and the V1 "
            "engine of 0.8-0.9 before its 0.10 memory profile (V1 releases 0.10 to 0.34 "
            "are); pass --kv-cache-memory with the figure vLLM logged instead",
        )

    def __str__(self) -> str:
        return f"{self.field}: {self.reason} (got {self.value!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryProfileRules:
    """How one range of vLLM releases sizes the KV cache at start-up.

    - ``first`` / ``last``: the range, ``releases`` its text (``0.24-0.25``);
    - ``large_sampler_peak``: the dummy sampler run keeps several float32 logits
      copies (before 0.17; ``GPUModelRunner._dummy_sampler_run``);
    - ``fused_all_reduce``: with TP > 1 on compute capability 9.0 or 10.x the
      non-torch term holds FlashInfer's fused all-reduce workspace, not only
      NCCL's state (0.17 on: ``enable_allreduce_rms_fusion``); before 0.19
      only on 10.0 among the 10.x (``fused_all_reduce_family_100``), before
      0.21 and in 0.23 only with PP 1 (``fused_all_reduce_any_pp``);
    - ``larger_single_non_torch``: one GPU's non-torch increase is 0.25 GiB,
      not 0.13 (0.18 on, as logged);
    - ``cuda_graph_subtracted``: ``profile_cudagraph_memory``'s estimate is
      subtracted (0.20 on: ``determine_available_memory``);
    - ``cuda_graph_subtracted_on_rocm``: the estimate is made on ROCm too (0.26 on:
      ``current_platform.is_cuda_alike()``; 0.20 tests ``not is_rocm()``, 0.21-0.25
      ``is_cuda()``, and leave it 0);
    - ``non_kv_from_consumed``: non-KV memory is ``total_consumed +
      transient_peak_headroom`` (0.27 on: ``mem_utils.memory_profiling``);
    - ``extensible_kv_cache``: the cache is sized after warm-up
      (0.34: ``extensible_kv_cache.measure_kv_cache_bytes``), with
      ``margin_floor_gib`` (``KV_CACHE_MARGIN_FLOOR_BYTES``: 1 on CUDA, 3 on
      ROCm) and ``margin_fraction`` (``KV_CACHE_MARGIN_FRACTION``);
    - ``unset_gpu_memory_utilization``: what an unset ``gpu_memory_utilization``
      means (``CacheConfig``: 0.9 in 0.11-0.19, 0.92 from 0.20, 1.0 under 0.34's
      extensible cache);
    - ``thin_data_band_gib``: added to the band where few public logs of the
      range exist (see docs/memory-profile.md);
    - ``model_runner_v2``: which models run Model Runner V2 by default (see
      :meth:`runs_model_runner_v2`); ``model_runner_v2_graph_estimate``: V2
      estimates the CUDA graphs (0.29 on; before, its estimate is 0);
    - ``moe_workspace_persists``: an unquantized MoE layer runs the modular
      fused-MoE kernel, whose workspaces come from the persistent
      ``WorkspaceManager`` and stay allocated through the dummy sampler run, so
      they add to its peak (0.14 on: ``UnquantizedFusedMoEMethod.forward_cuda``
      calls ``self.kernel(...)``); before, ``fused_experts`` allocates its caches
      per call and frees them, and the peak is the larger of the sampler's and
      the forward pass's with them.
    """

    first: Version
    last: Version
    large_sampler_peak: bool
    fused_all_reduce: bool
    fused_all_reduce_family_100: bool
    fused_all_reduce_any_pp: bool
    larger_single_non_torch: bool
    cuda_graph_subtracted: bool
    cuda_graph_subtracted_on_rocm: bool
    non_kv_from_consumed: bool
    extensible_kv_cache: bool
    margin_floor_gib: float
    margin_floor_gib_rocm: float
    margin_fraction: float
    unset_gpu_memory_utilization: float
    thin_data_band_gib: float
    model_runner_v2: str = "never"
    model_runner_v2_architectures: frozenset[str] = frozenset()
    model_runner_v2_graph_estimate: bool = False
    moe_workspace_persists: bool = True

    @property
    def releases(self) -> str:
        """The range, as ``0.21-0.25`` (or one release, ``0.17``)."""
        first = ".".join(map(str, self.first))
        return first if self.first == self.last else f"{first}-{'.'.join(map(str, self.last))}"

    def runs_model_runner_v2(
        self, *, architectures: Sequence[str], moe: bool, quantized: bool
    ) -> bool:
        """Whether a plain ``vllm serve`` runs Model Runner V2 (``VllmConfig.use_v2_model_runner``,
        ``_is_default_v2_model_runner_model``): ``listed_dense`` 0.22-0.23 (listed, not MoE nor
        quantized), ``listed`` 0.24, ``listed_or_dense`` 0.25-0.28, ``always`` from 0.29."""
        listed = any(a in self.model_runner_v2_architectures for a in architectures)
        if self.model_runner_v2 == "listed_dense":
            return listed and not moe and not quantized
        if self.model_runner_v2 == "listed":
            return listed
        if self.model_runner_v2 == "listed_or_dense":
            return listed or not moe
        return self.model_runner_v2 == "always"

    def fuses_all_reduce(self, *, tp: int, pp: int, capability: tuple[int, int]) -> bool:
        """Whether the fused all-reduce workspace is allocated (TP > 1, Hopper or Blackwell)."""
        if tp <= 1 or not self.fused_all_reduce:
            return False
        if pp > 1 and not self.fused_all_reduce_any_pp:
            return False
        if capability == (9, 0) or capability == (10, 0):
            return True
        return self.fused_all_reduce_family_100 and capability[0] == 10

    def subtracts_cuda_graphs(self, *, rocm: bool, model_runner_v2: bool = False) -> bool:
        """Whether the CUDA-graph estimate leaves the KV cache's share on this platform.

        Model Runner V2's ``profile_cudagraph_memory`` returns 0 before 0.29
        (vllm/v1/worker/gpu/model_runner.py), so nothing is subtracted there.
        """
        if model_runner_v2 and not self.model_runner_v2_graph_estimate:
            return False
        return self.cuda_graph_subtracted and (self.cuda_graph_subtracted_on_rocm or not rocm)

    def margin_floor(self, *, rocm: bool) -> float:
        """``KV_CACHE_MARGIN_FLOOR_BYTES`` in GiB for the platform."""
        return self.margin_floor_gib_rocm if rocm else self.margin_floor_gib


V1_0_10: Final = MemoryProfileRules(
    first=(0, 10),
    last=(0, 13),
    large_sampler_peak=True,
    fused_all_reduce=False,
    fused_all_reduce_family_100=False,
    fused_all_reduce_any_pp=False,
    larger_single_non_torch=False,
    cuda_graph_subtracted=False,
    cuda_graph_subtracted_on_rocm=False,
    non_kv_from_consumed=False,
    extensible_kv_cache=False,
    margin_floor_gib=0.0,
    margin_floor_gib_rocm=0.0,
    margin_fraction=0.0,
    unset_gpu_memory_utilization=0.9,
    thin_data_band_gib=0.05,
    moe_workspace_persists=False,
)
V1_0_14: Final = replace(V1_0_10, first=(0, 14), last=(0, 14), moe_workspace_persists=True)
V1_0_15: Final = replace(
    V1_0_14,
    first=(0, 15),
    last=(0, 16),
    thin_data_band_gib=0.0,
)
V1_0_17: Final = replace(
    V1_0_15,
    first=(0, 17),
    last=(0, 17),
    large_sampler_peak=False,
    fused_all_reduce=True,
)
V1_0_18: Final = replace(V1_0_17, first=(0, 18), last=(0, 18), larger_single_non_torch=True)
V1_0_19: Final = replace(V1_0_18, first=(0, 19), last=(0, 19), fused_all_reduce_family_100=True)
V1_0_20: Final = replace(
    V1_0_19,
    first=(0, 20),
    last=(0, 20),
    cuda_graph_subtracted=True,
    unset_gpu_memory_utilization=0.92,
)
V1_0_21: Final = replace(V1_0_20, first=(0, 21), last=(0, 21), fused_all_reduce_any_pp=True)
V1_0_22: Final = replace(
    V1_0_21,
    first=(0, 22),
    last=(0, 22),
    model_runner_v2="listed_dense",
    model_runner_v2_architectures=frozenset({"Qwen3ForCausalLM"}),
)
V1_0_23: Final = replace(
    V1_0_22,
    first=(0, 23),
    last=(0, 23),
    fused_all_reduce_any_pp=False,
    model_runner_v2_architectures=frozenset(
        {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}
    ),
)
_V2_MOE: Final = frozenset(
    {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}
)
V1_0_24: Final = replace(
    V1_0_23,
    first=(0, 24),
    last=(0, 24),
    fused_all_reduce_any_pp=True,
    model_runner_v2="listed",
    model_runner_v2_architectures=V1_0_23.model_runner_v2_architectures | _V2_MOE,
)
V1_0_25: Final = replace(
    V1_0_24,
    first=(0, 25),
    last=(0, 25),
    model_runner_v2="listed_or_dense",
    model_runner_v2_architectures=_V2_MOE,
)
_V2_0_26: Final = _V2_MOE | {
    "InklingForCausalLM",
    "InklingForConditionalGeneration",
    "LongcatFlashNgramForCausalLM",
}
V1_0_26: Final = replace(
    V1_0_25,
    first=(0, 26),
    last=(0, 26),
    cuda_graph_subtracted_on_rocm=True,
    model_runner_v2_architectures=_V2_0_26,
)
V1_0_27: Final = replace(
    V1_0_26,
    first=(0, 27),
    last=(0, 27),
    non_kv_from_consumed=True,
    thin_data_band_gib=0.1,
    model_runner_v2_architectures=_V2_0_26 | {"KimiK3ForConditionalGeneration"},
)
V1_0_28: Final = replace(
    V1_0_27,
    first=(0, 28),
    last=(0, 28),
    model_runner_v2_architectures=V1_0_27.model_runner_v2_architectures | {"DeepseekV4ForCausalLM"},
)
V1_0_29: Final = replace(
    V1_0_28,
    first=(0, 29),
    last=(0, 33),
    model_runner_v2="always",
    model_runner_v2_architectures=frozenset(),
    model_runner_v2_graph_estimate=True,
)
V1_0_34: Final = replace(
    V1_0_29,
    first=(0, 34),
    last=(0, 34),
    extensible_kv_cache=True,
    margin_floor_gib=1.0,
    margin_floor_gib_rocm=3.0,
    margin_fraction=0.75,
    unset_gpu_memory_utilization=1.0,
    thin_data_band_gib=0.25,
)
MEMORY_PROFILE_RULES: Final[tuple[MemoryProfileRules, ...]] = (
    V1_0_10,
    V1_0_14,
    V1_0_15,
    V1_0_17,
    V1_0_18,
    V1_0_19,
    V1_0_20,
    V1_0_21,
    V1_0_22,
    V1_0_23,
    V1_0_24,
    V1_0_25,
    V1_0_26,
    V1_0_27,
    V1_0_28,
    V1_0_29,
    V1_0_34,
)


def parse_version(text: str, *, field: str = "vllm_version") -> Version:
    """``"0.19.0"``, ``"v0.11.2"``, ``"0.34"`` -> ``(0, minor)``; V0 and unknown ones refused."""
    parts = text.strip().lstrip("v").split(".") if isinstance(text, str) else []
    try:
        version = (int(parts[0]), int(parts[1].split("+")[0].split("rc")[0]))
    except (IndexError, ValueError):
        raise InvalidFieldError(
            field=field, value=text, reason="must be a vLLM release such as 0.19.0"
        ) from None
    if version < OLDEST_V1:
        raise V0EngineError(field=field, value=text)
    if version > NEWEST:
        raise InvalidFieldError(
            field=field,
            value=text,
            reason="kvpure's memory profile knows vLLM 0.10 to 0.34; pass --kv-cache-memory "
            "with the figure vLLM logged instead",
        )
    return version


def memory_profile_rules(vllm_version: str, *, field: str = "vllm_version") -> MemoryProfileRules:
    """The rules record of the release named (``"0.26"``, ``"0.19.0"``...)."""
    version = parse_version(vllm_version, field=field)
    return next(r for r in MEMORY_PROFILE_RULES if r.first <= version <= r.last)
