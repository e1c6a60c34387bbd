"""Errors of the free block queue and the block tables (re-exported by ``kvpure.errors``).

``kvpure.free_queue`` and the block pool raise the queue's; ``kvpure.block_table``
the table's. Import them from ``kvpure.errors`` (or from here); they are the same
class objects.
"""

from __future__ import annotations

from kvpure.error_roots import KVPureRuntimeError, KVPureValueError

__all__ = [
    "BlockAlreadyQueuedError",
    "BlockHashAlreadySetError",
    "BlockInOtherQueueError",
    "BlockNotQueuedError",
    "BlockTableRowOverflowError",
    "FreeBlockQueueMisuseError",
    "NoCommonKernelBlockSizeError",
    "NoFreeBlocksError",
    "NotABlockError",
    "NotEnoughFreeBlocksError",
    "TokenPositionOutOfRangeError",
]

# ---------------------------------------------------------------------------
# Free block queue errors
# ---------------------------------------------------------------------------


class BlockHashAlreadySetError(KVPureValueError):
    """``set_block_hash`` was called on a block that already carries a hash.

    vLLM asserts here. ``block_id`` names the block; call ``reset_hash()``
    first (the pool does so when it evicts the block).
    """

    def __init__(self, *, block_id: int, reason: str) -> None:
        super().__init__(f"block {block_id}: {reason}")
        self.block_id = block_id
        self.reason = reason


class NotEnoughFreeBlocksError(KVPureValueError):
    """More blocks were popped than the free block queue holds.

    ``num_requested`` blocks were asked for, ``num_free_blocks`` were free.
    """

    def __init__(self, *, num_requested: int, num_free_blocks: int) -> None:
        super().__init__(
            f"popleft_n({num_requested}) asks for {num_requested} blocks but only "
            f"{num_free_blocks} free blocks are in the queue; pop at most "
            f"{num_free_blocks} blocks or free some first"
        )
        self.num_requested = num_requested
        self.num_free_blocks = num_free_blocks


class NoFreeBlocksError(NotEnoughFreeBlocksError):
    """``popleft()`` on an empty free block queue (vLLM's ValueError message)."""

    def __init__(self) -> None:
        KVPureValueError.__init__(self, "No free blocks available")
        self.num_requested = 1
        self.num_free_blocks = 0


class FreeBlockQueueMisuseError(KVPureRuntimeError):
    """A block was given to a free block queue operation it does not fit.

    ``operation`` names the queue method, ``block_id`` the block, and
    ``reason`` says what is wrong with it. The queue is left unchanged.
    """

    def __init__(self, *, operation: str, block_id: int, reason: str) -> None:
        super().__init__(f"{operation}() called on block {block_id}: {reason}")
        self.operation = operation
        self.block_id = block_id
        self.reason = reason


class NotABlockError(KVPureValueError, TypeError):
    """A free block queue was handed something that is not a ``KVCacheBlock``.

    ``operation`` names the queue method and ``item`` is what it was given; the
    queue and every block are left as they were.
    """

    def __init__(self, *, operation: str, item: object) -> None:
        super().__init__(
            f"{operation}() was given {type(item).__name__} {item!r:.40}, not a KVCacheBlock; "
            "pass the pool's KVCacheBlock objects"
        )
        self.operation = operation
        self.item = item


class BlockNotQueuedError(FreeBlockQueueMisuseError):
    """``remove()`` of a block that is in no free block queue (vLLM: RuntimeError)."""


class BlockAlreadyQueuedError(FreeBlockQueueMisuseError):
    """A block that already is in this queue (or twice in one batch) was added again."""


class BlockInOtherQueueError(FreeBlockQueueMisuseError):
    """A block that is linked into a different free block queue was passed."""


# ---------------------------------------------------------------------------
# Block tables (kvpure.block_table)
# ---------------------------------------------------------------------------


class BlockTableRowOverflowError(KVPureValueError):
    """A request holds more manager blocks than a block-table row has room for."""

    def __init__(self, *, request_index: int, num_blocks: int, max_num_blocks_per_req: int) -> None:
        super().__init__(
            f"request {request_index}: {num_blocks} blocks do not fit a block-table row of "
            f"{max_num_blocks_per_req} blocks; raise max_num_blocks_per_req (max_model_len) "
            "or give the request fewer blocks"
        )
        self.request_index = request_index
        self.num_blocks = num_blocks
        self.max_num_blocks_per_req = max_num_blocks_per_req


class TokenPositionOutOfRangeError(KVPureValueError):
    """A token position lies beyond the blocks its request holds."""

    def __init__(self, *, position: int, block_table_column: int, num_kernel_blocks: int) -> None:
        super().__init__(
            f"token position {position} needs block-table column {block_table_column}, but the "
            f"request holds only {num_kernel_blocks} kernel blocks; allocate more blocks first"
        )
        self.position = position
        self.block_table_column = block_table_column
        self.num_kernel_blocks = num_kernel_blocks


class NoCommonKernelBlockSizeError(KVPureValueError):
    """No kernel block size divides the manager's block size and suits every backend."""

    def __init__(self, *, block_size: int) -> None:
        super().__init__(
            f"no kernel block size that divides the block size {block_size} tokens is "
            "supported by every attention backend of the group; choose a block size the "
            "backends support (FlashAttention: a multiple of 16)"
        )
        self.block_size = block_size
