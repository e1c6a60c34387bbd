"""The prefix cache's rules per vLLM release: one frozen record each, looked up by name.

A release's ``KVCacheManager`` and the scheduler steps that drive it differ from
another's in a handful of rules. Each rule that changed is a field of
:class:`CacheRules`, named after what changed, and one function below holds
both behaviours, switched by that field (the vLLM file and function of each
side in its docstring). The manager, the coordinator, the block pool and the
replay read the record they were built with; nothing asks "which version".

0.33 and 0.34 behave identically here (the hash profiles differ only in the
int32 rule for token ids, which the hasher applies); 0.34's record is 0.33's
with its own hash profile (``VLLM_0_34``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from kvpure.hashing import VLLM_0_26, VLLM_0_33, VLLM_0_34, VllmHashProfile
from kvpure.versions import normalize_vllm_version

__all__ = [
    "CACHE_RULES",
    "CACHE_RULES_0_26",
    "CACHE_RULES_0_33",
    "CACHE_RULES_0_34",
    "CacheRules",
    "eagle_hit_max_length",
    "get_cache_rules",
    "mamba_align_chunk_end",
    "mamba_last_cache_position",
    "manager_use_eagle",
    "num_hash_lookahead_tokens",
    "partial_tail_boundary",
    "use_eagle_block_drop",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRules:
    """The prefix-cache rules of one vLLM release (see each field for both sides)."""

    vllm_version: str
    """The release, ``X.Y``."""
    hash_profile: VllmHashProfile
    """How request blocks are hashed and event extra keys written (tagged from 0.33)."""
    stats_at_admission: bool
    """Prefix-cache stats recorded after a successful admission only (0.33+), not at
    every lookup (0.26). See :func:`kvpure.cache.manager.KVCacheManager.get_computed_blocks`."""
    lookahead_hashes: bool
    """EAGLE/MTP servers hash each block with the L tokens after it (0.33+), and the
    manager then drops no trailing block. See :func:`num_hash_lookahead_tokens`."""
    eagle_block_drop_methods: frozenset[str]
    """Speculative methods whose trailing matched block is dropped. See
    :func:`use_eagle_block_drop`."""
    eagle_groups_drop_only_with_use_eagle: bool
    """Groups marked ``is_eagle_group`` drop only when the manager got ``use_eagle``
    (0.33+: ``KVCacheCoordinator.drop_eagle_group_ids``); 0.26 drops in them always."""
    eagle_margin_capped_by_hashes: bool
    """The hybrid EAGLE look-past is capped by the request's hashed tokens (0.33+),
    not by the hit limit (0.26). See :func:`eagle_hit_max_length`."""
    mamba_align_split_at_hittable_boundary: bool
    """The Mamba "align" prefill split stops at the last boundary a later request can
    hit (0.33+). See :func:`mamba_last_cache_position`, :func:`mamba_align_chunk_end`."""
    event_fields_0_33: bool
    """``BlockStored`` carries ``ownership``, ``session_id``, ``lookahead_token_ids``
    and ``BlockRemoved`` ``ownership`` (0.33+: ``vllm/distributed/kv_events.py``)."""
    prefix_cache_stats_has_hits_by_source: bool
    """``PrefixCacheStats.hits_by_source`` exists (0.33+: ``vllm/v1/metrics/stats.py``)."""
    partial_tail_before_last_token: bool
    """The partial tail a full-attention group caches when its block is larger than the
    hash block (``FullAttentionManager._cache_partial_tail_block``, every release) ends at
    the last hash boundary before the prompt's last token, capped by the hashes (0.33+),
    not at the last one within the prompt (0.26). See :func:`partial_tail_boundary`."""
    partial_tail_event_scans_last_mm_item: bool
    """The partial tail's BlockStored reads its multimodal extra keys from the request's
    last item on (0.26: ``BlockPool.cache_partial_block`` passes ``start_mm_idx=-1``
    past the first hash block), not from the first item in the window (0.33+)."""
    header_lookahead_and_layout: bool
    """The replay's header names ``num_hash_lookahead_tokens`` and ``kv_cache_layout``."""
    mamba_caching_requires_align: bool
    """A Mamba group with prefix caching on must run in "align" mode (0.33+:
    ``MambaManager.__init__`` asserts it); 0.26 builds the manager in any mode."""


CACHE_RULES_0_26 = CacheRules(
    vllm_version="0.26",
    hash_profile=VLLM_0_26,
    stats_at_admission=False,
    lookahead_hashes=False,
    eagle_block_drop_methods=frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"}),
    eagle_groups_drop_only_with_use_eagle=False,
    eagle_margin_capped_by_hashes=False,
    mamba_align_split_at_hittable_boundary=False,
    event_fields_0_33=False,
    prefix_cache_stats_has_hits_by_source=False,
    partial_tail_before_last_token=False,
    partial_tail_event_scans_last_mm_item=True,
    header_lookahead_and_layout=False,
    mamba_caching_requires_align=False,
)
"""vLLM 0.26.0."""

CACHE_RULES_0_33 = replace(
    CACHE_RULES_0_26,
    vllm_version="0.33",
    hash_profile=VLLM_0_33,
    stats_at_admission=True,
    lookahead_hashes=True,
    eagle_block_drop_methods=frozenset({"eagle", "eagle3", "mtp"}),
    eagle_groups_drop_only_with_use_eagle=True,
    eagle_margin_capped_by_hashes=True,
    mamba_align_split_at_hittable_boundary=True,
    event_fields_0_33=True,
    prefix_cache_stats_has_hits_by_source=True,
    partial_tail_before_last_token=True,
    partial_tail_event_scans_last_mm_item=False,
    header_lookahead_and_layout=True,
    mamba_caching_requires_align=True,
)
"""vLLM 0.33.0."""

CACHE_RULES_0_34 = replace(CACHE_RULES_0_33, vllm_version="0.34", hash_profile=VLLM_0_34)
"""vLLM 0.34.0: 0.33's cache-manager rules; its hash profile holds token ids as int32
(the hashes of such ids are 0.33's; others are refused)."""

CACHE_RULES: Mapping[str, CacheRules] = MappingProxyType(
    {r.vllm_version: r for r in (CACHE_RULES_0_26, CACHE_RULES_0_33, CACHE_RULES_0_34)}
)


def get_cache_rules(vllm_version: str) -> CacheRules:
    """The rules of ``vllm_version`` (``"0.34"``, ``"0.34.0"``...); an unknown one raises
    :class:`kvpure.versions.UnknownVllmVersionError`."""
    return CACHE_RULES[normalize_vllm_version(vllm_version)]


# -- the rules that changed, each with both behaviours ---------------------------------------


def use_eagle_block_drop(
    rules: CacheRules, method: str | None, *, disable_eagle_block_drop: bool = False
) -> bool:
    """Whether the speculative ``method`` drops the trailing matched block.

    0.26 (``vllm/v1/core/sched/scheduler.py`` ``Scheduler.__init__``: ``use_eagle =
    speculative_config.use_eagle()``): eagle, eagle3, mtp, dflash, dspark. 0.33+
    (``vllm/config/speculative.py`` ``SpeculativeConfig.use_eagle_block_drop``):
    eagle, eagle3, mtp only (DFlash/DSpark drafts do not read the next token), and not
    with ``disable_eagle_block_drop``.
    """
    if method not in rules.eagle_block_drop_methods:
        return False
    return not (rules.lookahead_hashes and disable_eagle_block_drop)


def num_hash_lookahead_tokens(
    rules: CacheRules,
    *,
    block_drop: bool,
    enable_prefix_caching: bool,
    disable_lookahead_block_hashes: bool = False,
    num_prefill_lookahead_tokens: int = 1,
) -> int:
    """L, the tokens after each block its hash covers.

    0.26: none (``get_request_block_hasher(block_size, hash_fn)``). 0.33+
    (``vllm/config/vllm.py`` ``VllmConfig._resolve_num_hash_lookahead_tokens``): the
    drafter's prefill lookahead (1 for EAGLE/EAGLE3/single-module MTP) when the method
    uses the block drop, lookahead hashes are not disabled and prefix caching is on
    (no KV connector: the replay refuses those).
    """
    if not rules.lookahead_hashes or not block_drop or disable_lookahead_block_hashes:
        return 0
    return num_prefill_lookahead_tokens if enable_prefix_caching else 0


def manager_use_eagle(rules: CacheRules, *, block_drop: bool, num_lookahead_hashes: int) -> bool:
    """The ``use_eagle`` the ``KVCacheManager`` is built with.

    0.26 (``Scheduler.__init__``): the method's ``use_eagle()``. 0.33+
    (``Scheduler.__init__``: "lookahead hashes prove the boundary token"): the block
    drop only when L == 0.
    """
    if rules.lookahead_hashes and num_lookahead_hashes > 0:
        return False
    return block_drop


def eagle_hit_max_length(
    rules: CacheRules,
    *,
    current: int,
    block_size: int,
    max_cache_hit_length: int,
    num_hashed_tokens: int,
) -> int:
    """How far an EAGLE group of a hybrid model looks before dropping a block.

    0.26 (``vllm/v1/core/kv_cache_coordinator.py``
    ``HybridKVCacheCoordinator.find_longest_cache_hit``): ``min(current + block,
    max_cache_hit_length)``. 0.33+ (same function, ``eagle_proof_margin``): ``min(current
    + block, len(block_hashes) * hash_block_size)``.
    """
    cap = num_hashed_tokens if rules.eagle_margin_capped_by_hashes else max_cache_hit_length
    return min(current + block_size, cap)


def mamba_last_cache_position(
    rules: CacheRules,
    *,
    num_tokens: int,
    block_size: int,
    drop_eagle_block: bool,
    num_lookahead_hashes: int,
) -> int:
    """The last block boundary a Mamba "align" prefill must stop at.

    0.26 (``vllm/v1/core/sched/scheduler.py`` ``Scheduler._mamba_block_aligned_split``):
    ``num_tokens // block * block``, one block less with EAGLE. 0.33+
    (``vllm/v1/kv_cache_interface.py`` ``get_mamba_prefill_checkpoint_position``): the
    last *hittable* boundary, ``(num_tokens - max(1, L)) // block * block`` (the last
    token is recomputed and a block's hash needs its L lookahead tokens), or with the
    EAGLE drop ``num_tokens // block * block - block``.
    """
    if not rules.mamba_align_split_at_hittable_boundary or drop_eagle_block:
        position = num_tokens - num_tokens % block_size
        return max(position - block_size, 0) if drop_eagle_block else position
    limit = num_tokens - max(1, num_lookahead_hashes)
    return max(limit // block_size * block_size, 0)


def mamba_align_chunk_end(
    rules: CacheRules,
    *,
    start: int,
    end: int,
    block_size: int,
    last_cache_position: int,
    prefill_end: int,
    max_prefill_tokens: int,
) -> int:
    """A Mamba "align" chunk's end before the mandatory stops: floored to a block.

    0.26 (``Scheduler._mamba_block_aligned_split``): floored when it ends before the
    last cache position. 0.33+ (same function): floored when it ends before the prefill
    end, unless that leaves nothing and a block is wider than a prefill chunk.
    """
    if not rules.mamba_align_split_at_hittable_boundary:
        return end // block_size * block_size if end < last_cache_position else end
    if end < prefill_end:
        aligned = end // block_size * block_size
        if aligned > start or block_size <= max_prefill_tokens:
            return aligned
    return end


def partial_tail_boundary(
    rules: CacheRules,
    *,
    num_prompt_tokens: int,
    num_hashes: int,
    hash_block_size: int,
    use_eagle: bool,
) -> int:
    """The prefix boundary (tokens) whose hash a full-attention group registers on the
    block holding it, when its block is larger than the hash block.

    0.26 (``vllm/v1/core/single_type_kv_cache_manager.py``
    ``FullAttentionManager._cache_partial_tail_block``): the last hash boundary within the
    prompt. 0.33+ (same function): a resend hits at most ``prompt - 1`` tokens (the whole
    prompt when the group drops an EAGLE hash unit), and no further than the hashes.
    """
    if not rules.partial_tail_before_last_token:
        return num_prompt_tokens // hash_block_size * hash_block_size
    limit = num_prompt_tokens if use_eagle else num_prompt_tokens - 1
    return min(limit // hash_block_size, num_hashes) * hash_block_size
