"""vLLM's own KV event structs, read from the unpacked vLLM wheels when they are here.

The classes are exactly those of ``vllm/distributed/kv_events.py`` (from
``class EventBatch`` up to the aggregator), executed with msgspec and the one
name they import (``ExternalBlockHash = bytes | int``, as
``vllm/v1/core/kv_cache_utils.py`` declares it), so a test can encode with
vLLM's declarations themselves, not a copy. Tests skip where the wheels are
absent (``KVPURE_VLLM_SOURCES`` points elsewhere).
"""

from __future__ import annotations

import os
import sys
import typing
from pathlib import Path
from types import ModuleType, SimpleNamespace

import msgspec

VLLM_SOURCES = Path(os.environ.get("KVPURE_VLLM_SOURCES", "/work/vllm"))
RELEASES = {"vllm-0.26": "0.26.0", "vllm-0.33": "0.33.0", "vllm-0.34": "0.34.0"}


def vllm_event_structs(profile_name: str) -> SimpleNamespace | None:
    """``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``, ``KVEventBatch`` of that
    release, or None when its source is not here."""
    path = VLLM_SOURCES / RELEASES[profile_name] / "vllm" / "distributed" / "kv_events.py"
    if not path.is_file():
        return None
    text = path.read_text()
    start = text.index("class EventBatch(")
    end = text.index("class KVEventAggregator")
    name = f"vllm_kv_events_{RELEASES[profile_name].replace('.', '_')}"
    module = sys.modules.get(name)
    if module is None:  # a module of its own, so msgspec resolves the annotations
        module = ModuleType(name)
        module.__dict__.update(msgspec=msgspec, Any=typing.Any, ExternalBlockHash=bytes | int)
        exec(compile(text[start:end], str(path), "exec"), module.__dict__)  # vLLM's own source
        sys.modules[name] = module
    namespace = module.__dict__
    return SimpleNamespace(
        **{
            name: namespace[name]
            for name in ("BlockStored", "BlockRemoved", "AllBlocksCleared", "KVEventBatch")
        }
    )
