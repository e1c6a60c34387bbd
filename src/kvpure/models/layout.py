"""What a model's layers hold in the KV cache, before any deployment choice.

An architecture function (``kvpure.models.architectures``) reads a config.json
into a :class:`ModelLayout`: one :class:`AttentionLayer` or state layer
(:class:`Mamba2Layer`, :class:`Mamba1Layer`, :class:`GatedDeltaNetLayer`,
:class:`KDALayer`) per layer that keeps state, named as vLLM names it,
with the model's own (un-sharded) head counts and state sizes.
``kvpure.models.derive`` then applies a deployment (tensor and pipeline
parallelism, dtypes, block size, backend) to turn it into vLLM's specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_int

__all__ = [
    "STATE_LAYER_TYPES",
    "AttentionKind",
    "AttentionLayer",
    "GatedDeltaNetLayer",
    "KDALayer",
    "Mamba1Layer",
    "Mamba2Layer",
    "ModelLayout",
    "StateLayer",
]


class AttentionKind(Enum):
    """Which attention a layer runs (each maps to one vLLM spec class)."""

    FULL = "full_attention"
    SLIDING_WINDOW = "sliding_window"
    CHUNKED_LOCAL = "chunked_local_attention"
    MLA = "mla_attention"
    MLA_INDEXER = "mla_indexer"
    """DeepSeek-V3.2's sparse-attention indexer key cache (an MLA spec of uint8 bytes)."""
    CROSS = "cross_attention"
    """An encoder-decoder model's cross attention: it caches the encoder's tokens."""


def _positive(field: str, value: int) -> None:
    check_int(field, value, minimum=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionLayer:
    """An attention layer: ``num_kv_heads`` is the model's total (before TP)."""

    index: int
    name: str
    kind: AttentionKind
    num_kv_heads: int
    head_size: int
    head_size_v: int
    sliding_window: int | None = None
    attention_chunk_size: int | None = None

    def __post_init__(self) -> None:
        _positive(f"{self.name}.num_kv_heads", self.num_kv_heads)
        _positive(f"{self.name}.head_size", self.head_size)
        _positive(f"{self.name}.head_size_v", self.head_size_v)
        if (self.kind is AttentionKind.SLIDING_WINDOW) != (self.sliding_window is not None):
            raise InvalidFieldError(
                field=f"{self.name}.sliding_window",
                value=self.sliding_window,
                reason="a sliding-window layer needs a window and no other layer has one",
            )
        if (self.kind is AttentionKind.CHUNKED_LOCAL) != (self.attention_chunk_size is not None):
            raise InvalidFieldError(
                field=f"{self.name}.attention_chunk_size",
                value=self.attention_chunk_size,
                reason="a chunked-local layer needs a chunk size and no other layer has one",
            )
        if self.sliding_window is not None:
            _positive(f"{self.name}.sliding_window", self.sliding_window)
        if self.attention_chunk_size is not None:
            _positive(f"{self.name}.attention_chunk_size", self.attention_chunk_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mamba2Layer:
    """A Mamba2 mixer layer with the model's (un-sharded) sizes."""

    index: int
    name: str
    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    intermediate_size: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for field in ("num_heads", "head_dim", "state_size", "n_groups", "intermediate_size"):
            _positive(f"{self.name}.{field}", getattr(self, field))
        if self.conv_kernel < 2:
            raise InvalidFieldError(
                field=f"{self.name}.conv_kernel",
                value=self.conv_kernel,
                reason="must be at least 2",
            )


def _conv_kernel(name: str, value: int) -> None:
    if value < 2:
        raise InvalidFieldError(
            field=f"{name}.conv_kernel", value=value, reason="must be at least 2"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Mamba1Layer:
    """A Mamba (v1) mixer layer: ``intermediate_size`` channels of ``state_size`` states each."""

    index: int
    name: str
    intermediate_size: int
    state_size: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for field in ("intermediate_size", "state_size"):
            _positive(f"{self.name}.{field}", getattr(self, field))
        _conv_kernel(self.name, self.conv_kernel)


@dataclass(frozen=True, slots=True, kw_only=True)
class GatedDeltaNetLayer:
    """A gated delta net linear-attention layer (Qwen3-Next, Qwen3.5), model totals."""

    index: int
    name: str
    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for field in ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"):
            _positive(f"{self.name}.{field}", getattr(self, field))
        _conv_kernel(self.name, self.conv_kernel)


@dataclass(frozen=True, slots=True, kw_only=True)
class KDALayer:
    """A Kimi delta attention layer (Kimi-Linear): ``num_heads`` heads of ``head_dim``."""

    index: int
    name: str
    num_heads: int
    head_dim: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for field in ("num_heads", "head_dim"):
            _positive(f"{self.name}.{field}", getattr(self, field))
        _conv_kernel(self.name, self.conv_kernel)


StateLayer = Mamba2Layer | Mamba1Layer | GatedDeltaNetLayer | KDALayer
"""A layer whose cache is a fixed-size recurrent state (a vLLM ``MambaSpec``)."""
STATE_LAYER_TYPES = (Mamba2Layer, Mamba1Layer, GatedDeltaNetLayer, KDALayer)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelLayout:
    """A model's stateful layers in order, with the config facts vLLM reads.

    ``num_hidden_layers`` counts every decoder layer (pipeline parallelism
    splits these, stateful or not); ``config_dtype`` is the config's
    ``torch_dtype``; ``derived_max_model_len`` is the longest context the
    config allows and ``default_max_model_len`` what vLLM uses when no
    max_model_len is given (None: the derived one); ``num_attention_heads``
    is the query head count vLLM checks against the tensor-parallel size;
    ``mamba_chunk_size`` is the Mamba2 SSD chunk (used to align blocks in
    mamba cache mode ``all``).
    """

    architecture: str
    model_type: str
    num_hidden_layers: int
    num_attention_heads: int
    layers: tuple[AttentionLayer | StateLayer, ...]
    config_dtype: str
    derived_max_model_len: int
    default_max_model_len: int | None = None
    mamba_chunk_size: int | None = None
    ssm_cache_dtype: str | None = None
    planned_as: str | None = None
    is_encoder_decoder: bool = False
    yarn_unscaled_max_model_len: tuple[int, int] | None = None
    """``(derived, default)`` max_model_len when YaRN's factor is not applied
    (vLLM 0.33+); None when they equal the two above."""
    checkpoint_kv_cache_dtype: str | None = None
    """The KV cache dtype the checkpoint's ``quantization_config`` names
    (vLLM's ``get_kv_cache_quant_algo_string``: ``fp8_e4m3``, ``nvfp4``,
    ``auto``), None when it names none."""
    sentence_transformers_modules: tuple[str, ...] = ()
    """The module types the model folder's Sentence Transformers ``modules.json`` lists,
    in order (:mod:`kvpure.models.sentence_transformers`); () without one. A pooling
    module among them makes vLLM run the pooling runner whatever the architecture."""

    def __post_init__(self) -> None:
        _positive("num_hidden_layers", self.num_hidden_layers)
        for layer in self.layers:
            if not 0 <= layer.index < self.num_hidden_layers:
                raise InvalidFieldError(
                    field=f"{layer.name}.index",
                    value=layer.index,
                    reason=f"must be in [0, {self.num_hidden_layers})",
                )

    def context_lengths(self, *, yarn_factor: bool = True) -> tuple[int, int]:
        """``(derived, default)`` max_model_len under a release's YaRN rule."""
        if not yarn_factor and self.yarn_unscaled_max_model_len is not None:
            return self.yarn_unscaled_max_model_len
        return self.derived_max_model_len, self.default_max_model_len or self.derived_max_model_len

    @property
    def uses_mla(self) -> bool:
        """Whether the attention layers are MLA (latent) attention."""
        return any(
            isinstance(layer, AttentionLayer) and layer.kind is AttentionKind.MLA
            for layer in self.layers
        )

    @property
    def attention_layers(self) -> tuple[AttentionLayer, ...]:
        """The attention layers, in order."""
        return tuple(layer for layer in self.layers if isinstance(layer, AttentionLayer))

    @property
    def mamba_layers(self) -> tuple[StateLayer, ...]:
        """The state (Mamba-style) layers, in order."""
        return tuple(layer for layer in self.layers if isinstance(layer, STATE_LAYER_TYPES))
