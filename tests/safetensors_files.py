"""Writes small safetensors files for the memory-profile tests (no safetensors package needed).

The format: an 8-byte little-endian header length, the JSON header (dtype,
shape, data_offsets per tensor), then the tensors' bytes back to back.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1, "F8_E4M3": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """Write ``name -> (dtype, shape)`` with zero data; returns the data bytes written."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * ITEMSIZE[dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return offset


def write_index(folder: Path, shards: dict[str, dict[str, tuple[str, tuple[int, ...]]]]) -> int:
    """Write several shards and their ``model.safetensors.index.json``; returns total_size."""
    total = 0
    weight_map: dict[str, str] = {}
    for file_name, tensors in shards.items():
        total += write_safetensors(folder / file_name, tensors)
        weight_map.update({name: file_name for name in tensors})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return total
