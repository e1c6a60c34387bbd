"""Mutation round 6: the 0.34 extensible KV cache and the estimate's terms, pinned by vLLM.

Expected values come from vLLM's source (cited by file and line, read in the
unpacked wheels ``pip download --no-deps vllm==X``) and from the public start-up
logs in tests/data/memory_logs, never from kvpure's output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvpure.memory_profile.budget import MemoryBudget, ServeSettings, estimate_memory_budget
from kvpure.memory_profile.releases import memory_profile_rules
from kvpure.memory_profile.render import render_vllm_log
from kvpure.memory_profile.sharding import Parallelism
from kvpure.memory_profile.terms import MemoryTerm
from kvpure.models.config import HFConfig, parse_model_config

GIB = 1 << 30
H100 = round(79.19 * GIB)  # what vLLM logs as an H100 80GB's total memory
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _llama() -> HFConfig:
    return parse_model_config(json.loads((EXAMPLES / "llama3_8b.json").read_text()))


def _init_free(b: MemoryBudget) -> int:
    """``init_free`` behind a device-bound 0.34 budget: vLLM 0.34.0
    ``v1/worker/extensible_kv_cache.py`` ``measure_kv_cache_bytes`` (``available =
    min(requested - non_kv_used, headroom - margin) - max(peak, growth)``, with
    ``headroom = init_free - non_kv_used``) solved for ``init_free``."""
    transient = b.activation_bytes + b.cuda_graph_bytes
    non_kv = b.weights_bytes + b.non_torch_bytes + b.cuda_graph_bytes
    return b.kv_cache_bytes + transient + b.margin_bytes + non_kv


def test_0_34_sizes_one_gpu_from_the_logged_initial_free_memory() -> None:
    # vLLM's "Initial free memory" on one H100 (79.19 GiB total): 78.68 GiB
    # (docs/memory-profile.md, the bundled H100 logs).
    settings = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34")
    (b,) = estimate_memory_budget(_llama(), settings)
    assert abs(_init_free(b) - 78.68 * GIB) <= 0.02 * GIB


def test_0_34_sizes_tensor_parallel_workers_from_the_logged_initial_free_memory() -> None:
    # With TP 2 or 4 NCCL's communicators exist before vLLM's first snapshot: the
    # logged "Initial free memory" is 77.12-77.66 GiB of 79.19 on an H100.
    settings = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34")
    for tp in (2, 4):
        budgets = estimate_memory_budget(_llama(), settings, Parallelism(tp=tp))
        for b in budgets:
            assert 77.12 * GIB <= _init_free(b) <= 77.66 * GIB, tp


def test_0_34_device_bound_band_holds_the_initial_free_memorys_spread() -> None:
    # Bound by the device (unset utilization: 1.0, vllm 0.34.0 config/cache.py
    # resolved_gpu_memory_utilization), the size moves with what the context held before
    # the first snapshot, which varies between logs (1.53-2.07 GiB with TP 2 or 4);
    # capped by an explicit utilization (min(requested - non_kv_used, ...)), it does not.
    bound = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=None, vllm_version="0.34")
    capped = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=0.5, vllm_version="0.34")
    for tp in (1, 2):
        (a, *_) = estimate_memory_budget(_llama(), bound, Parallelism(tp=tp))
        (c, *_) = estimate_memory_budget(_llama(), capped, Parallelism(tp=tp))
        assert (a.weights, a.activation, a.non_torch, a.cuda_graph) == (
            c.weights,
            c.activation,
            c.non_torch,
            c.cuda_graph,
        )
        bound_band = a.kv_cache_bytes_high - a.kv_cache_bytes
        capped_band = c.kv_cache_bytes_high - c.kv_cache_bytes
        assert bound_band > capped_band, tp
        if tp > 1:  # at least half the logged spread, in quadrature with the rest
            half = (2.07 - 1.53) / 2 * GIB
            assert bound_band >= math.hypot(capped_band, half) - 1


def _vllm_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> list[int]:
    """vllm 0.26.0 ``config/vllm.py`` ``_set_cudagraph_sizes`` (lines 1788-1842), default
    compilation config, no speculative tokens, no sequence parallelism."""
    largest = min(max_num_seqs * 1 * 2, 512)
    largest = min(max_num_batched_tokens, largest)
    sizes = [i for i in [1, 2, 4] if i <= largest]
    if largest >= 8:
        sizes += list(range(8, min(largest + 1, 256), 8))
    if largest >= 256:
        sizes += list(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest and max_num_batched_tokens not in sizes:
        sizes.append(max_num_batched_tokens)
    return sorted(set(sizes))


def test_the_graphs_counted_are_those_vllm_captures() -> None:
    """PIECEWISE: every capture size; FULL (decode): the sizes up to ``1 x max_num_seqs``
    (vllm 0.26.0 ``v1/cudagraph_dispatcher.py`` ``initialize_cudagraph_keys``, lines
    210-221); ``profile_cudagraph_memory`` captures both lists (``gpu_model_runner.py``
    line 6586)."""
    from kvpure.memory_profile.estimate import cudagraph_count

    grid = (1, 2, 3, 4, 5, 7, 8, 16, 100, 127, 128, 200, 255, 256, 257, 300, 512, 1024)
    tokens = (1, 2, 3, 4, 8, 24, 100, 250, 255, 256, 260, 300, 500, 512, 513, 2048, 8192)
    for max_num_seqs in grid:
        for max_num_batched_tokens in tokens:
            if max_num_batched_tokens < max_num_seqs:
                continue  # vLLM refuses a batch under max_num_seqs (SchedulerConfig)
            sizes = _vllm_capture_sizes(max_num_seqs, max_num_batched_tokens)
            full = [s for s in sizes if s <= max_num_seqs]
            got = cudagraph_count(max_num_seqs, max_num_batched_tokens)
            assert got == len(sizes) + len(full), (max_num_seqs, max_num_batched_tokens)
    # unset batch: vLLM's smallest default batch (2048) bounds nothing below 512
    assert cudagraph_count(1024) == len(_vllm_capture_sizes(1024, 2048)) * 2


def test_0_34_band_widens_exactly_where_the_device_bounds_the_size() -> None:
    """``available = min(requested - non_kv_used, headroom - margin) - ...`` (vllm 0.34.0
    ``v1/worker/extensible_kv_cache.py``): where the device's side of the ``min`` is
    taken, a slightly larger request leaves the size unchanged and the size moves with
    the context held before the first snapshot (a wider band); elsewhere the request
    sets it. Scanned across the switch, utilization 0.955 to 0.995."""
    capped = ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=0.5, vllm_version="0.34")
    (c,) = estimate_memory_budget(_llama(), capped)
    request_band = c.kv_cache_bytes_high - c.kv_cache_bytes
    seen = set()
    for step in range(41):
        utilization = 0.955 + step / 1000
        (a,) = estimate_memory_budget(
            _llama(),
            ServeSettings(
                total_gpu_bytes=H100, gpu_memory_utilization=utilization, vllm_version="0.34"
            ),
        )
        more = utilization + 2**20 / H100  # one MiB more requested
        (b,) = estimate_memory_budget(
            _llama(),
            ServeSettings(total_gpu_bytes=H100, gpu_memory_utilization=more, vllm_version="0.34"),
        )
        device_bound = a.kv_cache_bytes == b.kv_cache_bytes
        seen.add(device_bound)
        band = a.kv_cache_bytes_high - a.kv_cache_bytes
        assert (band > request_band) is device_bound, utilization
    assert seen == {False, True}


def _terms() -> tuple[MemoryTerm, MemoryTerm, MemoryTerm, MemoryTerm]:
    def est(gib: float) -> MemoryTerm:
        return MemoryTerm(bytes=round(gib * GIB), exact=False, error_bytes=round(0.1 * GIB))

    return MemoryTerm(bytes=15 * GIB, exact=True), est(2.0), est(0.25), est(0.5)


def test_extensible_size_defaults_to_one_gpu_and_marks_the_context_estimated() -> None:
    """``extensible_kv_cache_bytes`` without ``tp`` sizes one GPU: the context held before
    the first snapshot is the single-GPU figure (78.68 GiB initial free of 79.19 on one
    H100), an estimate from the logs, not a figure any file states."""
    from kvpure.memory_profile.extensible import extensible_kv_cache_bytes

    rules = memory_profile_rules("0.34")
    weights, activation, non_torch, graph = _terms()
    default = extensible_kv_cache_bytes(
        rules,
        total_bytes=H100,
        requested_bytes=H100,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graph=graph,
        rocm=False,
    )
    one = extensible_kv_cache_bytes(
        rules,
        total_bytes=H100,
        requested_bytes=H100,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graph=graph,
        rocm=False,
        tp=1,
    )
    assert default == one
    *_, context = default.terms
    assert context not in (weights, activation, non_torch, graph)
    assert context.exact is False
    init_free = H100 - context.bytes
    assert abs(init_free - 78.68 * GIB) <= 0.02 * GIB


def test_at_the_switch_itself_the_device_side_is_reached() -> None:
    """Where ``requested - non_kv_used == headroom - margin`` exactly, both sides of
    vLLM 0.34's ``min`` agree, and any more context held before the snapshot lowers the
    size: the context's spread counts, as on the device's side."""
    from kvpure.memory_profile.extensible import extensible_kv_cache_bytes

    rules = memory_profile_rules("0.34")
    weights, activation, non_torch, graph = _terms()

    def size(requested: int) -> tuple[int, int]:
        got = extensible_kv_cache_bytes(
            rules,
            total_bytes=H100,
            requested_bytes=requested,
            weights=weights,
            activation=activation,
            non_torch=non_torch,
            cuda_graph=graph,
            rocm=False,
        )
        return got.kv_cache_bytes, len(got.terms)

    # find the switch: the least request whose size no longer grows with it
    low, high = H100 // 2, H100
    while high - low > 1:
        mid = (low + high) // 2
        if size(mid)[0] == size(mid + 1)[0]:
            high = mid
        else:
            low = mid
    assert size(high)[0] == size(high + 1)[0] != size(high - 1)[0]
    assert size(high)[1] == size(high + 1)[1] == 5  # the context term counts from here
    assert size(high - 1)[1] == 4


def test_only_a_model_with_routed_experts_holds_fused_moe_caches() -> None:
    """The fused-MoE caches belong to ``FusedMoE`` layers (vllm 0.26.0
    ``model_executor/layers/fused_moe/layer.py``), which a model builds only with routed
    experts and a top-k: a shape with either at zero holds none."""
    from kvpure.memory_profile.estimate import moe_workspace_gib
    from kvpure.memory_profile.profile_logs import ModelShape

    def shape(experts: int, top_k: int) -> ModelShape:
        return ModelShape(
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_experts=experts,
            num_experts_per_tok=top_k,
            moe_intermediate_size=1408,
        )

    assert moe_workspace_gib(8192, shape(0, 8), 1) == 0.0
    assert moe_workspace_gib(8192, shape(64, 0), 1) == 0.0
    # with both: tokens x top_k x (3 x moe_intermediate / TP + hidden) x 2 bytes
    got = moe_workspace_gib(8192, shape(64, 6), 2)
    assert got == 8192 * 6 * (3 * 1408 / 2 + 4096) * 2 / GIB


def test_the_estimates_defaults_are_a_bf16_v1_run_on_one_hopper_stage() -> None:
    """The public functions' defaults: a 16-bit model on the V1 runner with PyTorch's
    sampler (``activation_gib``), 1024 sequences and vLLM's default batch
    (``cuda_graph_gib``), one pipeline stage and an H100 (``non_torch_band_gib``)."""
    from kvpure.memory_profile.estimate import (
        COEFFICIENTS,
        activation_gib,
        cuda_graph_gib,
        non_torch_band_gib,
        non_torch_gib,
    )
    from kvpure.memory_profile.profile_logs import ModelShape

    moe = ModelShape(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=48,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    )
    for release in ("0.11.0", "0.19.0", "0.26", "0.34"):
        rules = memory_profile_rules(release)
        assert activation_gib(
            COEFFICIENTS,
            moe,
            max_num_batched_tokens=8192,
            max_num_seqs=256,
            tp=1,
            last_stage=True,
            rules=rules,
        ) == activation_gib(
            COEFFICIENTS,
            moe,
            last_stage=True,
            rules=rules,
            dtype_bytes=2,
            quantization="none",
            flashinfer_sampler=False,
            model_runner_v2=False,
            max_num_batched_tokens=8192,
            max_num_seqs=256,
            tp=1,
        )
        for tp in (2, 8):
            assert non_torch_band_gib(COEFFICIENTS, tp=tp, rules=rules) == non_torch_band_gib(
                COEFFICIENTS, tp=tp, pp=1, rules=rules, capability=(9, 0)
            )
            assert non_torch_gib(COEFFICIENTS, tp=tp, pp=1, rules=rules) == non_torch_gib(
                COEFFICIENTS, tp=tp, pp=1, rules=rules, capability=(9, 0)
            )
    assert cuda_graph_gib(COEFFICIENTS, moe, pp=1) == cuda_graph_gib(
        COEFFICIENTS, moe, pp=1, max_num_seqs=1024, max_num_batched_tokens=8192
    )


def test_model_runner_v2s_sampler_peak_is_the_logits_in_the_models_dtype() -> None:
    """Model Runner V2's profile run (vllm 0.27.0 ``v1/worker/gpu/model_runner.py``
    lines 719-727 and ``_dummy_sampler_run``, 683-694) computes ``compute_logits`` over
    ``max_num_seqs`` rows, one ``[max_num_seqs, vocab]`` tensor in the model's dtype, and
    samples without a float32 copy: where the forward pass is small, that tensor is the
    peak."""
    from kvpure.memory_profile.estimate import COEFFICIENTS, activation_gib
    from kvpure.memory_profile.profile_logs import ModelShape

    shape = ModelShape(
        vocab_size=151936, hidden_size=1024, intermediate_size=1024, num_hidden_layers=28
    )
    rules = memory_profile_rules("0.29")
    for seqs, dtype_bytes in ((1024, 2), (512, 4), (256, 1)):
        got = activation_gib(
            COEFFICIENTS,
            shape,
            max_num_batched_tokens=256,
            max_num_seqs=seqs,
            tp=1,
            last_stage=True,
            rules=rules,
            dtype_bytes=dtype_bytes,
            model_runner_v2=True,
        )
        assert math.isclose(got, seqs * 151936 * dtype_bytes / GIB, rel_tol=1e-12)


def _vllm_pp_partitions(num_hidden_layers: int, pp_size: int) -> list[int]:
    """vllm 0.26.0 ``distributed/utils.py`` ``get_pp_indices`` (lines 156-161), without
    ``VLLM_PP_LAYER_PARTITION``: the remainder goes to the stages before the last."""
    partitions = [num_hidden_layers // pp_size for _ in range(pp_size)]
    if remaining := num_hidden_layers % pp_size:
        for i in range(2, remaining + 2):
            partitions[-i] += 1
    return partitions


def test_the_graphs_scale_with_the_largest_pipeline_stage() -> None:
    from kvpure.memory_profile.estimate import stage_layers
    from kvpure.memory_profile.profile_logs import ModelShape

    for layers in (1, 2, 3, 7, 26, 32, 61, 80, 94):
        for pp in (1, 2, 3, 4, 8):
            if pp > layers:
                continue  # vLLM leaves a stage without layers
            shape = ModelShape(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=layers,
            )
            assert stage_layers(shape, pp) == max(_vllm_pp_partitions(layers, pp)), (layers, pp)


def test_before_0_14_the_fused_moe_caches_still_peak_inside_the_forward_pass() -> None:
    """vllm 0.13.0 ``fused_moe/unquantized_fused_moe_method.py``: ``fused_experts``
    allocates its intermediate caches inside each MoE layer's call and frees them after:
    they are gone when the sampler runs, but live at the forward pass's peak. With few
    sequences (a small sampler) the forward pass with them is the peak, as in 0.14, whose
    persistent workspace holds the same caches."""
    from kvpure.memory_profile.estimate import COEFFICIENTS, activation_gib, moe_workspace_gib
    from kvpure.memory_profile.profile_logs import ModelShape

    shape = ModelShape(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=48,
        num_experts=128,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
    )

    def peak(release: str, seqs: int) -> float:
        return activation_gib(
            COEFFICIENTS,
            shape,
            max_num_batched_tokens=8192,
            max_num_seqs=seqs,
            tp=1,
            last_stage=True,
            rules=memory_profile_rules(release),
        )

    caches = COEFFICIENTS.moe_factor * moe_workspace_gib(8192, shape, 1)
    assert caches > 0
    assert peak("0.13.0", 1) == peak("0.14.0", 1)


def test_an_exact_term_has_no_band_and_names_its_fields_in_json() -> None:
    """A term read from a file (safetensors headers, ``--enforce-eager``'s absent graphs) is
    exact: no band. ``MemoryTerm.to_json`` gives the documented keys."""
    exact = MemoryTerm(bytes=15 * GIB, exact=True)
    assert exact.error_bytes == 0
    assert exact.to_json() == {"bytes": 15 * GIB, "exact": True, "error_bytes": 0}
    estimated = MemoryTerm(bytes=GIB, exact=False, error_bytes=7)
    assert estimated.to_json() == {"bytes": GIB, "exact": False, "error_bytes": 7}
    eager = ServeSettings(total_gpu_bytes=H100, vllm_version="0.21", enforce_eager=True)
    (b,) = estimate_memory_budget(_llama(), eager)
    assert (b.cuda_graph.bytes, b.cuda_graph.exact, b.cuda_graph.error_bytes) == (0, True, 0)
    # and the log's words mark it so
    log = render_vllm_log(b)
    assert "Estimated CUDA graph memory: 0.0 GiB total (exact; --enforce-eager" in log
    assert "GiB (estimated, +/- 0.18 GiB)\nnon-torch forward" in log  # the activation band
    # the graph estimate's fate per release: 0.19 logs it only (envs.py default "0"), 0.21
    # subtracts it, 0.26 runs Llama on Model Runner V2, whose estimate is 0 before 0.29
    for release, note in (
        ("0.19.0", "not subtracted before vLLM 0.20"),
        ("0.21", "subtracted"),
        ("0.26", "not subtracted: Model Runner V2 estimates none before vLLM 0.29"),
    ):
        (g,) = estimate_memory_budget(
            _llama(), ServeSettings(total_gpu_bytes=H100, vllm_version=release)
        )
        assert "GiB total (estimated, +/- 0.22 GiB; " + note + ")\n" in render_vllm_log(g)


def test_the_non_torch_band_widens_exactly_where_its_figure_is_not_an_nvlink_h100_log() -> None:
    """NCCL's state was logged over H100 NVLink at TP 2 (0.55 GiB, vLLM 0.11): where the
    figure comes from elsewhere (two A100 TP 2 logs off Hopper and Blackwell, one TP 8
    NVSwitch node), the band is widened by the unlogged margin; with more than two GPUs
    on boards without NVLink, by the PCIe margin; nowhere else."""
    from kvpure.memory_profile.estimate import (
        COEFFICIENTS,
        NCCL_PCIE_MULTI_BAND_GIB,
        NCCL_TP8_NVSWITCH_GIB,
        NCCL_UNLOGGED_BAND_GIB,
        NCCL_WITHOUT_NVLS_GIB,
        PCIE_ONLY_CAPABILITIES,
        non_torch_band_gib,
        non_torch_gib,
    )

    for release in ("0.11.0", "0.17.0", "0.19.0", "0.21", "0.23", "0.34"):
        rules = memory_profile_rules(release)
        for tp, pp in ((1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (8, 1), (8, 2)):
            for capability in ((8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0)):
                figure = non_torch_gib(
                    COEFFICIENTS, tp=tp, pp=pp, rules=rules, capability=capability
                )
                band = non_torch_band_gib(
                    COEFFICIENTS, tp=tp, pp=pp, rules=rules, capability=capability
                )
                elsewhere = figure in (NCCL_WITHOUT_NVLS_GIB, NCCL_TP8_NVSWITCH_GIB)
                extra = NCCL_UNLOGGED_BAND_GIB if elsewhere else 0.0
                if tp > 2 and capability in PCIE_ONLY_CAPABILITIES:
                    # vLLM's custom all-reduce is off beyond two PCIe-only GPUs ("not
                    # supported on more than two PCIe-only GPUs", custom_all_reduce.py):
                    # NCCL carries it all, a band of its own (one TP 4 log)
                    extra = NCCL_PCIE_MULTI_BAND_GIB
                assert band == COEFFICIENTS.non_torch_band + extra, (release, tp, pp, capability)


def test_an_unmodelled_hybrid_is_refused_by_the_model_field() -> None:
    from kvpure.memory_profile.unmodelled import UnmodelledMemoryError

    data = Path(__file__).resolve().parent / "data" / "model_configs" / "qwen3_next_80b_a3b.json"
    config = parse_model_config(json.loads(data.read_text()))
    with pytest.raises(UnmodelledMemoryError) as info:
        estimate_memory_budget(config, ServeSettings(total_gpu_bytes=H100))
    assert info.value.field == "model"
    assert info.value.value == "Qwen3NextForCausalLM"
    assert str(info.value).startswith("model Qwen3NextForCausalLM: its gated delta net layers'")


def test_from_0_27_the_log_states_the_non_kv_total_vllm_subtracts() -> None:
    """vllm 0.27.0 ``v1/worker/gpu_worker.py`` lines 544-548: ``available =
    requested_memory - non_kv_cache_memory - cudagraph_memory_estimate_applied``, and
    ``utils/mem_utils.py`` line 223 logs "Total non KV cache memory: X GiB"; before 0.27
    the profile logs no such total."""
    from kvpure.errors import format_gib

    gemma = parse_model_config(json.loads((EXAMPLES / "gemma3_12b.json").read_text()))
    for release, logged in (("0.26", False), ("0.27", True), ("0.33", True)):
        settings = ServeSettings(total_gpu_bytes=H100, vllm_version=release)
        for config in (_llama(), gemma):
            (b,) = estimate_memory_budget(config, settings)
            applied = b.cuda_graph_bytes if b.cuda_graph_subtracted else 0
            non_kv = b.requested_bytes - b.kv_cache_bytes - applied
            line = f"Total non KV cache memory: {format_gib(non_kv)}GiB\n"
            assert (line in render_vllm_log(b)) is logged, release
            assert ("Total non KV cache memory" in render_vllm_log(b)) is logged, release
