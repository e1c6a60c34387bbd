"""The ``vllm serve`` flags an operator gave, as one typed value.

:class:`ServeFlags` holds each flag as given, ``None`` where it was left out,
so :mod:`kvpure.serve.defaults` can tell a flag from a default. Names are
vLLM's (``EngineArgs`` fields).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyrsistent import PMap

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_optional_int
from kvpure.models.deployment import KV_CACHE_DTYPES, MODEL_DTYPES, AttentionBackend
from kvpure.serve.gpus import GPU
from kvpure.settings import MAMBA_CACHE_MODES
from kvpure.versions import DEFAULT_VLLM_VERSION, normalize_vllm_version

__all__ = ["USAGE_CONTEXTS", "KVTransferConfig", "ServeFlags", "SpeculativeConfig"]

#: ``serve`` = vLLM's OPENAI_API_SERVER usage context, ``llm`` = LLM_CLASS.
USAGE_CONTEXTS: Final = ("serve", "llm")


@dataclass(frozen=True, slots=True, kw_only=True)
class KVTransferConfig:
    """``--kv-transfer-config``: the connector's name and its extra config."""

    kv_connector: str
    kv_connector_extra_config: PMap[str, object]
    children: tuple[str, ...] = ()
    """The connectors a ``MultiConnector`` wraps (``kv_connector_extra_config.connectors``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculativeConfig:
    """``--speculative-config``: the drafting method and tokens per step."""

    method: str
    num_speculative_tokens: int | None = None
    disable_padded_drafter_batch: bool = False


def _choice(field: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise InvalidFieldError(
            field=field, value=value, reason="must be one of " + ", ".join(choices)
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeFlags:
    """The flags of one ``vllm serve`` command; None = not given (vLLM decides).

    ``kv_cache_memory_bytes`` holds one figure (every GPU) or one per GPU of
    one engine, in rank order. ``max_model_len_auto`` is ``--max-model-len auto``.
    ``gpu`` None: no GPU named; GPU-dependent defaults then assume an
    H100-class GPU and say so.
    """

    kv_cache_memory_bytes: tuple[int, ...]
    gpu: GPU | None = None
    usage_context: str = "serve"
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool = False
    max_model_len: int | None = None
    max_model_len_auto: bool = False
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    mamba_ssm_cache_dtype: str | None = None
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    disable_hybrid_kv_cache_manager: bool | None = None
    kv_transfer_config: KVTransferConfig | None = None
    speculative_config: SpeculativeConfig | None = None
    attention_backend: AttentionBackend | None = None
    mamba_cache_mode: str | None = None
    num_gpu_blocks_override: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_given: bool = True
    """False when ``kv_cache_memory_bytes`` is kvpure's estimate, not ``--kv-cache-memory``."""
    vllm_version: str = DEFAULT_VLLM_VERSION
    """The release whose defaults apply (``--vllm``; normalised to ``X.Y``)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "vllm_version", normalize_vllm_version(self.vllm_version, field="--vllm")
        )
        utilization = self.gpu_memory_utilization
        if utilization is not None and not 0 < utilization <= 1:
            raise InvalidFieldError(
                field="--gpu-memory-utilization",
                value=utilization,
                reason="must be a fraction in (0, 1], e.g. 0.9",
            )
        if not self.kv_cache_memory_bytes:
            raise InvalidFieldError(
                field="--kv-cache-memory", value="", reason="needs at least one figure"
            )
        for memory in self.kv_cache_memory_bytes:
            check_optional_int("--kv-cache-memory", memory, minimum=0)
        for field in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "max_model_len",
            "max_num_batched_tokens",
            "max_num_seqs",
            "block_size",
            "num_gpu_blocks_override",
        ):
            check_optional_int("--" + field.replace("_", "-"), getattr(self, field), minimum=1)
        _choice("--usage-context", self.usage_context, USAGE_CONTEXTS)
        _choice("--kv-cache-dtype", self.kv_cache_dtype, KV_CACHE_DTYPES)
        _choice("--dtype", self.dtype, MODEL_DTYPES)
        _choice("--mamba-ssm-cache-dtype", self.mamba_ssm_cache_dtype, MODEL_DTYPES)
        _choice("--mamba-cache-mode", self.mamba_cache_mode, MAMBA_CACHE_MODES)
        if self.max_model_len_auto and self.max_model_len is not None:
            raise InvalidFieldError(
                field="--max-model-len",
                value=self.max_model_len,
                reason="is either a length or auto, not both",
            )
