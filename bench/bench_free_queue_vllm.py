"""vLLM's own ``KVCacheBlock`` and ``FreeKVCacheBlockQueue``, for the free queue benchmark.

In order of preference:

1. ``vllm.v1.core.kv_cache_utils`` imported (vLLM installed with its dependencies);
2. the two class definitions compiled from vLLM's own source file, unchanged
   (``$KVPURE_VLLM_SOURCE`` or /work/vllm/0.26.0, a release's unpacked wheel):
   the same bytecode vLLM runs, without importing torch and the rest of vLLM;
3. ``None``: the caller falls back to the written-anew baseline of
   ``bench_free_queue.py``.

:func:`load_vllm_queue` returns ``(label, block_class, queue_class)`` or None;
:func:`load_vllm_queues` also vLLM 0.34.0's classes, where its source is present.
"""

from __future__ import annotations

import ast
import os
import sys
import types
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SOURCE = Path("/work/vllm/0.26.0")
_RELATIVE = Path("vllm/v1/core/kv_cache_utils.py")
_CLASSES = ("KVCacheBlock", "FreeKVCacheBlockQueue")


def _from_import() -> tuple[str, type, type] | None:
    try:
        from vllm.v1.core import kv_cache_utils  # type: ignore[import-not-found]  # optional
    except Exception:  # not installed, or its dependencies (torch) are missing
        return None
    import vllm  # type: ignore[import-not-found]  # imported just above

    return (
        f"vLLM {getattr(vllm, '__version__', '?')} (imported)",
        kv_cache_utils.KVCacheBlock,
        kv_cache_utils.FreeKVCacheBlockQueue,
    )


def _from_source(root: Path) -> tuple[str, type, type] | None:
    path = root / _RELATIVE
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    wanted = [
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in _CLASSES
    ]
    if len(wanted) != len(_CLASSES):
        return None
    module = ast.Module(body=list(wanted), type_ignores=[])
    holder = types.ModuleType(f"vllm_kv_cache_utils_from_source_{root.name.replace('.', '_')}")
    holder.__file__ = str(path)
    sys.modules[holder.__name__] = holder  # dataclasses looks the module up by name
    namespace: dict[str, Any] = holder.__dict__
    namespace.update(
        dataclass=dataclass,
        field=field,
        weakref=weakref,
        Iterable=Iterable,
        Iterator=Iterator,
        BlockHashWithGroupId=bytes,
        BlockPool=object,
    )
    exec(compile(module, str(path), "exec"), namespace)
    return (
        f"vLLM {root.name} (its classes compiled from {path})",
        namespace["KVCacheBlock"],
        namespace["FreeKVCacheBlockQueue"],
    )


def load_vllm_queues() -> list[tuple[str, type, type]]:
    """:func:`load_vllm_queue`, then vLLM 0.34.0's classes compiled from its source
    (beside the first, ``$KVPURE_VLLM_SOURCE``'s sibling 0.34.0) when present."""
    found = load_vllm_queue()
    queues = [] if found is None else [found]
    root = Path(os.environ.get("KVPURE_VLLM_SOURCE", str(DEFAULT_SOURCE)))
    newer = root.parent / "0.34.0"
    if newer != root:
        later = _from_source(newer)
        if later is not None:
            queues.append(later)
    return queues


def load_vllm_queue() -> tuple[str, type, type] | None:
    """vLLM's block and queue classes with a label saying where they came from."""
    found = _from_import()
    if found is not None:
        return found
    return _from_source(Path(os.environ.get("KVPURE_VLLM_SOURCE", str(DEFAULT_SOURCE))))
