"""kvpure: vLLM's KV-cache planning and block hashing, exactly and offline.

The core is pure: frozen values in, frozen values out, no torch, no
environment reads. ``kvpure.free_queue`` is the one mutable shell and
``kvpure_gpu`` (a separate package) turns plans into torch tensors.
"""

from __future__ import annotations

from kvpure.errors import (
    InvalidFieldError,
    KVPureError,
    KVPureNotImplementedError,
    KVPureRuntimeError,
    KVPureValueError,
)

__version__ = "0.1.0"

__all__ = [
    "InvalidFieldError",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureValueError",
    "__version__",
]

# --- hashing ---------------------------------------------------------------
# (the hashing area re-exports its public names here)


# --- specs and planning ----------------------------------------------------
# (the planning area re-exports its public names here)


# --- free block queue ------------------------------------------------------
# (the free-queue area re-exports its public names here)
from kvpure.errors import (
    BlockAlreadyQueuedError,
    BlockHashAlreadySetError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    FreeBlockQueueMisuseError,
    NoFreeBlocksError,
    NotEnoughFreeBlocksError,
)
from kvpure.free_queue import (
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    KVCacheBlockCopy,
)

__all__ += [
    "BlockAlreadyQueuedError",
    "BlockHashAlreadySetError",
    "BlockInOtherQueueError",
    "BlockNotQueuedError",
    "FreeBlockQueueMisuseError",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "KVCacheBlockCopy",
    "NoFreeBlocksError",
    "NotEnoughFreeBlocksError",
]


# --- model configs and reports ---------------------------------------------
# (the model-config area re-exports its public names here)
