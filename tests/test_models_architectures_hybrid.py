"""Hybrid architectures' derived specs (attention plus recurrent-state layers) against vLLM 0.26.

Split from ``test_models_architectures.py`` (same sources): the expected layers
are worked out from vLLM 0.26's model code, named per case; recurrent-state
shapes and dtypes are checked against ``vllm_state_shapes.json``, which vLLM's
own ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config``
wrote (tools/model_configs/vllm_state_shapes.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from kvpure.specs import FullAttentionSpec, KVDtype, MambaSpec, MLAAttentionSpec
from kvpure.specs.mamba import MambaAttentionBackendEnum
from tests.test_models_architectures import CONFIGS, WRAPPED, _every, _r, derive


@dataclass(frozen=True)
class Hybrid:
    """A hybrid: its attention layers, its state layers (names) and vLLM's state backend."""

    file: str
    arch: str
    attention: tuple[int, ...]
    kv_heads: int
    head_size: int
    attn_name: str
    state: tuple[int, ...]
    state_name: str
    backend: MambaAttentionBackendEnum
    mla: bool = False


_NEMOTRON = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
_KIMI_FULL = (4, 8, 12, 16, 20, 24, 27)
HYBRID_CASES = [
    # qwen3_next.py: layer_types; full attention Qwen3NextAttention (head_dim 256),
    # linear_attention QwenGatedDeltaNetAttention at ...linear_attn (GDN_ATTN).
    Hybrid(
        "qwen3_next_80b_a3b.json",
        "Qwen3NextForCausalLM",
        _every(48, 4),
        2,
        256,
        "model.layers.{i}.self_attn.attn",
        tuple(i for i in range(48) if (i + 1) % 4),
        "model.layers.{i}.linear_attn",
        MambaAttentionBackendEnum.GDN_ATTN,
    ),
    # qwen3_5.py: the same layers inside language_model.
    Hybrid(
        "qwen3_6_35b_a3b.json",
        "Qwen3_5MoeForConditionalGeneration",
        _every(40, 4),
        2,
        256,
        WRAPPED,
        tuple(i for i in range(40) if (i + 1) % 4),
        "language_model.model.layers.{i}.linear_attn",
        MambaAttentionBackendEnum.GDN_ATTN,
    ),
    Hybrid(
        "qwen3_5_4b.json",
        "Qwen3_5ForConditionalGeneration",
        _every(32, 4),
        4,
        256,
        WRAPPED,
        tuple(i for i in range(32) if (i + 1) % 4),
        "language_model.model.layers.{i}.linear_attn",
        MambaAttentionBackendEnum.GDN_ATTN,
    ),
    # kimi_linear.py KimiDecoderLayer: is_kda_layer(i) = i + 1 in kda_layers ->
    # KimiDeltaAttention at ...self_attn; else KimiMLAAttention (MLA, 512 + 64).
    Hybrid(
        "kimi_linear_48b_a3b.json",
        "KimiLinearForCausalLM",
        tuple(i - 1 for i in _KIMI_FULL),
        1,
        576,
        "model.layers.{i}.self_attn.attn",
        tuple(i for i in range(27) if i + 1 not in _KIMI_FULL),
        "model.layers.{i}.self_attn",
        MambaAttentionBackendEnum.GDN_ATTN,
        mla=True,
    ),
    # nemotron_h.py: hybrid_override_pattern, M = MambaMixer2 at ...mixer,
    # * = NemotronHAttention at ...mixer.attn (head_dim 128).
    Hybrid(
        "nemotron_nano_9b_v2.json",
        "NemotronHForCausalLM",
        tuple(i for i, c in enumerate(_NEMOTRON) if c == "*"),
        8,
        128,
        "model.layers.{i}.mixer.attn",
        tuple(i for i, c in enumerate(_NEMOTRON) if c == "M"),
        "model.layers.{i}.mixer",
        MambaAttentionBackendEnum.MAMBA2,
    ),
    # falcon_h1.py FalconH1ParallelHybrid: attention at model.layers.{i}.attn and a
    # MambaMixer2 named model.{44 + i}.mixer in every layer.
    Hybrid(
        "falcon_h1_7b.json",
        "FalconH1ForCausalLM",
        _r(44),
        2,
        128,
        "model.layers.{i}.attn",
        _r(44),
        "model.{n}.mixer",
        MambaAttentionBackendEnum.MAMBA2,
    ),
    # jamba.py: layers_block_type (attention when i % 8 == 4), MambaMixer (v1).
    Hybrid(
        "jamba_v0_1.json",
        "JambaForCausalLM",
        (4, 12, 20, 28),
        8,
        128,
        "model.layers.{i}.attn",
        tuple(i for i in range(32) if i % 8 != 4),
        "model.layers.{i}.mixer",
        MambaAttentionBackendEnum.MAMBA1,
    ),
    # granitemoehybrid.py: layer_types mamba / attention.
    Hybrid(
        "granite_4_0_h_small.json",
        "GraniteMoeHybridForCausalLM",
        (5, 15, 25, 35),
        8,
        128,
        "model.layers.{i}.self_attn.attn",
        tuple(i for i in range(40) if i not in (5, 15, 25, 35)),
        "model.layers.{i}.mixer",
        MambaAttentionBackendEnum.MAMBA2,
    ),
]

VLLM_STATES: dict[str, Any] = json.loads((CONFIGS / "vllm_state_shapes.json").read_text())["models"]


def _vllm_state(file: str) -> dict[str, Any]:
    key = file if file in VLLM_STATES else f"examples/{file}"
    facts: dict[str, Any] = VLLM_STATES[key]
    return facts


@pytest.mark.parametrize("case", HYBRID_CASES, ids=[c.file for c in HYBRID_CASES])
def test_hybrid_layers_match_vllm(case: Hybrid) -> None:
    derived = derive(case.file, max_model_len=2048)
    assert derived.layout.architecture == case.arch
    specs = derived.kv_cache_specs[0]
    n = derived.layout.num_hidden_layers
    attention = {case.attn_name.format(i=i) for i in case.attention}
    state = {case.state_name.format(i=i, n=n + i) for i in case.state}
    assert set(specs.keys()) == attention | state
    for name in attention:
        spec = specs[name]
        assert isinstance(spec, MLAAttentionSpec if case.mla else FullAttentionSpec)
        assert (spec.num_kv_heads, spec.head_size) == (case.kv_heads, case.head_size)
    for name in state:
        spec = specs[name]
        assert isinstance(spec, MambaSpec)
        assert spec.mamba_type is case.backend


@pytest.mark.parametrize("case", HYBRID_CASES, ids=[c.file for c in HYBRID_CASES])
def test_state_shapes_and_dtypes_equal_vllms_own_calculation(case: Hybrid) -> None:
    for tp, facts in _vllm_state(case.file).items():
        derived = derive(case.file, tensor_parallel_size=int(tp), max_model_len=2048)
        spec = next(
            s for s in derived.kv_cache_specs[0].ordered_values() if isinstance(s, MambaSpec)
        )
        # vLLM's default SD layout writes the conv state (state_len, channels);
        # kvpure writes it (channels, state_len) as the goldens do: same bytes.
        conv, *rest = facts["shapes"]
        assert [list(s) for s in spec.shapes] == [conv[::-1], *rest], tp
        assert [d.value for d in spec.dtypes] == facts["dtypes"], tp


def test_the_ssm_dtype_flag_still_wins_over_the_models_default() -> None:
    # config.py Qwen3_5ForConditionalGenerationConfig / NemotronHForCausalLMConfig:
    # only "auto" takes the model's choice.
    derived = derive("nemotron_nano_9b_v2.json", mamba_ssm_cache_dtype="bfloat16")
    spec = derived.kv_cache_specs[0]["model.layers.0.mixer"]
    assert isinstance(spec, MambaSpec)
    assert spec.dtypes == (KVDtype.BFLOAT16, KVDtype.BFLOAT16)
    # Kimi's recurrent state is float32 whatever the flag (kda_state_dtype).
    kimi = derive("kimi_linear_48b_a3b.json", mamba_ssm_cache_dtype="bfloat16")
    kda = kimi.kv_cache_specs[0]["model.layers.0.self_attn"]
    assert isinstance(kda, MambaSpec)
    assert kda.dtypes == (KVDtype.BFLOAT16, KVDtype.FLOAT32)
