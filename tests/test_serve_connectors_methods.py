"""Every KV connector and speculative method vLLM 0.26 names, one by one.

- The hybrid KV cache manager stays on only with a connector whose class
  implements ``SupportsHMA`` (``VllmConfig.__post_init__`` asks
  ``KVConnectorFactory.supports_hma_config``). The classes that do, in
  vllm/distributed/kv_transfer/kv_connector/v1/: ``ExampleHiddenStatesConnector``
  (example_hidden_states_connector.py), ``MooncakeConnector``
  (mooncake/mooncake_connector.py), ``MooncakeStoreConnector``
  (mooncake/store/connector.py), ``SimpleCPUOffloadConnector``,
  ``OffloadingConnector``, ``DecodeBenchConnector`` and the Nixl connectors
  (nixl/connector.py: ``NixlBaseConnector`` and its pull/push subclasses).
  LMCache and P2P NCCL do not.
- Async scheduling stays on for the speculative methods of ``EagleModelTypes``
  (eagle, eagle3, extract_hidden_states, MTP, dflash), ``NgramGPUTypes``
  (ngram_gpu) and dspark (vllm/config/speculative.py, vllm/config/vllm.py);
  n-gram, Medusa, draft models and suffix decoding turn it off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvpure.cli import main

GPT_OSS = str(Path(__file__).resolve().parents[1] / "examples" / "gpt_oss_20b.json")
BASE = [GPT_OSS, "--kv-cache-memory", "24GiB", "--json"]

HMA_CONNECTORS = (
    "ExampleHiddenStatesConnector",
    "MooncakeConnector",
    "MooncakeStoreConnector",
    "SimpleCPUOffloadConnector",
    "OffloadingConnector",
    "DecodeBenchConnector",
    "NixlConnector",
    "NixlPullConnector",
    "NixlPushConnector",
)
NON_HMA_CONNECTORS = ("LMCacheConnectorV1", "P2pNcclConnector")
ASYNC_METHODS = ("eagle", "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark")
SYNC_METHODS = ("ngram", "medusa", "draft_model", "suffix")


def _setting(capsys: pytest.CaptureFixture[str], name: str, *flags: str) -> object:
    # vLLM 0.26's rules (pinned; 0.33/0.34 in test_serve_rules.py)
    assert main(["plan", *BASE, "--vllm", "0.26", *flags]) == 0
    return json.loads(capsys.readouterr().out)["settings"][name]


@pytest.mark.parametrize("connector", HMA_CONNECTORS + NON_HMA_CONNECTORS)
def test_the_connector_decides_the_hybrid_manager(
    capsys: pytest.CaptureFixture[str], connector: str
) -> None:
    config = json.dumps({"kv_connector": connector, "kv_role": "kv_both"})
    setting = _setting(capsys, "disable_hybrid_kv_cache_manager", "--kv-transfer-config", config)
    assert isinstance(setting, dict)
    assert setting["value"] is (connector in NON_HMA_CONNECTORS)


@pytest.mark.parametrize("method", ASYNC_METHODS + SYNC_METHODS)
def test_the_speculative_method_decides_async_scheduling(
    capsys: pytest.CaptureFixture[str], method: str
) -> None:
    config = json.dumps({"method": method, "num_speculative_tokens": 2})
    setting = _setting(capsys, "async_scheduling", "--speculative-config", config)
    assert isinstance(setting, dict)
    assert setting["value"] is (method in ASYNC_METHODS)
