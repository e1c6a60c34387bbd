"""Hypothesis strategies for KV cache specs, layer layouts and planner settings.

Reusable by any test: ``specs()`` draws any single spec kind; ``layouts()``
draws whole models (layer name -> spec, in order) of the shapes vLLM plans:
uniform, uniform-type, hybrid window/chunk/full, Mamba hybrids aligned the
way vLLM's platform aligns them, MLA, cross attention, sink and hidden-state
layers; ``worker_splits()`` cuts a layout into pipeline and tensor parallel
workers.
"""

from __future__ import annotations

import itertools
import math
from typing import TypedDict

from hypothesis import strategies as st

from kvpure.settings import PlannerSettings
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    CrossAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    KVDtype,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from kvpure.specs.layer_map import LayerMap

DTYPES = [KVDtype.BFLOAT16, KVDtype.FLOAT16, KVDtype.FLOAT32, KVDtype.FLOAT8_E4M3FN, KVDtype.UINT8]
block_sizes = st.sampled_from([1, 8, 16, 32, 64, 128])
heads = st.sampled_from([1, 2, 4, 8, 16])
head_sizes = st.sampled_from([32, 64, 80, 96, 128, 256])
dtypes = st.sampled_from(DTYPES)
quant_modes = st.sampled_from(list(KVQuantMode))
windows = st.integers(min_value=1, max_value=8192)


class AttentionFields(TypedDict):
    """Keyword arguments every attention spec takes."""

    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: KVDtype
    kv_quant_mode: KVQuantMode
    indexes_kv_by_block_stride: bool


def _with(base: AttentionFields, **changes: object) -> AttentionFields:
    out = base.copy()
    out.update(changes)  # type: ignore[typeddict-item]  # keys and types as AttentionFields
    return out


@st.composite
def attention_fields(draw: st.DrawFn) -> AttentionFields:
    """The fields every attention spec has."""
    return {
        "block_size": draw(block_sizes),
        "num_kv_heads": draw(heads),
        "head_size": draw(head_sizes),
        "dtype": draw(dtypes),
        "kv_quant_mode": draw(quant_modes),
        "indexes_kv_by_block_stride": draw(st.booleans()),
    }


@st.composite
def full_specs(draw: st.DrawFn) -> FullAttentionSpec:
    return FullAttentionSpec(
        **draw(attention_fields()),
        head_size_v=draw(st.none() | head_sizes),
        non_causal=draw(st.booleans()),
    )


@st.composite
def sliding_window_specs(draw: st.DrawFn) -> SlidingWindowSpec:
    return SlidingWindowSpec(**draw(attention_fields()), sliding_window=draw(windows))


@st.composite
def chunked_specs(draw: st.DrawFn) -> ChunkedLocalAttentionSpec:
    return ChunkedLocalAttentionSpec(**draw(attention_fields()), attention_chunk_size=draw(windows))


@st.composite
def cross_specs(draw: st.DrawFn) -> CrossAttentionSpec:
    return CrossAttentionSpec(**draw(attention_fields()))


@st.composite
def sink_specs(draw: st.DrawFn) -> SinkFullAttentionSpec:
    return SinkFullAttentionSpec(
        **draw(attention_fields()), sink_len=draw(st.none() | st.integers(0, 64))
    )


@st.composite
def mla_specs(draw: st.DrawFn) -> MLAAttentionSpec:
    block_size = draw(st.sampled_from([16, 64, 128, 256]))
    return MLAAttentionSpec(
        block_size=block_size,
        num_kv_heads=1,
        head_size=draw(st.sampled_from([512, 576])),
        dtype=draw(st.sampled_from([KVDtype.BFLOAT16, KVDtype.UINT8])),
        cache_dtype_str=draw(st.sampled_from([None, "fp8_ds_mla"])),
        model_version=draw(st.sampled_from([None, "deepseek_v4"])),
        compress_ratio=draw(st.sampled_from([1, 4, 16])),
        alignment=draw(st.sampled_from([None, 512, 576])),
    )


@st.composite
def swa_mla_specs(draw: st.DrawFn) -> SlidingWindowMLASpec:
    return SlidingWindowMLASpec(
        block_size=draw(st.sampled_from([4, 8, 64])),
        num_kv_heads=1,
        head_size=draw(st.sampled_from([512, 1024])),
        dtype=draw(st.sampled_from([KVDtype.UINT8, KVDtype.FLOAT32])),
        sliding_window=draw(st.sampled_from([8, 128])),
        cache_dtype_str=draw(st.sampled_from([None, "fp8_ds_mla"])),
        model_version=draw(st.sampled_from([None, "deepseek_v4"])),
        alignment=draw(st.sampled_from([None, 576])),
    )


@st.composite
def hidden_specs(draw: st.DrawFn) -> HiddenStateCacheSpec:
    return HiddenStateCacheSpec(
        block_size=draw(block_sizes),
        num_kv_heads=1,
        head_size=draw(st.sampled_from([2048, 4096])),
        dtype=KVDtype.BFLOAT16,
    )


@st.composite
def mamba_specs(draw: st.DrawFn) -> MambaSpec:
    shapes = draw(
        st.lists(
            st.lists(st.integers(1, 64), min_size=1, max_size=3).map(tuple), min_size=1, max_size=3
        )
    )
    return MambaSpec(
        block_size=draw(st.sampled_from([16, 512, 8192])),
        shapes=tuple(shapes),
        dtypes=tuple(draw(dtypes) for _ in shapes),
        mamba_cache_mode=draw(st.sampled_from(["none", "align", "all"])),
        num_speculative_blocks=draw(st.integers(0, 3)),
    )


def specs() -> st.SearchStrategy[KVCacheSpec]:
    """Any single layer spec of any kind."""
    return st.one_of(
        full_specs(), sliding_window_specs(), chunked_specs(), cross_specs(), sink_specs(),
        mla_specs(), swa_mla_specs(), hidden_specs(), mamba_specs(),
    )  # fmt: skip


def _names(n: int, prefix: str = "model.layers") -> list[str]:
    return [f"{prefix}.{i}.attn" for i in range(n)]


@st.composite
def layouts(draw: st.DrawFn) -> LayerMap[KVCacheSpec]:
    """A whole model's layers, in order, of a shape vLLM can plan."""
    family = draw(
        st.sampled_from(
            ["uniform", "uniform_type", "hybrid", "mamba", "mla", "cross", "sink", "hidden"]
        )
    )
    n = draw(st.integers(1, 48))
    base = draw(attention_fields())
    base["kv_quant_mode"] = KVQuantMode.NONE
    full = FullAttentionSpec(**base)
    pairs: list[tuple[str, KVCacheSpec]]
    if family == "uniform":
        pairs = [(name, full) for name in _names(n)]
    elif family == "uniform_type":
        other = FullAttentionSpec(
            **_with(base, num_kv_heads=draw(heads), head_size=draw(head_sizes))
        )
        picks = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        pairs = [(name, other if p else full) for name, p in zip(_names(n), picks, strict=True)]
    elif family == "hybrid":
        kinds: list[KVCacheSpec] = [full]
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                kinds.append(SlidingWindowSpec(**base, sliding_window=draw(windows)))
            else:
                kinds.append(ChunkedLocalAttentionSpec(**base, attention_chunk_size=draw(windows)))
        idx = draw(st.lists(st.integers(0, len(kinds) - 1), min_size=n, max_size=n))
        pairs = [(name, kinds[i]) for name, i in zip(_names(n), idx, strict=True)]
    elif family == "mamba":
        # Platform alignment: the attention block covers the Mamba state; the state page pads.
        state_shapes = (
            (draw(st.sampled_from([1024, 4096])), 3),
            (draw(st.sampled_from([8, 32])), 64, 64),
        )
        state = sum(math.prod(shape) for shape in state_shapes) * 2
        one_token = 2 * base["num_kv_heads"] * base["head_size"] * 2
        attn_bs = 16 * -(-state // (16 * one_token))
        attn = FullAttentionSpec(**_with(base, block_size=attn_bs, dtype=KVDtype.BFLOAT16))
        page = attn.page_size_bytes
        mamba = MambaSpec(
            block_size=attn_bs,
            shapes=state_shapes,
            dtypes=(KVDtype.BFLOAT16, KVDtype.BFLOAT16),
            page_size_padded=page if page != state else None,
        )
        ratio = draw(st.integers(2, 8))
        pairs = [(name, attn if i % ratio == 0 else mamba) for i, name in enumerate(_names(n))]
    elif family == "mla":
        spec = draw(mla_specs())
        pairs = [(name, spec) for name in _names(n)]
    elif family == "cross":
        cross = CrossAttentionSpec(**base)
        pairs = []
        for i in range(n):
            pairs += [(f"decoder.{i}.self_attn", full), (f"decoder.{i}.cross_attn", cross)]
    elif family == "sink":
        sink = SinkFullAttentionSpec(**base, sink_len=4)
        pairs = [(name, sink if i % 2 else full) for i, name in enumerate(_names(n))]
    else:
        # As extract_hidden_states declares it: same block size, a page of at least one token.
        attn = FullAttentionSpec(
            **_with(base, block_size=16, num_kv_heads=draw(st.sampled_from([4, 8])),
                    head_size=draw(st.sampled_from([64, 128])), dtype=KVDtype.BFLOAT16)
        )  # fmt: skip
        hidden = HiddenStateCacheSpec(
            block_size=16, num_kv_heads=1, head_size=draw(st.sampled_from([1024, 2048, 4096])),
            dtype=KVDtype.BFLOAT16,
        )  # fmt: skip
        pairs = [(name, attn) for name in _names(n)]
        pairs.append(("hidden_states_cache.attn", hidden))
    return LayerMap.from_pairs(pairs)


@st.composite
def worker_splits(
    draw: st.DrawFn, layout: LayerMap[KVCacheSpec]
) -> tuple[LayerMap[KVCacheSpec], ...]:
    """The layout as pipeline stages (contiguous cuts), each repeated for tensor parallelism."""
    names = layout.names
    num_stages = draw(st.integers(1, min(3, len(names))))
    cuts = (
        sorted(
            draw(
                st.sets(
                    st.integers(1, len(names) - 1), min_size=num_stages - 1, max_size=num_stages - 1
                )
            )
        )
        if num_stages > 1
        else []
    )
    bounds = [0, *cuts, len(names)]
    stages = [layout.subset(names[a:b]) for a, b in itertools.pairwise(bounds)]
    tp = draw(st.integers(1, 2))
    return tuple(stage for stage in stages for _ in range(tp))


@st.composite
def planner_settings(draw: st.DrawFn) -> PlannerSettings:
    """Settings without auto-fit or override (those change what memory means)."""
    return PlannerSettings(
        block_size=16,
        max_model_len=draw(st.sampled_from([16, 512, 4096, 32768])),
        max_num_batched_tokens=draw(st.sampled_from([256, 2048, 8192])),
        max_num_encoder_input_tokens=draw(st.sampled_from([1500, 8192])),
        async_scheduling=draw(st.booleans()),
        pipeline_parallel_size=draw(st.integers(1, 2)),
        enable_prefix_caching=draw(st.booleans()),
        vllm_version="0.26",
    )
