"""Falcon-H1's Mamba2 width where config.json leaves ``mamba_d_ssm`` out.

vLLM's falcon_h1.py reads ``config.mamba_d_ssm`` from transformers' ``FalconH1Config``,
whose default is 1024; only an explicit null falls back to ``mamba_expand x hidden_size``
(``int(config.mamba_expand * config.hidden_size)``). The width sizes both the weights
(``hybrid_layers``) and the Mamba state the planner gives every layer (``models``), so
both must take the same rule. vLLM 0.26 counted the weights of the variant without the
key (``tests/data/model_configs/vllm_weight_counts_small.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pyrsistent import freeze

from kvpure.memory_profile.hybrid_layers import falcon_h1_inner
from kvpure.models.config import HFConfig
from kvpure.models.families.hybrid import falcon_h1, falcon_h1_mamba_width
from kvpure.models.layout import Mamba2Layer

SMALL = Path(__file__).parent / "data" / "model_configs" / "small" / "falcon_h1_default_d_ssm.json"


def _config(**changes: object) -> HFConfig:
    data = json.loads(SMALL.read_text())
    data.pop("mamba_d_ssm", None)
    data.update(changes)
    return HFConfig(data=freeze(data))


def test_an_absent_key_takes_transformers_default() -> None:
    config = _config()
    assert falcon_h1_mamba_width(config) == 1024
    assert falcon_h1_inner(config) == 1024
    mamba = [layer for layer in falcon_h1(config).layers if isinstance(layer, Mamba2Layer)]
    assert mamba
    assert {layer.intermediate_size for layer in mamba} == {1024}


def test_null_and_given_values() -> None:
    hidden = json.loads(SMALL.read_text())["hidden_size"]
    assert falcon_h1_mamba_width(_config(mamba_d_ssm=None, mamba_expand=2)) == 2 * hidden
    assert falcon_h1_mamba_width(_config(mamba_d_ssm=None)) == int(2 * hidden)
    assert falcon_h1_mamba_width(_config(mamba_d_ssm=2048)) == 2048
