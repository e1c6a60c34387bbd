"""A model layout plus a deployment -> the per-worker specs vLLM would build.

:func:`derive_kv_cache_specs` does what vLLM's engine does between reading
config.json and calling ``get_kv_cache_configs``:

- picks the model dtype (float32 checkpoints are served in bfloat16) and the
  KV cache dtype (``fp8``/``fp8_e4m3`` -> float8_e4m3fn with per-tensor
  scales, ``fp8_e5m2`` -> float8_e5m2);
- divides KV heads by the tensor-parallel size (at least one head:
  replicated when TP exceeds the heads; MLA keeps its single latent head)
  and sizes recurrent states per worker (Mamba1/2, gated delta nets, Kimi
  delta attention: ``kvpure.models.derive_states``);
- for attention + Mamba hybrids, raises the attention block size until one
  attention page holds a Mamba state, pads the Mamba page to match, and gives
  Mamba layers ``block_size = max_model_len`` in cache mode ``none``
  (vLLM 0.26's ``_align_hybrid_block_size``);
- splits layers over pipeline stages as vLLM's ``get_pp_indices`` does (even
  shares; the remainder goes one layer each to the stages before the last,
  from the second-to-last backwards) and lists one spec map per worker, in
  rank order (pipeline-major, TP ranks repeating their stage's specs);
- builds the planner settings (``PlannerSettings``) with vLLM's names.

The choices made before any spec is sized (dtypes, backend, ``max_model_len``,
prefix caching and the Mamba cache mode, async scheduling) are in
``kvpure.models.derive_choices``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import AttentionBackend, Deployment
from kvpure.models.derive_choices import (
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
    pick_async_scheduling,
    pick_attention_backend,
    pick_max_model_len,
    pick_model_dtype,
    pick_prefix_and_mamba_mode,
)
from kvpure.models.derive_states import (
    cross_attention_spec,
    indexer_spec,
    state_backend,
    state_dtypes,
    state_shapes,
)
from kvpure.models.layout import (
    STATE_LAYER_TYPES,
    AttentionKind,
    AttentionLayer,
    ModelLayout,
    StateLayer,
)
from kvpure.serve.rules import serve_rules, uses_model_runner_v2
from kvpure.specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    KVDtype,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    cdiv,
    get_kv_quant_mode,
)
from kvpure.specs.kv_cache_config import AUTO_FIT_MAX_MODEL_LEN, PlannerSettings
from kvpure.specs.layer_map import LayerMap

__all__ = ["DerivedSpecs", "derive_kv_cache_specs", "pipeline_layer_ranges"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DerivedSpecs:
    """Everything the planner needs for one deployment of one model, and how it was chosen.

    ``kv_cache_specs`` and ``available_memory`` hold one entry per worker
    (rank order); ``pp_layer_ranges`` the ``[start, end)`` decoder layers of
    each pipeline stage; ``requested_block_size`` the block size before
    hybrid alignment (equal to ``settings.block_size`` when nothing was raised);
    ``mamba_state_bytes`` the unpadded Mamba state per layer (0 without Mamba).
    """

    layout: ModelLayout
    deployment: Deployment
    settings: PlannerSettings
    kv_cache_specs: tuple[LayerMap[KVCacheSpec], ...]
    available_memory: tuple[int, ...]
    pp_layer_ranges: tuple[tuple[int, int], ...]
    attention_backend: AttentionBackend
    model_dtype: KVDtype
    kv_cache_dtype: KVDtype
    requested_block_size: int
    mamba_state_bytes: int
    mamba_page_size_padded: int | None

    @property
    def num_workers(self) -> int:
        """Workers (GPUs): tensor x pipeline parallel size."""
        return len(self.kv_cache_specs)


def pipeline_layer_ranges(num_layers: int, pp_size: int) -> tuple[tuple[int, int], ...]:
    """vLLM's ``get_pp_indices`` for every stage: ``[start, end)`` per stage.

    Each stage gets ``num_layers // pp_size``; the remainder adds one layer
    each to the stages before the last, starting from the second-to-last
    (the last stage also runs the LM head). 61 layers on 4 stages: 15, 15, 16, 15.
    """
    if pp_size > num_layers:
        raise InvalidFieldError(
            field="pipeline_parallel_size",
            value=pp_size,
            reason=f"must not exceed the model's {num_layers} layers",
        )
    shares = [num_layers // pp_size] * pp_size
    for i in range(2, num_layers % pp_size + 2):
        shares[-i] += 1
    ranges: list[tuple[int, int]] = []
    start = 0
    for share in shares:
        ranges.append((start, start + share))
        start += share
    return tuple(ranges)


def _tp_kv_heads(layout: ModelLayout, layer: AttentionLayer, tp: int) -> int:
    if layer.kind in (AttentionKind.MLA, AttentionKind.MLA_INDEXER):
        return 1
    heads = layer.num_kv_heads
    if (heads >= tp and heads % tp) or (heads < tp and tp % heads):
        raise InvalidFieldError(
            field="tensor_parallel_size",
            value=tp,
            reason=f"{layout.architecture} has {heads} KV heads: TP must divide them "
            "or be a multiple of them",
        )
    return max(1, heads // tp)


def _state_bytes(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[KVDtype, ...]) -> int:
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=True):
        size = dtype.itemsize
        for dim in shape:
            size *= dim
        total += size
    return total


def _attention_spec(
    layer: AttentionLayer,
    *,
    block_size: int,
    num_kv_heads: int,
    dtype: KVDtype,
    cache_dtype: str,
    backend: AttentionBackend,
) -> KVCacheSpec:
    quant = get_kv_quant_mode(cache_dtype)
    by_stride = backend.indexes_kv_by_block_stride
    if layer.kind is AttentionKind.MLA:
        return MLAAttentionSpec(
            block_size=block_size,
            num_kv_heads=num_kv_heads,
            head_size=layer.head_size,
            dtype=dtype,
            kv_quant_mode=quant,
            indexes_kv_by_block_stride=by_stride,
            cache_dtype_str=None if cache_dtype == "auto" else cache_dtype,
        )
    if layer.sliding_window is not None:
        return SlidingWindowSpec(
            block_size=block_size,
            num_kv_heads=num_kv_heads,
            head_size=layer.head_size,
            head_size_v=layer.head_size_v,
            dtype=dtype,
            kv_quant_mode=quant,
            indexes_kv_by_block_stride=by_stride,
            sliding_window=layer.sliding_window,
        )
    if layer.attention_chunk_size is not None:
        return ChunkedLocalAttentionSpec(
            block_size=block_size,
            num_kv_heads=num_kv_heads,
            head_size=layer.head_size,
            dtype=dtype,
            kv_quant_mode=quant,
            indexes_kv_by_block_stride=by_stride,
            attention_chunk_size=layer.attention_chunk_size,
        )
    return FullAttentionSpec(
        block_size=block_size,
        num_kv_heads=num_kv_heads,
        head_size=layer.head_size,
        head_size_v=layer.head_size_v,
        dtype=dtype,
        kv_quant_mode=quant,
        indexes_kv_by_block_stride=by_stride,
    )


def derive_kv_cache_specs(layout: ModelLayout, deployment: Deployment) -> DerivedSpecs:
    """The per-worker specs and planner settings vLLM would use for this deployment."""
    if not isinstance(layout, ModelLayout):
        raise InvalidFieldError(
            field="layout",
            value=type(layout).__name__,
            reason="must be a ModelLayout: kvpure.model_layout(kvpure.parse_model_config(data))",
        )
    if not isinstance(deployment, Deployment):
        raise InvalidFieldError(
            field="deployment",
            value=type(deployment).__name__,
            reason="must be a kvpure.Deployment",
        )
    tp = deployment.tensor_parallel_size
    pp = deployment.pipeline_parallel_size
    rules = serve_rules(deployment.vllm_version)
    backend = pick_attention_backend(layout, deployment)
    if layout.num_attention_heads % tp:
        raise InvalidFieldError(
            field="tensor_parallel_size",
            value=tp,
            reason=f"must divide the {layout.num_attention_heads} attention heads "
            f"of {layout.architecture}",
        )
    model_dtype = pick_model_dtype(layout, deployment)
    cache_dtype = deployment.kv_cache_dtype
    kv_dtype = model_dtype if cache_dtype == "auto" else KV_CACHE_DTYPES[cache_dtype]
    ssm_name = deployment.mamba_ssm_cache_dtype
    if ssm_name == "auto":
        ssm_name = layout.ssm_cache_dtype or "auto"
    ssm_dtype = model_dtype if ssm_name == "auto" else MODEL_DTYPES[ssm_name]
    max_model_len = pick_max_model_len(layout, deployment, rules)
    requested_block_size = deployment.block_size or backend.default_block_size
    block_size = requested_block_size
    alignment = backend.kernel_block_alignment
    if layout.attention_layers and block_size % alignment:
        # vLLM's worker finds no kernel block size dividing the manager's and fails.
        raise InvalidFieldError(
            field="--block-size",
            value=block_size,
            reason=f"{backend.value} kernels need a multiple of {alignment} tokens",
        )

    mamba_layers = layout.mamba_layers
    attention_layers = layout.attention_layers
    prefix_caching, mamba_mode = pick_prefix_and_mamba_mode(layout, deployment, rules)
    mamba_state = 0
    mamba_padded: int | None = None
    if mamba_layers:
        first_state = mamba_layers[0]
        mamba_state = _state_bytes(
            state_shapes(first_state, tp), state_dtypes(first_state, model_dtype, ssm_dtype)
        )
    if mamba_layers and attention_layers:
        # The page of one token of the first attention layer, as vLLM sizes it.
        first = attention_layers[0]
        one_token = _attention_spec(
            AttentionLayer(
                index=first.index,
                name=first.name,
                kind=AttentionKind.MLA if first.kind is AttentionKind.MLA else AttentionKind.FULL,
                num_kv_heads=first.num_kv_heads,
                head_size=first.head_size,
                head_size_v=first.head_size_v,
            ),
            block_size=1,
            num_kv_heads=_tp_kv_heads(layout, first, tp),
            dtype=kv_dtype,
            cache_dtype=cache_dtype,
            backend=backend,
        ).page_size_bytes
        align = max(backend.kernel_block_alignment, block_size)
        if layout.uses_mla:
            align = max(align, rules.hybrid_mla_block_alignment)
        if mamba_mode == "all":
            chunk = lcm(layout.mamba_chunk_size or 256, align)
            block_size = chunk * cdiv(cdiv(mamba_state, one_token), chunk)
        else:
            block_size = align * cdiv(mamba_state, align * one_token)
        if block_size * one_token != mamba_state:
            mamba_padded = block_size * one_token

    mamba_block_size = max_model_len if mamba_mode == "none" else block_size

    def spec_of(layer: AttentionLayer | StateLayer) -> KVCacheSpec:
        if isinstance(layer, STATE_LAYER_TYPES):
            return MambaSpec(
                block_size=mamba_block_size,
                shapes=state_shapes(layer, tp),
                dtypes=state_dtypes(layer, model_dtype, ssm_dtype),
                page_size_padded=mamba_padded,
                mamba_type=state_backend(layer),
                mamba_cache_mode=mamba_mode,
            )
        if layer.kind is AttentionKind.MLA_INDEXER:
            return indexer_spec(layer, block_size)
        if layer.kind is AttentionKind.CROSS:
            return cross_attention_spec(
                layer,
                block_size=block_size,
                num_kv_heads=_tp_kv_heads(layout, layer, tp),
                dtype=kv_dtype,
                cache_dtype=cache_dtype,
                indexes_kv_by_block_stride=backend.indexes_kv_by_block_stride,
            )
        return _attention_spec(
            layer,
            block_size=block_size,
            num_kv_heads=_tp_kv_heads(layout, layer, tp),
            dtype=kv_dtype,
            cache_dtype=cache_dtype,
            backend=backend,
        )

    ranges = pipeline_layer_ranges(layout.num_hidden_layers, pp)
    stages = tuple(
        LayerMap.from_pairs(
            (layer.name, spec_of(layer)) for layer in layout.layers if start <= layer.index < end
        )
        for start, end in ranges
    )
    workers = tuple(stage for stage in stages for _ in range(tp))
    settings = PlannerSettings(
        block_size=block_size,
        enable_prefix_caching=prefix_caching,
        num_gpu_blocks_override=deployment.num_gpu_blocks_override,
        mamba_cache_mode=mamba_mode,
        cache_dtype=cache_dtype,
        pipeline_parallel_size=pp,
        tensor_parallel_size=tp,
        disable_hybrid_kv_cache_manager=not deployment.enable_hybrid_kv_cache_manager,
        max_num_batched_tokens=deployment.max_num_batched_tokens,
        max_num_encoder_input_tokens=deployment.max_num_batched_tokens,
        async_scheduling=pick_async_scheduling(layout, deployment, rules),
        use_v2_model_runner=uses_model_runner_v2(rules, deployment.speculative_method),
        vllm_version=rules.vllm_version,
        kv_connector_extra_config=deployment.kv_connector_extra_config,
        speculative_method=deployment.speculative_method,
        num_speculative_tokens=deployment.num_speculative_tokens,
        max_model_len=max_model_len,
        original_max_model_len=AUTO_FIT_MAX_MODEL_LEN
        if deployment.auto_fit_max_model_len
        else None,
    )
    return DerivedSpecs(
        layout=layout,
        deployment=deployment,
        settings=settings,
        kv_cache_specs=workers,
        available_memory=deployment.worker_memory(len(workers)),
        pp_layer_ranges=ranges,
        attention_backend=backend,
        model_dtype=model_dtype,
        kv_cache_dtype=kv_dtype,
        requested_block_size=requested_block_size,
        mamba_state_bytes=mamba_state,
        mamba_page_size_padded=mamba_padded,
    )
