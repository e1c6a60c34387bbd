"""Type stub of the optional C reader of KV event payloads (``src/kvpure/events/csrc``)."""

from kvpure.events.types import KVEventBatch

def configure(
    batch_type: type,
    batch_descrs: tuple[object, ...],
    extra_key_type: type,
    events: tuple[object, ...],
) -> None: ...
def decode(payload: bytes) -> KVEventBatch | None: ...
