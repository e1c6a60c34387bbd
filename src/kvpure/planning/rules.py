"""The planner's rules per vLLM release: one frozen record each, looked up by version name.

A field is named after the rule that changed between releases; the planner
asks the record, never the version string. 0.33 is built from 0.26 with the
changed rules replaced, 0.34 from 0.33 (only the wording of the
not-enough-memory hint and two spec fields differ). Where each side of a rule
lives in vLLM is said on the field and on the function that applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvpure.versions import normalize_vllm_version

#: vLLM 0.34's ``_more_kv_cache_memory_hint`` without the extensible KV cache
#: (``vllm/v1/core/kv_cache_planning.py``).
HINT_0_34 = (
    "Try increasing `gpu_memory_utilization` when initializing the engine "
    "(this flag also controls CPU memory reservation on the CPU backend, "
    "despite its name)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerRules:
    """The planning rules of one vLLM release (``vllm/v1/core/kv_cache_utils.py`` in 0.26;
    ``kv_cache_planning.py`` and ``kv_cache_utils.py`` in 0.33 and 0.34)."""

    vllm_version: str
    """``"0.26"``, ``"0.33"`` or ``"0.34"``."""

    null_block_held_back: bool
    """0.33+: ``get_kv_cache_configs`` checks and auto-fits with ``available -
    _pool_bytes_per_block_from_builder(...)`` (the BlockPool's null block); 0.26 used all
    of ``available``."""

    single_backing_allocation: bool
    """0.33+: one backing allocation per worker, described per (group, spec) by
    ``KVCacheTensor(size, layers, layer_stride, block_stride, offset, host_resident)``
    (``get_kv_cache_config_from_groups``, ``_get_kv_cache_bytes_per_block``); 0.26: a
    tensor per layer slot (``KVCacheTensor(size, shared_by)``) or the packed layout."""

    pads_any_attention_page: bool
    """0.33+: ``unify_kv_cache_spec_page_size`` pads any non-MLA attention page; 0.26 only
    a spec with ``indexes_kv_by_block_stride``."""

    promotes_local_specs: bool
    """0.33+: ``unify_hybrid_kv_cache_specs`` -> ``_promote_local_kv_cache_specs`` (every
    spec field kept, the full layers' block size, split by DCP sharding); 0.26 rebuilt
    window/chunk specs with fewer fields (``indexes_kv_by_block_stride`` lost)."""

    merges_compatible_buckets: bool
    """0.33+: ``_get_kv_cache_groups_uniform_page_size`` merges buckets whose specs merge
    (e.g. full attention with and without a window); 0.26 bucketed by equal specs only."""

    mamba_uniform_needs_equal_states: bool
    """0.33+: ``MambaSpec.is_uniform_with_collection`` also compares page size, prefill
    checkpoint blocks and alignment, state alignment and TP replication; 0.26 compared
    ``num_speculative_blocks`` only (``vllm/v1/kv_cache_interface.py``)."""

    deepseek_v4_grouping: bool
    """0.26: ``group_and_unify_kv_cache_specs`` (the DeepSeek-V4 path); 0.33+ has the
    block-outermost packed path instead, which the LBNHC layout never takes."""

    hidden_state_block_divides_groups: bool
    """0.33+: a hidden-state layer's block size is the largest divisor of the groups'
    gcd block size that fits the page (``_largest_divisor_at_most``, after
    ``_ensure_min_page_size``); 0.26: ``max(common_page // per_token, 1)``."""

    v2_model_runner_only: bool
    """0.33+: ``VllmConfig.max_concurrent_batches`` is ``pp + 1`` under async scheduling
    (Model Runner V2; 0.34 has no V1 runner); 0.26's V1 runner gave ``pp`` (2 when
    ``pp == 1``)."""

    memory_from_pool_bytes_per_block: bool
    """0.33+: ``_max_memory_usage_bytes_from_groups`` = pool bytes per block x the sum of
    the groups' pages; 0.26 had three formulas (uniform type, packed, equal groups)."""

    concurrency_sums_group_blocks: bool
    """0.33+: ``get_max_concurrency_for_kv_cache_config`` = ``num_blocks / sum(cdiv(mem,
    page))`` over groups; 0.26: ``num_blocks / cdiv(layers x sum(mem), layers x page)``."""

    mamba_backoff_keyed_on_align: bool
    """0.33+: ``resolve_kv_cache_block_sizes`` backs off to the scheduler block size when a
    Mamba spec's ``mamba_cache_mode != "align"``; 0.26: when a Mamba group's block size
    differs from ``cache_config.block_size``."""

    block_sizes_from_prefix_cacheable_groups: bool
    """0.33+: only prefix-cacheable groups enter the gcd, DCP scales only ``dcp_sharded``
    specs, a single group's stray ``prefix_match_unit`` is refused, and
    ``cache_config.block_size`` becomes the smallest prefix-cacheable group block size
    (``EngineCore._initialize_kv_caches``); 0.26 scaled every attention group by DCP."""

    sets_extra_retained_tokens: bool
    """0.33+: ``get_global_kv_cache_groups`` sets ``SlidingWindowSpec.extra_retained_tokens``
    and marks groups holding ``is_draft`` layers as EAGLE groups."""

    more_memory_hint: str | None
    """The hint sentence of the not-enough-memory errors: None for the 0.26/0.33 wording,
    else 0.34's ``_more_kv_cache_memory_hint`` text."""


VLLM_0_26_RULES = PlannerRules(
    vllm_version="0.26",
    null_block_held_back=False,
    single_backing_allocation=False,
    pads_any_attention_page=False,
    promotes_local_specs=False,
    merges_compatible_buckets=False,
    mamba_uniform_needs_equal_states=False,
    deepseek_v4_grouping=True,
    hidden_state_block_divides_groups=False,
    v2_model_runner_only=False,
    memory_from_pool_bytes_per_block=False,
    concurrency_sums_group_blocks=False,
    mamba_backoff_keyed_on_align=False,
    block_sizes_from_prefix_cacheable_groups=False,
    sets_extra_retained_tokens=False,
    more_memory_hint=None,
)

VLLM_0_33_RULES = replace(
    VLLM_0_26_RULES,
    vllm_version="0.33",
    null_block_held_back=True,
    single_backing_allocation=True,
    pads_any_attention_page=True,
    promotes_local_specs=True,
    merges_compatible_buckets=True,
    mamba_uniform_needs_equal_states=True,
    deepseek_v4_grouping=False,
    hidden_state_block_divides_groups=True,
    v2_model_runner_only=True,
    memory_from_pool_bytes_per_block=True,
    concurrency_sums_group_blocks=True,
    mamba_backoff_keyed_on_align=True,
    block_sizes_from_prefix_cacheable_groups=True,
    sets_extra_retained_tokens=True,
)

VLLM_0_34_RULES = replace(VLLM_0_33_RULES, vllm_version="0.34", more_memory_hint=HINT_0_34)

PLANNER_RULES: dict[str, PlannerRules] = {
    rules.vllm_version: rules for rules in (VLLM_0_26_RULES, VLLM_0_33_RULES, VLLM_0_34_RULES)
}


def planner_rules(vllm_version: str) -> PlannerRules:
    """The rules record of a release (``"0.34"`` or ``"0.34.0"``); unknown names raise
    :class:`~kvpure.versions.UnknownVllmVersionError`."""
    found = PLANNER_RULES.get(vllm_version)  # the normalized name: one dict look-up
    if found is not None and type(vllm_version) is str:
        return found
    return PLANNER_RULES[normalize_vllm_version(vllm_version, field="vllm_version")]


__all__ = [
    "HINT_0_34",
    "PLANNER_RULES",
    "VLLM_0_26_RULES",
    "VLLM_0_33_RULES",
    "VLLM_0_34_RULES",
    "PlannerRules",
    "planner_rules",
]
