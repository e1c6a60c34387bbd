"""Properties of vLLM 0.33/0.34 planning over random layouts (hypothesis).

- the null block is held back: a max-length request fits in ``num_blocks - 1`` blocks,
  and a refusal reports the memory less one pool block;
- one more block would not fit in the memory given;
- one backing allocation: every tensor is the whole pool, every layer is in exactly
  one tensor, and each tensor's layers end inside the pool;
- 0.34 never fits a longer auto-fitted max_model_len than 0.26 on a single-group model.
"""

from __future__ import annotations

import dataclasses

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvpure.errors import AutoFitError, InsufficientKVCacheMemoryError, InvalidFieldError
from kvpure.interop.spec_json import parse_kv_cache_spec, render_kv_cache_spec
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.planning.tensors import pool_bytes_per_block
from kvpure.settings import AUTO_FIT_MAX_MODEL_LEN, PlannerSettings
from kvpure.specs import FullAttentionSpec, KVCacheSpec, KVDtype
from kvpure.specs.layer_map import LayerMap
from tests.strategies_specs import layouts

VERSIONS = st.sampled_from(["0.33", "0.34"])


def as_0_34(layout: LayerMap[KVCacheSpec]) -> LayerMap[KVCacheSpec]:
    """The layout as vLLM 0.34 reads its JSON (refused specs are skipped by the caller)."""
    return LayerMap.from_pairs(
        (
            name,
            parse_kv_cache_spec(
                render_kv_cache_spec(spec, vllm_version="0.26"), vllm_version="0.34"
            ),
        )
        for name, spec in layout.ordered_items()
    )


@st.composite
def layouts_0_34(draw: st.DrawFn) -> LayerMap[KVCacheSpec]:
    layout = draw(layouts())
    try:
        return as_0_34(layout)
    except InvalidFieldError:
        assume(False)
        raise


def _settings(version: str, max_model_len: int) -> PlannerSettings:
    return PlannerSettings(
        block_size=16,
        max_model_len=max_model_len,
        max_num_batched_tokens=256,
        max_num_encoder_input_tokens=1500,
        vllm_version=version,
    )


@settings(max_examples=40, deadline=None)
@given(layouts_0_34(), VERSIONS, st.sampled_from([16, 512, 4096]), st.integers(1, 400))
def test_null_block_held_back_and_one_more_block_would_not_fit(
    layout: LayerMap[KVCacheSpec], version: str, max_model_len: int, blocks: int
) -> None:
    settings_ = _settings(version, max_model_len)
    try:
        probe = get_kv_cache_configs(settings_, [layout], [1 << 50])
    except (ValueError, NotImplementedError):
        probe = None
    assume(probe is not None)
    assert probe is not None
    groups = probe.kv_cache_configs[0].kv_cache_groups
    assume(bool(groups))
    per_block = pool_bytes_per_block(settings_, groups)
    assume(per_block > 0)
    memory = blocks * per_block + blocks % 7  # a few stray bytes never make a block
    refused: InsufficientKVCacheMemoryError | None = None
    try:
        plan = get_kv_cache_configs(settings_, [layout], [memory])
    except InsufficientKVCacheMemoryError as err:
        refused = err
    if refused is not None:
        assert refused.available_bytes == memory - per_block  # the null block is held back
        assert refused.needed_bytes > memory - per_block
        return
    config = plan.kv_cache_configs[0]
    facts = plan.workers[0]
    assert facts.pool_bytes_per_block == per_block
    assert config.num_blocks == blocks
    assert (config.num_blocks + 1) * per_block > memory
    assert facts.max_memory_usage_bytes_from_groups <= (config.num_blocks - 1) * per_block
    seen: list[str] = []
    for tensor in config.kv_cache_tensors:
        assert tensor.size == config.num_blocks * per_block
        assert tensor.offset + len(tensor.shared_by) * tensor.layer_stride <= tensor.size
        assert tensor.layer_stride == tensor.block_stride * config.num_blocks
        seen.extend(tensor.shared_by)
    assert sorted(seen) == sorted(layout.names)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 8),
    st.sampled_from([1, 2, 8]),
    st.sampled_from([64, 128]),
    st.integers(2, 5000),
    st.sampled_from([1024, 8192, 32768]),
)
def test_0_34_fits_no_longer_than_0_26(
    layers: int, heads: int, head_size: int, blocks: int, max_model_len: int
) -> None:
    spec = FullAttentionSpec(
        block_size=16, num_kv_heads=heads, head_size=head_size, dtype=KVDtype.BFLOAT16
    )
    layout = LayerMap.from_pairs((f"model.layers.{i}.attn", spec) for i in range(layers))
    memory = blocks * spec.page_size_bytes * layers
    fitted: dict[str, int] = {}
    for version in ("0.26", "0.34"):
        auto = dataclasses.replace(
            _settings(version, max_model_len), original_max_model_len=AUTO_FIT_MAX_MODEL_LEN
        )
        try:
            fitted[version] = get_kv_cache_configs(auto, [layout], [memory]).final_max_model_len
        except AutoFitError:
            fitted[version] = 0
    assert fitted["0.34"] <= fitted["0.26"]
    # One block of 16 tokens is the null block: 0.34 fits exactly one block's tokens less
    # whenever 0.26 was limited by memory.
    if 0 < fitted["0.26"] < max_model_len:
        assert fitted["0.34"] == fitted["0.26"] - 16
