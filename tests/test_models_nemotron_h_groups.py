"""Nemotron-H's Mamba2 groups where config.json leaves ``n_groups`` out.

vLLM 0.26 registers no config class of its own for ``nemotron_h``, so it reads
``config.n_groups`` from transformers' ``NemotronHConfig`` (transformers 5.23
configuration_nemotron_h.py: ``n_groups: int = 8``; ``mamba_n_groups``, its older name,
replaces it when given). The groups size both the weights (the Mamba2 ``in_proj`` and
``conv1d``, ``hybrid_layers``) and the conv state the planner gives every Mamba layer
(``models``), so both take the same rule. vLLM 0.26 counted the weights of the variants
without the key and with ``mamba_n_groups: 2``
(``tests/data/model_configs/vllm_weight_counts_small.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pyrsistent import freeze

from kvpure.models.config import HFConfig
from kvpure.models.derive_states import state_shapes
from kvpure.models.families.hybrid import NEMOTRON_H_N_GROUPS, nemotron_h, nemotron_h_groups
from kvpure.models.layout import Mamba2Layer

SMALL = Path(__file__).parent / "data" / "model_configs" / "small"


def _config(name: str, **changes: object) -> HFConfig:
    data = json.loads((SMALL / name).read_text())
    data.update(changes)
    return HFConfig(data=freeze(data))


def _mamba(config: HFConfig) -> list[Mamba2Layer]:
    layers = [layer for layer in nemotron_h(config).layers if isinstance(layer, Mamba2Layer)]
    assert layers
    return layers


def test_an_absent_key_takes_transformers_default() -> None:
    config = _config("nemotron_h_default_groups.json")
    assert "n_groups" not in config.data
    assert NEMOTRON_H_N_GROUPS == 8
    assert nemotron_h_groups(config) == 8
    assert {layer.n_groups for layer in _mamba(config)} == {8}
    # conv channels: 128 heads x 80 + 2 x 8 groups x 128 state, over 3 (kernel 4 - 1) rows
    conv, _ = state_shapes(_mamba(config)[0], tp=1)
    assert sorted(conv) == [3, 128 * 80 + 2 * 8 * 128]


def test_the_older_name_wins() -> None:
    config = _config("nemotron_h_mamba_n_groups.json")
    assert nemotron_h_groups(config) == 2
    assert {layer.n_groups for layer in _mamba(config)} == {2}
    both = _config("nemotron_h_mamba_n_groups.json", n_groups=4)
    assert nemotron_h_groups(both) == 2  # NemotronHConfig.__post_init__ pops mamba_n_groups
    assert nemotron_h_groups(_config("nemotron_h_options.json")) == 8
    assert nemotron_h_groups(_config("nemotron_h_options.json", n_groups=2)) == 2
