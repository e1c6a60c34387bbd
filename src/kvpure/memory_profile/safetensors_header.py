"""Tensor names, dtypes and shapes from safetensors files, without reading weights.

A safetensors file starts with an 8-byte little-endian header length ``N``,
then ``N`` bytes of JSON: one entry per tensor with ``dtype``, ``shape`` and
``data_offsets`` ``[begin, end)`` into the data that follows, plus an optional
``__metadata__`` object. Only the header is read; its size is bounded
(:data:`MAX_HEADER_BYTES`) and every entry is checked (known dtype,
non-negative shape of at most :data:`MAX_TENSOR_DIMS` dimensions and
:data:`MAX_TENSOR_BYTES` bytes, offsets matching ``prod(shape) * itemsize``
and overlapping no other tensor's), at most :data:`MAX_FILE_TENSORS` tensors
a file (counted before the header is parsed) and :data:`MAX_FOLDER_TENSORS` a
folder, at least one, regular files only, and shard
names that are plain file names; shards that are the same file (links) are
read once, and in a snapshot folder of the Hugging Face cache every file read must
resolve (links followed) inside its repository folder. A damaged or hostile file raises
:class:`~kvpure.memory_profile.errors.WeightFileError` naming the file and the
tensor instead of hanging or exhausting memory.

``model.safetensors.index.json`` gives ``metadata.total_size`` (the bytes of
all tensors) and the ``weight_map`` from tensor name to shard file.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.errors import WeightFileError
from kvpure.models.hf_cache import cached_repository_root
from kvpure.user_files import open_regular, read_regular_bytes

__all__ = [
    "DTYPE_BYTES",
    "MAX_FILE_TENSORS",
    "MAX_FOLDER_TENSORS",
    "MAX_HEADER_BYTES",
    "MAX_TENSOR_BYTES",
    "MAX_TENSOR_DIMS",
    "CheckpointIndex",
    "TensorInfo",
    "read_checkpoint_index",
    "read_model_folder",
    "read_safetensors_header",
]

MAX_HEADER_BYTES: Final = 100_000_000
"""The largest header read: the safetensors library's own limit (it refuses a header of
100,000,001 bytes as "header too large"), so kvpure reads no file vLLM could not load."""
MAX_INDEX_BYTES: Final = 64 * 1024 * 1024
"""The largest ``model.safetensors.index.json`` read."""
MAX_SHARD_FILES: Final = 4096
"""The most shard files one model folder may list."""
MAX_TENSOR_DIMS: Final = 16
"""The most dimensions one tensor's shape may have (real checkpoints use up to 5)."""
MAX_TENSOR_BYTES: Final = 2**48
"""The largest tensor (256 TiB), so that a shape's product stays a readable number."""
MAX_FILE_TENSORS: Final = 2**18
"""The most tensors one safetensors header may list (262,144)."""
MAX_FOLDER_TENSORS: Final = 2**20
"""The most tensors all the shards of one model folder may list together."""

DTYPE_BYTES: Final[Mapping[str, int]] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "C64": 8,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
"""Bytes per element of each safetensors dtype (packed 4-bit weights are stored as U8/I32)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorInfo:
    """One tensor of a checkpoint: its name, safetensors dtype and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return DTYPE_BYTES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tensor."""
        return math.prod(self.shape) * self.itemsize


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointIndex:
    """A ``model.safetensors.index.json``: total tensor bytes and the shard files."""

    total_size: int
    shard_files: tuple[str, ...]


def _entry(path: str, name: str, raw: object, data_bytes: int | None) -> TensorInfo:
    if not isinstance(raw, Mapping):
        raise WeightFileError(path=path, reason=f"tensor {name!r}: header entry is not an object")
    dtype = raw.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise WeightFileError(
            path=path,
            reason=f"tensor {name!r}: unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}",
        )
    shape = raw.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**48 for d in shape
    ):
        raise WeightFileError(
            path=path, reason=f"tensor {name!r}: shape must be a list of non-negative integers"
        )
    if len(shape) > MAX_TENSOR_DIMS:
        raise WeightFileError(
            path=path,
            reason=f"tensor {name!r}: shape has {len(shape)} dimensions "
            f"(at most {MAX_TENSOR_DIMS})",
        )
    info = TensorInfo(name=name, dtype=dtype, shape=tuple(shape))
    if info.nbytes > MAX_TENSOR_BYTES:
        raise WeightFileError(
            path=path, reason=f"tensor {name!r}: shape holds over {MAX_TENSOR_BYTES} bytes"
        )
    offsets = raw.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
    ):
        raise WeightFileError(
            path=path, reason=f"tensor {name!r}: data_offsets must be [begin, end]"
        )
    begin, end = offsets
    if not 0 <= begin <= end or end - begin != info.nbytes:
        raise WeightFileError(
            path=path,
            reason=f"tensor {name!r}: data_offsets {offsets} do not hold "
            f"{info.nbytes} bytes of {dtype} {list(shape)}",
        )
    if data_bytes is not None and end > data_bytes:
        raise WeightFileError(
            path=path, reason=f"tensor {name!r}: data_offsets end {end} past the file's end"
        )
    return info


def _check_overlaps(path: str, spans: list[tuple[int, int, str]]) -> None:
    """Refuse two tensors whose non-empty byte ranges overlap (their bytes would count twice)."""
    spans.sort()
    end_so_far, last = 0, ""
    for begin, end, name in spans:
        if begin == end:
            continue
        if begin < end_so_far:
            raise WeightFileError(
                path=path,
                reason=f"tensors {last!r} and {name!r} overlap in data_offsets "
                f"(byte {begin} is in both)",
            )
        end_so_far, last = end, name


def read_safetensors_header(path: Path) -> tuple[TensorInfo, ...]:
    """The tensors of one safetensors file, in header order, read from its header alone."""
    shown = str(path)
    try:
        with open_regular(path, shown) as handle:
            file_bytes = os.fstat(handle.fileno()).st_size
            head = handle.read(8)
            if len(head) != 8:
                raise WeightFileError(path=shown, reason="shorter than the 8-byte header length")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES:
                raise WeightFileError(
                    path=shown,
                    reason=f"header of {length} bytes exceeds the {MAX_HEADER_BYTES}-byte limit",
                )
            text = handle.read(length)
    except InvalidFieldError as err:
        raise WeightFileError(path=shown, reason=f"{err.reason} ({err.value})") from None
    except OSError as err:
        raise WeightFileError(path=shown, reason=f"cannot be read ({err.strerror})") from None
    if len(text) != length:
        raise WeightFileError(
            path=shown, reason=f"header claims {length} bytes; the file ends first"
        )
    if text.count(b'"data_offsets"') > MAX_FILE_TENSORS:  # before parsing (seconds, a GiB)
        raise WeightFileError(path=shown, reason=f"header lists over {MAX_FILE_TENSORS} tensors")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise WeightFileError(path=shown, reason="header is not valid UTF-8 JSON") from None
    if not isinstance(header, dict):
        raise WeightFileError(path=shown, reason="header is not a JSON object")
    if len(header) - ("__metadata__" in header) > MAX_FILE_TENSORS:
        raise WeightFileError(path=shown, reason=f"header lists over {MAX_FILE_TENSORS} tensors")
    data_bytes = file_bytes - 8 - length
    tensors = tuple(
        _entry(shown, name, raw, data_bytes)
        for name, raw in header.items()
        if name != "__metadata__"
    )
    _check_overlaps(
        shown,
        [
            (raw["data_offsets"][0], raw["data_offsets"][1], name)
            for name, raw in header.items()
            if name != "__metadata__"
        ],
    )
    return tensors


def read_checkpoint_index(path: Path) -> CheckpointIndex:
    """``metadata.total_size`` and the shard files of a ``model.safetensors.index.json``."""
    shown = str(path)
    try:
        data = json.loads(read_regular_bytes(path, MAX_INDEX_BYTES, shown).decode("utf-8"))
    except InvalidFieldError as err:
        raise WeightFileError(path=shown, reason=f"{err.reason} ({err.value})") from None
    except OSError as err:
        raise WeightFileError(path=shown, reason=f"cannot be read ({err.strerror})") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise WeightFileError(path=shown, reason="is not valid UTF-8 JSON") from None
    metadata = data.get("metadata") if isinstance(data, dict) else None
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise WeightFileError(
            path=shown, reason="metadata.total_size must be a non-negative integer"
        )
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise WeightFileError(path=shown, reason="weight_map must map tensor names to file names")
    files = tuple(sorted(set(weight_map.values())))
    if len(files) > MAX_SHARD_FILES:
        raise WeightFileError(path=shown, reason=f"lists more than {MAX_SHARD_FILES} shard files")
    for name in files:
        if "\0" in name or name in ("", ".", "..") or Path(name).name != name:
            raise WeightFileError(
                path=shown, reason=f"shard {name[:80]!r} must be a plain file name"
            )
    return CheckpointIndex(total_size=total, shard_files=files)


def _check_inside(path: Path, root: Path | None) -> None:
    """Refuse a file of a cached snapshot that resolves outside its repository ``root``."""
    if root is None:
        return
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return  # missing, or a link loop: reading it names the problem
    if not real.is_relative_to(root):
        raise WeightFileError(
            path=str(path),
            reason=f"resolves to {real}, outside the cached repository folder {root}; refused",
        )


def read_model_folder(folder: Path) -> tuple[TensorInfo, ...]:
    """Every tensor of a model folder: the index's shards, or every ``*.safetensors`` file."""
    root = cached_repository_root(folder)
    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        _check_inside(index_path, root)
        names = read_checkpoint_index(index_path).shard_files
    else:
        names = tuple(sorted(p.name for p in folder.glob("*.safetensors")))[: MAX_SHARD_FILES + 1]
        if len(names) > MAX_SHARD_FILES:
            raise WeightFileError(path=str(folder), reason=f"holds over {MAX_SHARD_FILES} files")
    if not names:
        raise WeightFileError(
            path=str(folder), reason="holds no *.safetensors file; point at the model's folder"
        )
    tensors: list[TensorInfo] = []
    seen: set[tuple[int, int]] = set()
    for name in names:
        path = folder / name
        _check_inside(path, root)
        try:
            identity = os.stat(path)
        except OSError:
            identity = None  # read_safetensors_header names the problem
        if identity is not None:
            key = (identity.st_dev, identity.st_ino)
            if key in seen:  # another name (a link) of a shard already read
                continue
            seen.add(key)
        tensors.extend(read_safetensors_header(path))
        if len(tensors) > MAX_FOLDER_TENSORS:
            raise WeightFileError(
                path=str(folder), reason=f"its shards list over {MAX_FOLDER_TENSORS} tensors"
            )
    if not tensors:
        raise WeightFileError(
            path=str(folder), reason="its safetensors files list no tensor (empty headers)"
        )
    return tuple(tensors)
