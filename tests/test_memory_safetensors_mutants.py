"""safetensors headers at the edges of the format and of kvpure's stated limits.

The format is the safetensors specification (8-byte little-endian header length,
a JSON header, ``data_offsets`` ``[begin, end)`` into the bytes after the header);
a file the ``safetensors`` package itself writes must read back with its shapes.
The limits are the module's stated figures (:data:`MAX_TENSOR_DIMS` and the
others): each is accepted at the figure and refused one step past it.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from kvpure.memory_profile import safetensors_header as sh
from kvpure.memory_profile.errors import WeightFileError
from kvpure.memory_profile.safetensors_header import (
    MAX_HEADER_BYTES,
    MAX_TENSOR_BYTES,
    MAX_TENSOR_DIMS,
    TensorInfo,
    read_checkpoint_index,
    read_model_folder,
    read_safetensors_header,
)


def _write(path: Path, header: dict[str, Any], data_bytes: int = 0) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data_bytes))
    return path


def _entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_a_file_written_by_the_safetensors_package_reads_back(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    save_file = pytest.importorskip("safetensors.numpy").save_file
    tensors = {
        "a": np.zeros((3, 5), dtype=np.float16),
        "b": np.zeros((7,), dtype=np.float32),
        "c": np.zeros((2, 0, 4), dtype=np.int64),
        "d": np.zeros((), dtype=np.uint8),
        "e": np.zeros((3,), dtype=np.complex64),
    }
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    got = {t.name: (t.dtype, t.shape, t.nbytes) for t in read_safetensors_header(path)}
    assert got == {
        "a": ("F16", (3, 5), 30),
        "b": ("F32", (7,), 28),
        "c": ("I64", (2, 0, 4), 0),
        "d": ("U8", (), 1),
        "e": ("C64", (3,), 24),
    }


def test_itemsizes_are_the_formats() -> None:
    # safetensors' Dtype::bitsize / 8 for the byte-sized types
    assert TensorInfo(name="t", dtype="F64", shape=(3,)).nbytes == 24
    assert TensorInfo(name="t", dtype="I16", shape=(2, 3)).nbytes == 12
    assert TensorInfo(name="t", dtype="F8_E4M3", shape=(5,)).itemsize == 1
    assert TensorInfo(name="t", dtype="BOOL", shape=()).nbytes == 1


def test_dimension_limit_at_the_figure_and_past_it(tmp_path: Path) -> None:
    ok = _write(tmp_path / "ok", {"t": _entry("U8", [1] * MAX_TENSOR_DIMS, 0, 1)}, 1)
    assert read_safetensors_header(ok)[0].shape == (1,) * MAX_TENSOR_DIMS
    bad = _write(tmp_path / "bad", {"t": _entry("U8", [1] * (MAX_TENSOR_DIMS + 1), 0, 1)}, 1)
    with pytest.raises(WeightFileError, match="dimensions"):
        read_safetensors_header(bad)


def test_tensor_byte_limit_at_the_figure_and_past_it(tmp_path: Path) -> None:
    # exactly MAX_TENSOR_BYTES passes the size check (then the file is too short for it)
    at = _write(tmp_path / "at", {"t": _entry("U8", [2**24, 2**24], 0, MAX_TENSOR_BYTES)})
    with pytest.raises(WeightFileError, match="past the file's end"):
        read_safetensors_header(at)
    past = _write(tmp_path / "past", {"t": _entry("U16", [2**24, 2**24], 0, 2 * MAX_TENSOR_BYTES)})
    with pytest.raises(WeightFileError, match="shape holds over"):
        read_safetensors_header(past)


@pytest.mark.parametrize(("dim", "ok"), [(2**48 - 1, True), (2**48, False), (-1, False)])
def test_one_dimension_below_two_to_the_48(tmp_path: Path, dim: int, ok: bool) -> None:
    path = _write(tmp_path / "t", {"t": _entry("U8", [dim], 0, max(dim, 0))})
    if ok:
        with pytest.raises(WeightFileError, match="past the file's end"):
            read_safetensors_header(path)
    else:
        with pytest.raises(WeightFileError, match="non-negative integers"):
            read_safetensors_header(path)


@pytest.mark.parametrize(
    "offsets", [[0], [0, 2, 2], [False, 2], [0, True], "0,2", [0.0, 2], [-2, 0], [2, 0]]
)
def test_offsets_that_are_not_a_begin_and_end(tmp_path: Path, offsets: object) -> None:
    header = {"t": {"dtype": "U8", "shape": [2], "data_offsets": offsets}}
    with pytest.raises(WeightFileError, match="data_offsets"):
        read_safetensors_header(_write(tmp_path / "t", header, 2))


def test_shapes_that_are_not_lists_of_ints(tmp_path: Path) -> None:
    for shape in ([True], [2.0], "2", None):
        header = {"t": {"dtype": "U8", "shape": shape, "data_offsets": [0, 2]}}
        with pytest.raises(WeightFileError, match="shape must be"):
            read_safetensors_header(_write(tmp_path / "t", header, 2))
    not_objects: tuple[object, ...] = ([], "x", None)
    for raw in not_objects:
        with pytest.raises(WeightFileError, match="not an object"):
            read_safetensors_header(_write(tmp_path / "t", {"t": raw}))
    with pytest.raises(WeightFileError, match="unknown dtype"):
        read_safetensors_header(_write(tmp_path / "t", {"t": _entry("u8", [1], 0, 1)}, 1))
    with pytest.raises(WeightFileError, match="unknown dtype"):
        read_safetensors_header(
            _write(tmp_path / "t", {"t": {"dtype": 1, "shape": [1], "data_offsets": [0, 1]}}, 1)
        )


def test_the_data_may_end_exactly_at_the_files_end(tmp_path: Path) -> None:
    header = {"a": _entry("U8", [3], 0, 3), "b": _entry("F32", [2], 3, 11)}
    got = read_safetensors_header(_write(tmp_path / "t", header, 11))
    assert [(t.name, t.shape) for t in got] == [("a", (3,)), ("b", (2,))]
    with pytest.raises(WeightFileError, match="past the file's end"):
        read_safetensors_header(_write(tmp_path / "t", header, 10))
    # offsets that begin past 0 are fine too (gaps are not the reader's concern)
    gap = {"a": _entry("U8", [3], 5, 8)}
    assert read_safetensors_header(_write(tmp_path / "t", gap, 8))[0].nbytes == 3


def test_overlap_is_found_in_any_header_order(tmp_path: Path) -> None:
    # b is listed first but lies after a; c overlaps a's last byte
    header = {
        "b": _entry("U8", [2], 4, 6),
        "a": _entry("U8", [4], 0, 4),
        "c": _entry("U8", [2], 3, 5),
    }
    with pytest.raises(WeightFileError, match="'a' and 'c' overlap"):
        read_safetensors_header(_write(tmp_path / "t", header, 6))
    # an empty tensor inside another's range holds no byte: no overlap
    inside = {"a": _entry("U8", [4], 0, 4), "e": _entry("U8", [0], 2, 2)}
    assert len(read_safetensors_header(_write(tmp_path / "t", inside, 4))) == 2
    # an empty tensor first does not end the search
    after_empty = {
        "e": _entry("U8", [0], 0, 0),
        "a": _entry("U8", [4], 0, 4),
        "c": _entry("U8", [4], 2, 6),
    }
    with pytest.raises(WeightFileError, match="'a' and 'c' overlap"):
        read_safetensors_header(_write(tmp_path / "t", after_empty, 6))
    # a tensor starting at byte 0 after empty ones
    empties = {"e": _entry("U8", [0], 0, 0), "a": _entry("U8", [1], 0, 1)}
    assert len(read_safetensors_header(_write(tmp_path / "t", empties, 1))) == 2


def test_header_limit_is_the_safetensors_packages(tmp_path: Path) -> None:
    # safetensors refuses 100,000,001 bytes ("header too large") and reads the length
    # 100,000,000 (then fails on the missing bytes): kvpure's bound is the same figure
    assert MAX_HEADER_BYTES == 100_000_000
    safe_open = pytest.importorskip("safetensors").safe_open
    for length, reason in ((100_000_000, "invalid header length"), (100_000_001, "too large")):
        path = tmp_path / f"h{length}"
        path.write_bytes(struct.pack("<Q", length) + b"{}")
        with pytest.raises(Exception, match=reason):
            safe_open(str(path), "pt")


def test_header_length_at_the_limit_is_read(tmp_path: Path) -> None:
    at = tmp_path / "at"
    at.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES) + b"{}")
    with pytest.raises(WeightFileError, match="file ends first"):
        read_safetensors_header(at)
    past = tmp_path / "past"
    past.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}")
    with pytest.raises(WeightFileError, match="exceeds"):
        read_safetensors_header(past)
    seven = tmp_path / "seven"
    seven.write_bytes(b"\x02" + bytes(6))
    with pytest.raises(WeightFileError, match="8-byte"):
        read_safetensors_header(seven)


def test_tensor_count_limit_does_not_count_the_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sh, "MAX_FILE_TENSORS", 2)
    two = {
        "__metadata__": {"format": "pt"},
        "a": _entry("U8", [1], 0, 1),
        "b": _entry("U8", [1], 1, 2),
    }
    assert [t.name for t in read_safetensors_header(_write(tmp_path / "t", two, 2))] == ["a", "b"]
    three = {**two, "c": _entry("U8", [1], 2, 3)}
    with pytest.raises(WeightFileError, match="over 2 tensors"):
        read_safetensors_header(_write(tmp_path / "t", three, 3))


def test_folder_tensor_limit_at_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sh, "MAX_FOLDER_TENSORS", 2)
    _write(tmp_path / "a.safetensors", {"a": _entry("U8", [1], 0, 1)}, 1)
    _write(tmp_path / "b.safetensors", {"b": _entry("U8", [1], 0, 1)}, 1)
    assert [t.name for t in read_model_folder(tmp_path)] == ["a", "b"]
    _write(tmp_path / "c.safetensors", {"c": _entry("U8", [1], 0, 1)}, 1)
    with pytest.raises(WeightFileError, match="over 2 tensors"):
        read_model_folder(tmp_path)


def test_shard_file_limit_at_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sh, "MAX_SHARD_FILES", 2)
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.safetensors", {name: _entry("U8", [1], 0, 1)}, 1)
    assert len(read_model_folder(tmp_path)) == 2
    _write(tmp_path / "c.safetensors", {"c": _entry("U8", [1], 0, 1)}, 1)
    with pytest.raises(WeightFileError, match="holds over 2 files"):
        read_model_folder(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(
        json.dumps(
            {
                "metadata": {"total_size": 2},
                "weight_map": {"a": "a.safetensors", "b": "b.safetensors"},
            }
        )
    )
    assert read_checkpoint_index(index).shard_files == ("a.safetensors", "b.safetensors")
    index.write_text(
        json.dumps(
            {
                "metadata": {"total_size": 3},
                "weight_map": {"a": "a.safetensors", "b": "b.safetensors", "c": "c.safetensors"},
            }
        )
    )
    with pytest.raises(WeightFileError, match="more than 2 shard files"):
        read_checkpoint_index(index)


def test_the_index_lists_its_shards_once_sorted(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    weight_map = {"x": "b.safetensors", "y": "a.safetensors", "z": "b.safetensors"}
    index.write_text(json.dumps({"metadata": {"total_size": 7.0}, "weight_map": weight_map}))
    got = read_checkpoint_index(index)
    assert got.total_size == 7
    assert type(got.total_size) is int
    assert got.shard_files == ("a.safetensors", "b.safetensors")
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": {}}))
    assert read_checkpoint_index(index).total_size == 0
    for bad in (7.5, True, "7", None):
        index.write_text(json.dumps({"metadata": {"total_size": bad}, "weight_map": weight_map}))
        with pytest.raises(WeightFileError, match="total_size"):
            read_checkpoint_index(index)
    index.write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": {"x": 3}}))
    with pytest.raises(WeightFileError, match="weight_map"):
        read_checkpoint_index(index)
    for name in ("", ".", "..", "a/b.safetensors", "a\0.safetensors"):
        index.write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": {"x": name}}))
        with pytest.raises(WeightFileError, match="plain file name"):
            read_checkpoint_index(index)
    index.write_bytes(b"\xff")
    with pytest.raises(WeightFileError, match="not valid UTF-8 JSON"):
        read_checkpoint_index(index)


def test_a_folder_reads_through_its_index_only(tmp_path: Path) -> None:
    _write(tmp_path / "a.safetensors", {"a": _entry("U8", [1], 0, 1)}, 1)
    _write(tmp_path / "stray.safetensors", {"s": _entry("U8", [1], 0, 1)}, 1)
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 1}, "weight_map": {"a": "a.safetensors"}})
    )
    assert [t.name for t in read_model_folder(tmp_path)] == ["a"]


def test_a_hard_link_and_a_missing_shard(tmp_path: Path) -> None:
    _write(tmp_path / "a.safetensors", {"a": _entry("U8", [1], 0, 1)}, 1)
    os.link(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    _write(tmp_path / "c.safetensors", {"c": _entry("U8", [1], 0, 1)}, 1)
    assert [t.name for t in read_model_folder(tmp_path)] == ["a", "c"]  # b is a again
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {"total_size": 1},
                "weight_map": {"a": "a.safetensors", "m": "m.safetensors"},
            }
        )
    )
    with pytest.raises(WeightFileError, match="cannot be read"):
        read_model_folder(tmp_path)


def test_the_stated_limits() -> None:
    # the figures the module states (issue 24: caps "at a stated count")
    assert sh.MAX_INDEX_BYTES == 64 * 2**20
    assert sh.MAX_SHARD_FILES == 4096
    assert (MAX_TENSOR_DIMS, MAX_TENSOR_BYTES) == (16, 2**48)
    assert (sh.MAX_FILE_TENSORS, sh.MAX_FOLDER_TENSORS) == (262_144, 2**20)


def test_every_safetensors_dtype_and_its_size() -> None:
    # bytes per element of safetensors' byte-sized dtypes as its spec sizes them
    assert dict(sh.DTYPE_BYTES) == {
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
