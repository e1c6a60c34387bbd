"""Which fields a spec object has in each vLLM release's JSON, in vLLM's order.

kvpure's spec classes hold the union of the releases' fields (0.26's
``indexes_kv_by_block_stride`` and ``compress_ratio``; 0.33+'s ``dcp_sharded``,
``block_stride_alignment``, ``is_draft``, ...). The JSON of a release shows only
that release's fields, in the order of its dataclasses
(``vllm/v1/kv_cache_interface.py``): 0.26's order is kvpure's own field order less
the newer fields; 0.33 and 0.34 are listed here (0.33's classes lack
``kv_head_major_slots`` and ``MambaSpec.state_alignment``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kvpure.specs import SPEC_CLASSES, KVCacheSpec

#: Fields kvpure's classes carry for vLLM 0.33+ only (absent from 0.26's JSON).
FIELDS_SINCE_0_33: frozenset[str] = frozenset(
    {
        "dcp_sharded",
        "block_stride_alignment",
        "is_draft",
        "max_tp_shards",
        "num_head_slots",
        "state_content_bytes",
        "kv_head_major_slots",
        "tokens_per_state",
        "extra_retained_tokens",
        "topk_buffer_width",
        "cache_role",
        "is_index_group_leader",
        "non_causal_multi_token_decode",
        "bounded_replay",
        "state_alignment",
        "num_prefill_checkpoint_blocks",
        "prefill_checkpoint_alignment",
        "num_heads",
        "tp_replicated",
    }
)

#: 0.26 fields a 0.33+ class does not have: read and ignored (at their 0.26 default).
FIELDS_UNTIL_0_26: dict[str, object] = {"indexes_kv_by_block_stride": None, "compress_ratio": 1}

_BASE = ("block_size", "dcp_sharded", "block_stride_alignment", "is_draft")
_ATTENTION = (
    *_BASE,
    "max_tp_shards",
    "num_kv_heads",
    "head_size",
    "dtype",
    "head_size_v",
    "kv_quant_mode",
    "page_size_padded",
    "num_head_slots",
    "state_content_bytes",
    "kv_head_major_slots",
    "tokens_per_state",
)
_FULL = (*_ATTENTION, "sliding_window", "attention_chunk_size", "non_causal")
_MLA = (
    *_FULL,
    "cache_dtype_str",
    "topk_buffer_width",
    "alignment",
    "model_version",
    "cache_role",
    "is_index_group_leader",
    "non_causal_multi_token_decode",
)
_SLIDING = (*_ATTENTION, "sliding_window", "extra_retained_tokens")

#: vLLM 0.34's dataclass fields per spec class, in order.
FIELDS_0_34: dict[str, tuple[str, ...]] = {
    "FullAttentionSpec": _FULL,
    "SinkFullAttentionSpec": (*_FULL, "sink_len"),
    "RSWASpec": (*_FULL, "rswa_window"),
    "MLAAttentionSpec": _MLA,
    "HiddenStateCacheSpec": _MLA,
    "SlidingWindowSpec": _SLIDING,
    "SlidingWindowMLASpec": (
        *_SLIDING,
        "cache_dtype_str",
        "alignment",
        "model_version",
        "bounded_replay",
        "non_causal_multi_token_decode",
    ),
    "ChunkedLocalAttentionSpec": (*_ATTENTION, "attention_chunk_size"),
    "CrossAttentionSpec": _ATTENTION,
    "EncoderOnlyAttentionSpec": _ATTENTION,
    "MambaSpec": (
        *_BASE,
        "shapes",
        "dtypes",
        "state_alignment",
        "page_size_padded",
        "mamba_type",
        "mamba_cache_mode",
        "num_speculative_blocks",
        "num_prefill_checkpoint_blocks",
        "prefill_checkpoint_alignment",
        "num_heads",
        "tokens_per_state",
        "tp_replicated",
    ),
    "UniformTypeKVCacheSpecs": (*_BASE, "kv_cache_specs"),
}

_NOT_IN_0_33 = frozenset({"kv_head_major_slots", "state_alignment"})

#: vLLM 0.33's fields: 0.34's less the two 0.33's classes do not have.
FIELDS_0_33: dict[str, tuple[str, ...]] = {
    name: tuple(f for f in fields if f not in _NOT_IN_0_33) for name, fields in FIELDS_0_34.items()
}


def _fields_0_26(cls: type[KVCacheSpec]) -> tuple[str, ...]:
    return tuple(
        f.name for f in dataclasses.fields(cls) if f.init and f.name not in FIELDS_SINCE_0_33
    )


FIELDS_0_26: dict[str, tuple[str, ...]] = {
    name: _fields_0_26(cls) for name, cls in SPEC_CLASSES.items()
}

SPEC_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "0.26": FIELDS_0_26,
    "0.33": FIELDS_0_33,
    "0.34": FIELDS_0_34,
}


#: Fields a release's classes lack but its reader accepts at their default (0.33 reads
#: 0.34-shaped specs): field -> the default it must have.
IGNORED_AT_DEFAULT: dict[str, dict[str, object]] = {
    "0.26": {},
    "0.33": {"kv_head_major_slots": False, "state_alignment": 1},
    "0.34": {},
}


def spec_fields(vllm_version: str, type_name: str) -> tuple[str, ...] | None:
    """The JSON fields of ``type_name`` in ``vllm_version`` (None: no such class there)."""
    return SPEC_FIELDS[vllm_version].get(type_name)


def kvpure_field_names(cls: type[KVCacheSpec]) -> dict[str, Any]:
    """kvpure's init fields of ``cls``: name -> dataclass field."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


__all__ = [
    "FIELDS_0_26",
    "FIELDS_0_33",
    "FIELDS_0_34",
    "FIELDS_SINCE_0_33",
    "FIELDS_UNTIL_0_26",
    "IGNORED_AT_DEFAULT",
    "SPEC_FIELDS",
    "kvpure_field_names",
    "spec_fields",
]
