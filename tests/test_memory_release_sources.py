"""Every memory-profile rules record against what each vLLM release's own source says.

``tests/data/memory_profile/vllm_release_sources.json`` is written by
``python tools/memory_profile_rules.py /work/vllm --json OUT`` from the unpacked
wheels of vLLM 0.10.0 to 0.34.0 (``pip download --no-deps --only-binary :all:
vllm==X``), one object per release, each field read in that release's files:

- ``estimate_cudagraphs_default``: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``'s
  default in ``vllm/envs.py`` (absent before 0.18; "0" in 0.18-0.19, "1" from
  0.20: e.g. vllm 0.20.0 envs.py line 1725);
- ``estimate_platform``: the test after ``cudagraph_memory_estimate = 0`` in
  ``vllm/v1/worker/gpu_worker.py`` (0.20.0 line 381 ``not
  current_platform.is_rocm()``, 0.21.0 line 403 ``is_cuda()``, 0.34.0 line 744
  ``is_cuda_alike() or is_xpu()``);
- ``unset_gpu_memory_utilization``: ``CacheConfig.gpu_memory_utilization``'s
  default (``vllm/config/cache.py``), and 0.34's
  ``resolved_gpu_memory_utilization`` (0.34.0 cache.py line 499: 1.0 under the
  extensible KV cache);
- ``fusion_capability`` / ``fusion_needs_pp_1``: ``enable_allreduce_rms_fusion``
  in ``vllm/config/vllm.py`` (0.19.0 lines 116-135: capability family 100 or
  exactly 90, ``pipeline_parallel_size == 1``);
- ``non_kv_from_total_consumed``: ``vllm/utils/mem_utils.py`` measures
  ``total_consumed`` (0.27 on);
- ``extensible_kv_cache``, ``margin_floor_gib`` (CUDA, ROCm), ``margin_fraction``:
  ``vllm/v1/worker/extensible_kv_cache.py`` (0.34.0 lines 64-65);
- ``v2_default``, ``v2_listed_needs_dense_unquantized``, ``v2_architectures``:
  ``VllmConfig._is_default_v2_model_runner_model`` and
  ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (0.22.0 config/vllm.py lines 69 and
  518-532; ``all`` once ``use_v2_model_runner`` asks no list, 0.29; ``only`` once no
  V1 GPU model runner is left, 0.34);
- ``v2_estimates_graphs``: Model Runner V2's ``profile_cudagraph_memory``
  (``vllm/v1/worker/gpu/model_runner.py``) runs ``_profile_cudagraph_memory``
  instead of ``return 0`` (0.29 on).

The expected behaviour of the three predicates is vLLM's conditions transcribed
from the same lines, evaluated on the facts read.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.releases import (
    MEMORY_PROFILE_RULES,
    MemoryProfileRules,
    V0EngineError,
    memory_profile_rules,
    parse_version,
)

DATA = Path(__file__).resolve().parent / "data" / "memory_profile" / "vllm_release_sources.json"
SOURCES: list[dict[str, Any]] = json.loads(DATA.read_text())["releases"]

# _is_default_v2_model_runner_model's shape, per the facts read (kvpure's names)
_V2_MODES = {"-": "never", "listed+dense": "listed_or_dense", "all": "always", "only": "always"}


def _ids(fact: dict[str, Any]) -> str:
    return str(fact["release"])


def test_every_v1_minor_release_is_read() -> None:
    minors = sorted({int(f["release"].split(".")[1]) for f in SOURCES})
    assert minors == list(range(10, 35))


@pytest.mark.parametrize("fact", SOURCES, ids=_ids)
def test_each_record_holds_its_releases_settings(fact: dict[str, Any]) -> None:
    rules = memory_profile_rules(fact["release"])
    assert rules.first <= parse_version(fact["release"]) <= rules.last
    assert rules.cuda_graph_subtracted is (fact["estimate_cudagraphs_default"] == "1")
    assert rules.cuda_graph_subtracted_on_rocm is (fact["estimate_platform"] == "cuda_alike")
    assert rules.unset_gpu_memory_utilization == fact["unset_gpu_memory_utilization"]
    assert rules.fused_all_reduce is (fact["fusion_capability"] != "off")
    assert rules.fused_all_reduce_family_100 is (fact["fusion_capability"] == "9.0+10.x")
    if rules.fused_all_reduce:
        assert rules.fused_all_reduce_any_pp is not fact["fusion_needs_pp_1"]
    assert rules.non_kv_from_consumed is fact["non_kv_from_total_consumed"]
    assert rules.extensible_kv_cache is fact["extensible_kv_cache"]
    if fact["extensible_kv_cache"]:
        cuda, rocm = fact["margin_floor_gib"]
        assert (rules.margin_floor(rocm=False), rules.margin_floor(rocm=True)) == (cuda, rocm)
        assert rules.margin_fraction == fact["margin_fraction"]
    mode = fact["v2_default"]
    if mode == "listed":
        expected = "listed_dense" if fact["v2_listed_needs_dense_unquantized"] else "listed"
    else:
        expected = _V2_MODES[mode]
    assert rules.model_runner_v2 == expected
    assert rules.model_runner_v2_architectures == frozenset(fact["v2_architectures"])
    assert rules.model_runner_v2_graph_estimate is fact["v2_estimates_graphs"]


def _vllm_runs_v2(fact: dict[str, Any], architecture: str, moe: bool, quantized: bool) -> bool:
    """``VllmConfig.use_v2_model_runner`` for a plain ``vllm serve`` of one generative model."""
    mode = fact["v2_default"]
    if mode in ("all", "only"):
        return True
    if mode == "-":
        return False
    listed = architecture in fact["v2_architectures"]
    if mode == "listed":  # 0.22-0.24: return False unless listed
        if fact["v2_listed_needs_dense_unquantized"]:  # 0.22-0.23
            return listed and not moe and not quantized
        return listed
    return listed or not moe  # 0.25-0.28: "or not model_config.is_moe"


@pytest.mark.parametrize("fact", SOURCES, ids=_ids)
def test_model_runner_v2_follows_each_releases_condition(fact: dict[str, Any]) -> None:
    rules = memory_profile_rules(fact["release"])
    names = [*fact["v2_architectures"], "Gemma2ForCausalLM", "MixtralForCausalLM"]
    for name, moe, quantized in itertools.product(names, (False, True), (False, True)):
        got = rules.runs_model_runner_v2(architectures=(name,), moe=moe, quantized=quantized)
        assert got is _vllm_runs_v2(fact, name, moe, quantized), (name, moe, quantized)
    # any of the architectures listed counts (``any(arch in ... for arch in architectures)``)
    if fact["v2_architectures"]:
        both = ("Gemma2ForCausalLM", fact["v2_architectures"][-1])
        assert rules.runs_model_runner_v2(architectures=both, moe=False, quantized=False)


def _vllm_fuses(fact: dict[str, Any], tp: int, pp: int, capability: tuple[int, int]) -> bool:
    """``enable_allreduce_rms_fusion`` (config/vllm.py), CUDA with FlashInfer, DP 1."""
    kind = fact["fusion_capability"]
    if kind == "off" or tp <= 1:
        return False
    if fact["fusion_needs_pp_1"] and pp != 1:
        return False
    blackwell = capability[0] == 10 if kind == "9.0+10.x" else capability == (10, 0)
    return capability == (9, 0) or blackwell


_CAPABILITIES = [(8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0)]


@pytest.mark.parametrize("fact", SOURCES, ids=_ids)
def test_the_fused_all_reduce_follows_each_releases_condition(fact: dict[str, Any]) -> None:
    rules = memory_profile_rules(fact["release"])
    for tp, pp, capability in itertools.product((1, 2, 3, 8), (1, 2), _CAPABILITIES):
        got = rules.fuses_all_reduce(tp=tp, pp=pp, capability=capability)
        assert got is _vllm_fuses(fact, tp, pp, capability), (tp, pp, capability)


@pytest.mark.parametrize("fact", SOURCES, ids=_ids)
def test_the_cuda_graph_estimate_leaves_the_cache_as_each_release_says(
    fact: dict[str, Any],
) -> None:
    rules = memory_profile_rules(fact["release"])
    for rocm, v2 in itertools.product((False, True), (False, True)):
        made = fact["estimate_platform"] == "cuda_alike" or (
            not rocm and fact["estimate_platform"] != "none"
        )
        estimated = not v2 or fact["v2_estimates_graphs"]
        expected = fact["estimate_cudagraphs_default"] == "1" and made and estimated
        got = rules.subtracts_cuda_graphs(rocm=rocm, model_runner_v2=v2)
        assert got is expected, (rocm, v2)
    # the default: the V1 runner
    assert rules.subtracts_cuda_graphs(rocm=False) is (fact["estimate_cudagraphs_default"] == "1")


def test_record_ranges_name_their_releases() -> None:
    assert [r.releases for r in MEMORY_PROFILE_RULES] == [
        "0.10-0.13",
        "0.14",
        "0.15-0.16",
        "0.17",
        "0.18",
        "0.19",
        "0.20",
        "0.21",
        "0.22",
        "0.23",
        "0.24",
        "0.25",
        "0.26",
        "0.27",
        "0.28",
        "0.29-0.33",
        "0.34",
    ]
    assert isinstance(MEMORY_PROFILE_RULES[0], MemoryProfileRules)


@pytest.mark.parametrize(
    ("text", "minor"),
    # vLLM's own version strings: wheels (0.11.2), tags (v0.19.0), pre-releases
    # (0.20.0rc1) and local builds (0.26.0+cu128), and two-part names
    [
        ("0.11.2", 11),
        ("v0.19.0", 19),
        ("0.20.0rc1", 20),
        ("0.22rc2", 22),
        ("0.26.0+cu128", 26),
        ("0.27+rocm", 27),
        (" 0.34 ", 34),
        ("0.10", 10),
    ],
)
def test_vllm_version_strings_parse(text: str, minor: int) -> None:
    assert parse_version(text) == (0, minor)
    assert memory_profile_rules(text).first <= (0, minor) <= memory_profile_rules(text).last


def test_the_v0_refusal_reads_in_one_line() -> None:
    with pytest.raises(V0EngineError) as info:
        memory_profile_rules("0.9.2", field="--memory-profile-version")
    assert str(info.value) == (
        "--memory-profile-version: vLLM releases before 0.10 are not modelled: the V0 "
        "engine, and the V1 engine of 0.8-0.9 before its 0.10 memory profile (V1 releases "
        "0.10 to 0.34 are); pass --kv-cache-memory with the figure vLLM logged instead "
        "(got '0.9.2')"
    )
    assert info.value.field == "--memory-profile-version"
    assert info.value.value == "0.9.2"
    for bad in ("0.35", "1.0"):
        with pytest.raises(InvalidFieldError) as refused:
            memory_profile_rules(bad, field="vllm")
        assert refused.value.field == "vllm"
        assert not isinstance(refused.value, V0EngineError)


@pytest.mark.parametrize("fact", SOURCES, ids=_ids)
def test_cuda_graph_subtracted_by_version_reads_the_envs_default(fact: dict[str, Any]) -> None:
    from kvpure.memory_profile.estimate import cuda_graph_subtracted

    version = parse_version(fact["release"])
    assert cuda_graph_subtracted(version) is (fact["estimate_cudagraphs_default"] == "1")


def test_the_fitted_releases_are_those_of_the_fit_split() -> None:
    """The estimate names the releases it answers for (the records' range) and those its
    coefficients were fitted on: the ``fit`` split of the public logs."""
    from kvpure.memory_profile.estimate import FITTED_VERSIONS
    from kvpure.memory_profile.profile_logs import load_profile_logs

    fit = [g for g in load_profile_logs(DATA.parents[1] / "memory_logs") if g.split == "fit"]
    minors = sorted(int(g.vllm_version.split(".")[1]) for g in fit)
    boards = sorted({b for g in fit for b in ("H100", "A100") if b in g.gpu})
    first, last = MEMORY_PROFILE_RULES[0].first, MEMORY_PROFILE_RULES[-1].last
    assert FITTED_VERSIONS.startswith(
        f"0.{first[1]}-0.{last[1]} (fitted on vLLM 0.{minors[0]}-0.{minors[-1]} "
        f"{' and '.join(reversed(boards))} logs; "
    )
    assert len(fit) == sum("H100" in g.gpu or "A100" in g.gpu for g in fit)


def test_refusals_name_vllm_version_by_default() -> None:
    for call in (parse_version, memory_profile_rules):
        for bad in ("abc", "0.9", "0.40"):
            with pytest.raises(InvalidFieldError) as info:
                call(bad)
            assert info.value.field == "vllm_version"
