"""Type stub of the block pool's optional C loops (``src/kvpure/csrc/pool_loops.c``)."""

from kvpure.free_queue import FreeKVCacheBlockQueue, KVCacheBlock

def configure(
    block_type: type,
    queue_type: type,
    null_tag: object,
    prev_descr: object,
    next_descr: object,
    queue_descr: object,
    id_descr: object,
    ref_descr: object,
    entry_descr: object,
    count_descr: object,
) -> None: ...
def take(
    cache: dict[bytes, KVCacheBlock | dict[int, KVCacheBlock]] | None,
    blocks: list[KVCacheBlock],
    removed: list[bytes] | None,
    start: int,
) -> int: ...
def store(
    cache: dict[bytes, KVCacheBlock | dict[int, KVCacheBlock]],
    blocks: list[KVCacheBlock],
    hashes: object,
    start: int,
    stop: int,
    first_index: int,
    suffix: bytes,
    block_size: int,
    null: KVCacheBlock,
    mask: object,
    stored: list[int] | None,
) -> int: ...
def release(
    blocks: list[KVCacheBlock], plain: list[KVCacheBlock], hashed: list[KVCacheBlock], start: int
) -> int: ...
def touch(queue: FreeKVCacheBlockQueue, blocks: list[KVCacheBlock], start: int) -> int: ...
def prefix(
    cache: dict[bytes, KVCacheBlock | dict[int, KVCacheBlock]],
    hashes: object,
    suffix: bytes,
    start: int,
    limit: int,
    found: list[KVCacheBlock],
) -> int: ...
def evictable(blocks: list[KVCacheBlock]) -> int: ...
