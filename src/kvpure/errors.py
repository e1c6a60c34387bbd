"""The kvpure exception tree.

Every error kvpure raises derives from :class:`KVPureError`. Each leaf also
derives from the stdlib exception vLLM raises in the same situation, so code
written against vLLM keeps catching what it caught before. Where vLLM raises
``AssertionError`` for a user mistake, kvpure raises a ``ValueError`` subclass.

The inputs that caused an error are attributes of it (callers never parse the
message), and every error pickles with those attributes intact.

::

    KVPureError
    ├── KVPureValueError (ValueError)
    │   ├── InvalidFieldError            a field of an input value is out of range
    │   └── ... (the areas below add their leaves)
    ├── KVPureNotImplementedError (NotImplementedError)
    └── KVPureRuntimeError (RuntimeError)

The roots live in ``kvpure.error_roots``, the core's leaves in their areas' modules
(specs and planning in ``kvpure.planning_errors``, the free block queue and block tables
in ``kvpure.block_errors``); all are re-exported here, the same class objects.
``kvpure.models``, ``kvpure.cli`` and ``kvpure_gpu`` keep theirs in their own ``errors``
modules, under the same root.
"""

from __future__ import annotations

from kvpure.block_errors import (
    BlockAlreadyQueuedError,
    BlockHashAlreadySetError,
    BlockInOtherQueueError,
    BlockNotQueuedError,
    BlockTableRowOverflowError,
    FreeBlockQueueMisuseError,
    NoCommonKernelBlockSizeError,
    NoFreeBlocksError,
    NotABlockError,
    NotEnoughFreeBlocksError,
    TokenPositionOutOfRangeError,
)
from kvpure.error_roots import (
    FieldIndexError,
    FieldTypeError,
    InvalidFieldError,
    KVPureError,
    KVPureNotImplementedError,
    KVPureRuntimeError,
    KVPureTypeError,
    KVPureValueError,
    format_gib,
)
from kvpure.planning_errors import (
    AutoFitError,
    ContextParallelUnsupportedError,
    HybridPromotionError,
    HybridUnificationError,
    InsufficientKVCacheMemoryError,
    NoKVCacheMemoryError,
    PageSizeUnificationError,
    PlanningAssertionError,
    PrefixMatchUnitError,
    SinglePrefixMatchUnitError,
    SpecMergeError,
    UnregisteredSpecError,
    WindowSizeMismatchError,
    WorkerSpecMismatchError,
)

__all__ = [
    "AutoFitError",
    "BlockAlreadyQueuedError",
    "BlockHashAlreadySetError",
    "BlockInOtherQueueError",
    "BlockNotQueuedError",
    "BlockTableRowOverflowError",
    "ContextParallelUnsupportedError",
    "FieldIndexError",
    "FieldTypeError",
    "FreeBlockQueueMisuseError",
    "HybridPromotionError",
    "HybridUnificationError",
    "InsufficientKVCacheMemoryError",
    "InvalidFieldError",
    "KVPureError",
    "KVPureNotImplementedError",
    "KVPureRuntimeError",
    "KVPureTypeError",
    "KVPureValueError",
    "NoCommonKernelBlockSizeError",
    "NoFreeBlocksError",
    "NoKVCacheMemoryError",
    "NotABlockError",
    "NotEnoughFreeBlocksError",
    "PageSizeUnificationError",
    "PlanningAssertionError",
    "PrefixMatchUnitError",
    "SinglePrefixMatchUnitError",
    "SpecMergeError",
    "TokenPositionOutOfRangeError",
    "UnregisteredSpecError",
    "WindowSizeMismatchError",
    "WorkerSpecMismatchError",
    "format_gib",
]
