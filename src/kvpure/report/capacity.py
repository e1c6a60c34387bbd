"""The explained capacity report: what fits, and where the memory went.

:class:`CapacityReport` gathers, as data, what people keep asking vLLM's
logs for: blocks, token capacity, how many max-length requests run at once,
the (auto-fitted) max_model_len, the scheduler and hash block sizes, one
:class:`GroupReport` per KV cache group, the waste (padding layers, padded
pages, the reserved null block, memory left over) and one suggestion of what
to change to fit more. Every number comes from the planner's result (the
tests read both); the few derived here are simple sums over its tensors and
groups, explained next to each field.

:func:`build_capacity_report` makes one from the planner's
:class:`~kvpure.planning.KVCachePlan`;
``kvpure.report.text`` renders it and ``kvpure.report.model_plan`` builds it from
a config.json deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvpure.planning.log_lines import vllm_log_lines
from kvpure.planning.planner import KVCachePlan
from kvpure.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    cdiv,
    get_kv_cache_spec_kind,
)
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec

__all__ = [
    "CapacityReport",
    "GroupReport",
    "ModelSummary",
    "WasteReport",
    "build_capacity_report",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSummary:
    """The model and deployment behind a report (absent for a raw planning case)."""

    architecture: str
    num_attention_layers: int
    num_mamba_layers: int
    model_dtype: str
    kv_cache_dtype: str
    attention_backend: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    requested_max_model_len: int
    derived_max_model_len: int
    requested_block_size: int
    block_size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupReport:
    """One KV cache group of worker 0.

    ``blocks_per_request`` is ``cdiv(max_memory_usage_bytes, page_size_bytes)``:
    the blocks one request of max_model_len holds in this group.
    ``memory_share`` is this group's part of the blocks such a request holds
    over all groups (every block costs the same bytes, all groups sharing one
    block pool).
    """

    index: int
    kind: str
    spec_type: str
    layer_names: tuple[str, ...]
    block_size: int
    page_size_bytes: int
    unpadded_page_size_bytes: int
    window_tokens: int | None
    max_memory_usage_bytes: int
    blocks_per_request: int
    memory_share: float
    num_padding_layers: int

    @property
    def num_layers(self) -> int:
        """Layers in the group."""
        return len(self.layer_names)


@dataclass(frozen=True, slots=True, kw_only=True)
class WasteReport:
    """Memory of worker 0 that holds no KV data, in bytes.

    - ``padding_layers_bytes``: block slots of tensors a group has no layer
      for (groups are padded to the largest group's layer count), weighted by
      how many blocks each group holds for max-length requests;
    - ``padded_pages_bytes``: pages padded beyond their data (Mamba state
      padded to the attention page, attention pages padded to the largest),
      weighted the same way;
    - ``null_block_bytes``: block 0, which vLLM reserves as the null block;
    - ``unallocated_bytes``: available memory left over after the last whole block.
    """

    available_bytes: int
    used_bytes: int
    padding_layers_bytes: int
    padded_pages_bytes: int
    null_block_bytes: int
    unallocated_bytes: int

    @property
    def total_bytes(self) -> int:
        """All waste together."""
        return (
            self.padding_layers_bytes
            + self.padded_pages_bytes
            + self.null_block_bytes
            + self.unallocated_bytes
        )

    def percent(self, num_bytes: int) -> float:
        """``num_bytes`` as a percentage of the available memory."""
        return 100.0 * num_bytes / self.available_bytes if self.available_bytes else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityReport:
    """The explained capacity of one deployment (see the module docstring).

    ``vllm_log`` holds the lines vLLM would log while planning (level and
    message; a line repeated by several workers appears once), to compare
    with a server's log.
    """

    model: ModelSummary | None
    num_workers: int
    available_memory: tuple[int, ...]
    num_blocks: int
    block_bytes: int
    kv_cache_capacity_tokens: int
    max_concurrency: float
    max_model_len: int
    auto_fitted: bool
    scheduler_block_size: int
    hash_block_size: int
    groups: tuple[GroupReport, ...]
    waste: WasteReport
    suggestion: str
    vllm_log: tuple[str, ...] = ()

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: all but the null block."""
        return max(self.num_blocks - 1, 0)


def used_bytes(config: KVCacheConfig) -> int:
    """Bytes one worker allocates: every tensor, packed tensors once (they alias one buffer)."""
    plain = sum(t.size for t in config.kv_cache_tensors if t.block_stride == 0)
    packed = max((t.size for t in config.kv_cache_tensors if t.block_stride > 0), default=0)
    return plain + packed


def _layer_pages(group: KVCacheGroupSpec) -> tuple[tuple[int, int], ...]:
    """(page, unpadded page) bytes of each layer of a group."""
    spec = group.kv_cache_spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return tuple(
            (inner.page_size_bytes, _unpadded(inner))
            for inner in spec.kv_cache_specs.ordered_values()
        )
    return tuple((spec.page_size_bytes, _unpadded(spec)) for _ in group.layer_names)


def _unpadded(spec: KVCacheSpec) -> int:
    if isinstance(spec, AttentionSpec):
        return spec.unpadded_page_size_bytes
    if isinstance(spec, MambaSpec):
        return spec.state_size_bytes
    return spec.page_size_bytes


def _window(spec: KVCacheSpec) -> int | None:
    if isinstance(spec, SlidingWindowSpec):
        return spec.sliding_window
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return spec.attention_chunk_size
    return None


def build_capacity_report(
    plan: KVCachePlan,
    available_memory: tuple[int, ...],
    *,
    model: ModelSummary | None = None,
    suggestion: str = "",
) -> CapacityReport:
    """The report for a plan: its facts as the planner gives them, waste summed here.

    Groups list their layers on every worker (all pipeline stages); specs,
    memory, blocks and waste are worker 0's (every worker has the same block
    count after vLLM's equalisation).
    """
    config = plan.kv_cache_configs[0]
    facts = plan.workers[0]
    groups = plan.kv_cache_groups
    num_blocks = config.num_blocks
    used = used_bytes(config)
    block_bytes = used // num_blocks if num_blocks else 0
    max_layers = max((len(g.layer_names) for g in config.kv_cache_groups), default=0)
    blocks = [
        cdiv(mem, g.kv_cache_spec.page_size_bytes) if g.kv_cache_spec.page_size_bytes else 0
        for g, mem in zip(config.kv_cache_groups, facts.group_max_memory_usage_bytes, strict=True)
    ]
    total_blocks = sum(blocks)
    padding_fraction = 0.0
    padded_fraction = 0.0
    group_reports: list[GroupReport] = []
    for index, (group, worker_group, per_request) in enumerate(
        zip(groups, config.kv_cache_groups, blocks, strict=True)
    ):
        layer_pages = _layer_pages(worker_group)
        share = per_request / total_blocks if total_blocks else 0.0
        if block_bytes:
            slot_bytes = sum(page for page, _ in layer_pages)
            padded = sum(page - real for page, real in layer_pages)
            padding_fraction += share * max(block_bytes - slot_bytes, 0) / block_bytes
            padded_fraction += share * padded / block_bytes
        # Worker 0's spec (a uniform-type group holds only worker 0's layers there).
        spec = worker_group.kv_cache_spec
        uniform = isinstance(spec, UniformTypeKVCacheSpecs)
        group_reports.append(
            GroupReport(
                index=index,
                kind=get_kv_cache_spec_kind(spec).value,
                spec_type=type(spec).__name__,
                layer_names=group.layer_names,
                block_size=spec.block_size,
                page_size_bytes=spec.page_size_bytes,
                unpadded_page_size_bytes=_unpadded(spec) if not uniform else spec.page_size_bytes,
                window_tokens=_window(spec),
                max_memory_usage_bytes=facts.group_max_memory_usage_bytes[index],
                blocks_per_request=per_request,
                memory_share=share,
                num_padding_layers=0 if uniform else max_layers - len(worker_group.layer_names),
            )
        )
    available = available_memory[0]
    # Block 0 is never handed to a request, so waste is counted over the others.
    usable_used = used - block_bytes
    waste = WasteReport(
        available_bytes=available,
        used_bytes=used,
        padding_layers_bytes=int(padding_fraction * usable_used),
        padded_pages_bytes=int(padded_fraction * usable_used),
        null_block_bytes=block_bytes,
        unallocated_bytes=max(available - used, 0),
    )
    return CapacityReport(
        model=model,
        num_workers=len(plan.kv_cache_configs),
        available_memory=available_memory,
        num_blocks=num_blocks,
        block_bytes=block_bytes,
        kv_cache_capacity_tokens=facts.kv_cache_capacity_tokens or 0,
        max_concurrency=facts.max_concurrency or 0.0,
        max_model_len=plan.final_max_model_len,
        auto_fitted=plan.auto_fit is not None,
        scheduler_block_size=facts.scheduler_block_size,
        hash_block_size=facts.hash_block_size,
        groups=tuple(group_reports),
        waste=waste,
        suggestion=suggestion,
        vllm_log=tuple(dict.fromkeys(f"{ln.level} {ln.msg}" for ln in vllm_log_lines(plan))),
    )
