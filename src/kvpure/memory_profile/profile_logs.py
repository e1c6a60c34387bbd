"""Public vLLM memory-profile logs as typed records (the data the estimate is fitted on).

Each JSON file holds one start-up of vLLM: the model and the settings the log
states, the figures vLLM logged (GiB, two decimals, as vLLM prints them) and
the public URL it came from. ``split`` says whether the record is used to fit
the coefficients (``"fit"``) or only to measure the error (``"holdout"``).
A figure the log does not state is ``null``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.mm_profile import EncoderBatch

__all__ = [
    "GIB",
    "Capability",
    "ModelShape",
    "ProfileLog",
    "load_profile_logs",
    "parse_capability",
    "parse_profile_log",
]

GIB: Final = 1 << 30
Capability = tuple[int, int]
"""A GPU's compute capability, ``(major, minor)``."""
_MAX_LOG_FILE_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """The config.json sizes the fitted terms read."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    dense_intermediate_size: int | None = None
    """The widest MLP the forward pass runs densely (``"dense_intermediate_size"``): a MoE
    model's dense layers or shared experts, 0 when every layer routes all its MLP work
    (Qwen3-MoE, Mixtral, gpt-oss); None: ``intermediate_size``."""

    @property
    def dense_mlp_width(self) -> int:
        """The MLP width of the forward term: ``dense_intermediate_size`` if set."""
        if self.dense_intermediate_size is None:
            return self.intermediate_size
        return self.dense_intermediate_size


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileLog:
    """One logged vLLM start-up; figures in GiB as logged, None where the log is silent."""

    name: str
    model: str
    vllm_version: str
    gpu: str
    total_gpu_memory_gib: float
    tensor_parallel_size: int
    pipeline_parallel_size: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    quantization: str
    shape: ModelShape
    weights_gib: float | None
    activation_gib: float | None
    non_torch_gib: float | None
    kv_cache_gib: float | None
    cuda_graph_gib: float | None
    cuda_graph_subtracted: bool
    enforce_eager: bool
    dtype_bytes: int
    split: str
    source: str
    compute_capability: Capability = (9, 0)
    """The GPU's compute capability (``"compute_capability": "8.0"``; H100's 9.0 if unstated)."""
    flashinfer_sampler: bool = False
    """The log says "Using FlashInfer for top-p & top-k sampling." (``"topk_topp_sampler":
    "flashinfer"``)."""
    architecture: str = ""
    """config.json's first ``architectures`` entry (``"architecture"``; picks Model Runner V2)."""
    encoder_output_width: int = 0
    """Multimodal: elements per encoder output row (``"encoder": {"output_width": ...}``;
    :func:`kvpure.memory_profile.mm_profile.encoder_output_width`); 0 for text-only."""
    encoder_deepstack: bool = False
    """Qwen3-VL's deepstack encoder (``"deepstack": true``): its video budget bounds the band."""
    encoder_batch: EncoderBatch | None = None
    """The profile's dummy encoder batch where the log or config.json fixes it."""


def _num(data: dict[str, object], key: str, name: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidFieldError(field=f"{name}: {key}", value=value, reason="must be a number")
    return float(value)


def _int(data: dict[str, object], key: str, name: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFieldError(field=f"{name}: {key}", value=value, reason="must be an integer")
    return value


def _str(data: dict[str, object], key: str, name: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise InvalidFieldError(field=f"{name}: {key}", value=value, reason="must be a string")
    return value


def _sampler(data: dict[str, object], name: str) -> str:
    value = data.get("topk_topp_sampler", "native")
    if value not in ("native", "flashinfer"):
        raise InvalidFieldError(
            field=f"{name}: topk_topp_sampler", value=value, reason="must be native or flashinfer"
        )
    return str(value)


def parse_capability(text: object, *, field: str) -> Capability:
    """``"8.0"`` -> ``(8, 0)``; anything else is refused naming ``field``."""
    parts = text.split(".") if isinstance(text, str) else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise InvalidFieldError(field=field, value=text, reason="must be a capability such as 9.0")
    return int(parts[0]), int(parts[1])


def parse_profile_log(name: str, data: object) -> ProfileLog:
    """A record from its parsed JSON object (``name`` is used in errors)."""
    if not isinstance(data, dict):
        raise InvalidFieldError(field=name, value=type(data).__name__, reason="must be an object")
    shape = data.get("model_shape")
    logged = data.get("logged")
    if not isinstance(shape, dict) or not isinstance(logged, dict):
        raise InvalidFieldError(
            field=name, value=None, reason="needs the objects model_shape and logged"
        )
    total = _num(data, "total_gpu_memory_gib", name)
    util = _num(data, "gpu_memory_utilization", name)
    if total is None or util is None:
        raise InvalidFieldError(
            field=name, value=None, reason="needs total_gpu_memory_gib and gpu_memory_utilization"
        )
    split = _str(data, "split", name)
    if split not in ("fit", "holdout"):
        raise InvalidFieldError(
            field=f"{name}: split", value=split, reason="must be fit or holdout"
        )
    return ProfileLog(
        name=name,
        model=_str(data, "model", name),
        vllm_version=_str(data, "vllm_version", name),
        gpu=_str(data, "gpu", name),
        total_gpu_memory_gib=total,
        tensor_parallel_size=_int(data, "tensor_parallel_size", name),
        pipeline_parallel_size=_int(data, "pipeline_parallel_size", name),
        gpu_memory_utilization=util,
        max_num_batched_tokens=_int(data, "max_num_batched_tokens", name),
        max_num_seqs=_int(data, "max_num_seqs", name),
        quantization=_str(data, "quantization", name),
        shape=ModelShape(
            vocab_size=_int(shape, "vocab_size", name),
            hidden_size=_int(shape, "hidden_size", name),
            intermediate_size=_int(shape, "intermediate_size", name),
            num_hidden_layers=_int(shape, "num_hidden_layers", name),
            num_experts=_int(shape, "num_experts", name) if "num_experts" in shape else 0,
            num_experts_per_tok=(
                _int(shape, "num_experts_per_tok", name) if "num_experts_per_tok" in shape else 0
            ),
            moe_intermediate_size=(
                _int(shape, "moe_intermediate_size", name)
                if "moe_intermediate_size" in shape
                else 0
            ),
            dense_intermediate_size=(
                _int(shape, "dense_intermediate_size", name)
                if "dense_intermediate_size" in shape
                else None
            ),
        ),
        weights_gib=_num(logged, "weights_gib", name),
        activation_gib=_num(logged, "activation_gib", name),
        non_torch_gib=_num(logged, "non_torch_gib", name),
        kv_cache_gib=_num(logged, "kv_cache_gib", name),
        cuda_graph_gib=_num(logged, "cuda_graph_estimate_gib", name),
        cuda_graph_subtracted=data.get("cuda_graph_subtracted") is True,
        enforce_eager=data.get("enforce_eager") is True,
        dtype_bytes=4 if data.get("dtype") == "float32" else 2,
        split=split,
        source=_str(data, "source", name),
        compute_capability=parse_capability(
            data.get("compute_capability", "9.0"), field=f"{name}: compute_capability"
        ),
        flashinfer_sampler=_sampler(data, name) == "flashinfer",
        architecture=_str(data, "architecture", name) if "architecture" in data else "",
        **_encoder(data, name),
    )


def _encoder(data: dict[str, object], name: str) -> dict[str, Any]:
    """The record's ``"encoder"`` object: output width, deepstack, and the dummy batch."""
    enc = data.get("encoder")
    if enc is None:
        return {}
    if not isinstance(enc, dict):
        raise InvalidFieldError(field=f"{name}: encoder", value=enc, reason="must be an object")
    field = f"{name}: encoder"
    batch = None
    if "budget_tokens" in enc:
        batch = EncoderBatch(
            budget_tokens=_int(enc, "budget_tokens", field),
            item_tokens=_int(enc, "item_tokens", field),
            item_rows=_int(enc, "item_rows", field),
        )
    return {
        "encoder_output_width": _int(enc, "output_width", field),
        "encoder_deepstack": enc.get("deepstack") is True,
        "encoder_batch": batch,
    }


def load_profile_logs(folder: Path) -> tuple[ProfileLog, ...]:
    """Every ``*.json`` record in ``folder``, sorted by file name."""
    logs: list[ProfileLog] = []
    for path in sorted(folder.glob("*.json")):
        if path.stat().st_size > _MAX_LOG_FILE_BYTES:
            raise InvalidFieldError(field=str(path), value=None, reason="is larger than 1 MiB")
        logs.append(parse_profile_log(path.name, json.loads(path.read_text(encoding="utf-8"))))
    return tuple(logs)
