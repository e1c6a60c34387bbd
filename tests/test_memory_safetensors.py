"""The safetensors header reader: shapes from headers alone, bad files refused by name."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kvpure.memory_profile.errors import WeightFileError
from kvpure.memory_profile.safetensors_header import (
    MAX_HEADER_BYTES,
    read_checkpoint_index,
    read_model_folder,
    read_safetensors_header,
)
from kvpure.models.errors import ModelNotCachedError
from kvpure.models.hf_cache import resolve_model_folder
from tests.safetensors_files import write_index, write_safetensors


def test_header_lists_every_tensor_with_dtype_shape_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_safetensors(
        path, {"a.weight": ("BF16", (3, 5)), "b.scale": ("F32", ()), "c": ("U8", (7,))}
    )
    tensors = read_safetensors_header(path)
    assert [(t.name, t.dtype, t.shape, t.nbytes) for t in tensors] == [
        ("a.weight", "BF16", (3, 5), 30),
        ("b.scale", "F32", (), 4),
        ("c", "U8", (7,), 7),
    ]


def test_index_total_size_and_folder_through_the_index(tmp_path: Path) -> None:
    total = write_index(
        tmp_path,
        {
            "model-00001-of-00002.safetensors": {"x": ("BF16", (4, 4))},
            "model-00002-of-00002.safetensors": {"y": ("F16", (2,)), "z": ("F32", (3,))},
        },
    )
    index = read_checkpoint_index(tmp_path / "model.safetensors.index.json")
    assert index.total_size == total == 32 + 4 + 12
    assert sum(t.nbytes for t in read_model_folder(tmp_path)) == index.total_size


def test_folder_without_index_reads_every_file(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "a.safetensors", {"x": ("BF16", (2, 2))})
    write_safetensors(tmp_path / "b.safetensors", {"y": ("BF16", (3,))})
    assert [t.name for t in read_model_folder(tmp_path)] == ["x", "y"]


def _raw(path: Path, header: bytes, data: bytes = b"", length: int | None = None) -> Path:
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + data)
    return path


@pytest.mark.parametrize(
    ("header", "data", "length", "reason"),
    [
        (b"", b"", MAX_HEADER_BYTES + 1, "exceeds"),
        (b"{}", b"", 50, "file ends first"),
        (b"not json", b"", None, "not valid UTF-8 JSON"),
        (b"[1]", b"", None, "not a JSON object"),
        (
            json.dumps({"t": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 1]}}).encode(),
            b"x",
            None,
            "unknown dtype",
        ),
        (
            json.dumps({"t": {"dtype": "BF16", "shape": [-1], "data_offsets": [0, 2]}}).encode(),
            b"xx",
            None,
            "shape",
        ),
        (
            json.dumps({"t": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 2]}}).encode(),
            b"xx",
            None,
            "do not hold 4 bytes",
        ),
        (
            json.dumps({"t": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode(),
            b"xx",
            None,
            "past the file's end",
        ),
        (
            json.dumps({"t": {"dtype": "BF16", "shape": [2]}}).encode(),
            b"",
            None,
            "data_offsets must be",
        ),
    ],
)
def test_bad_headers_raise_a_typed_error_naming_the_file(
    tmp_path: Path, header: bytes, data: bytes, length: int | None, reason: str
) -> None:
    path = _raw(tmp_path / "bad.safetensors", header, data, length)
    with pytest.raises(WeightFileError, match=reason) as caught:
        read_safetensors_header(path)
    assert caught.value.path == str(path)


def test_short_file_and_missing_folder_contents(tmp_path: Path) -> None:
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x02")
    with pytest.raises(WeightFileError, match="8-byte"):
        read_safetensors_header(short)
    with pytest.raises(WeightFileError, match="cannot be read"):
        read_safetensors_header(tmp_path / "absent.safetensors")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WeightFileError, match=r"no \*\.safetensors"):
        read_model_folder(empty)


@pytest.mark.parametrize(
    ("index", "reason"),
    [
        ({"weight_map": {}}, "total_size"),
        ({"metadata": {"total_size": -1}, "weight_map": {}}, "total_size"),
        ({"metadata": {"total_size": 3}, "weight_map": []}, "weight_map"),
        ({"metadata": {"total_size": 3}, "weight_map": {"x": "../evil.safetensors"}}, "plain file"),
    ],
)
def test_bad_index_is_refused(tmp_path: Path, index: object, reason: str) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    with pytest.raises(WeightFileError, match=reason):
        read_checkpoint_index(path)


def test_hub_cache_snapshot_is_found_through_its_ref(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--tiny"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123\n")
    (snapshot / "config.json").write_text("{}")
    write_safetensors(snapshot / "model.safetensors", {"x": ("BF16", (2,))})
    env = {"HF_HUB_CACHE": str(tmp_path)}
    found = resolve_model_folder("org/tiny", env)
    assert found == snapshot
    assert [t.name for t in read_model_folder(found)] == ["x"]
    assert resolve_model_folder("org/tiny@abc123", env) == snapshot
    with pytest.raises(ModelNotCachedError, match="org/absent"):
        resolve_model_folder("org/absent", env)
