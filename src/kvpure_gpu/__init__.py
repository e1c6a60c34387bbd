"""kvpure_gpu: frozen kvpure plans become torch tensors.

This package decides nothing: it reads a ``KVCacheConfig`` and builds buffers,
per-layer views, block tables and slot mappings on any torch device.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ImportError as _err:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "kvpure_gpu needs PyTorch: install it with `pip install 'kvpure[gpu]'` "
        "(or `pip install torch`)"
    ) from _err

__all__: list[str] = []
