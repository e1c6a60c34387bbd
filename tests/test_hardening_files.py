"""Hostile files: pipes and devices, cache escapes, safetensors headers past their bounds.

Each case names what would go wrong without the check: a hang (a FIFO opened
for reading waits for a writer), a path escape (an id, revision, ref or link
leading out of the Hugging Face cache), memory (a header listing millions of
tensors), a double count (overlapping offsets, one shard under two names) or
a traceback (a NUL in a shard name).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.memory_profile.errors import WeightFileError
from kvpure.memory_profile.safetensors_header import (
    MAX_FILE_TENSORS,
    MAX_TENSOR_DIMS,
    read_checkpoint_index,
    read_model_folder,
    read_safetensors_header,
)
from kvpure.models.errors import ModelNotCachedError
from kvpure.models.hf_cache import check_model_id, resolve_model_config, resolve_model_folder
from kvpure.user_files import NotARegularFileError, open_regular, read_regular_bytes
from tests.safetensors_files import write_index, write_safetensors

REV = "0123456789abcdef0123456789abcdef01234567"

# -- regular files only -----------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo: Path) -> None:
    with pytest.raises(NotARegularFileError, match="named pipe"):
        open_regular(fifo)


def test_a_device_is_refused() -> None:
    with pytest.raises(NotARegularFileError, match="device"):
        read_regular_bytes("/dev/zero", 10)


def test_a_nul_in_a_path_is_a_typed_error() -> None:
    with pytest.raises(InvalidFieldError, match="NUL"):
        open_regular("config\0.json")


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    assert read_regular_bytes(tmp_path / "link.json", 10) == b"{}"
    with pytest.raises(InvalidFieldError, match="too large"):
        read_regular_bytes(tmp_path / "a.json", 1)


@pytest.mark.parametrize("command", ["plan", "hash", "cache-replay"])
def test_the_cli_refuses_a_fifo_in_one_line(
    command: str, fifo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvpure: error: ")
    assert "named pipe" in err
    assert err.count("\n") == 1


def test_the_cli_refuses_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "/dev/zero"]) == 2
    assert "device" in capsys.readouterr().err


# -- the Hugging Face cache ---------------------------------------------------------


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def _cache(hub: Path, ref: str | None = REV) -> Path:
    folder = hub / "models--org--m"
    (folder / "snapshots" / REV).mkdir(parents=True)
    (folder / "snapshots" / REV / "config.json").write_text("{}")
    if ref is not None:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(ref)
    return folder


@pytest.mark.parametrize(
    "model",
    [
        "../m",
        "org/..",
        "org/m@..",
        "org/m@../../etc",
        "/etc/passwd",
        "org",
        "org/m/extra",
        "org/.hidden",
        "org/m@",
        "org/m@a/b",
        "org\0/m",
        "",
    ],
)
def test_bad_ids_and_revisions_are_refused_before_any_path_is_built(model: str) -> None:
    with pytest.raises(InvalidFieldError, match="hub id"):
        check_model_id(model)
    with pytest.raises(InvalidFieldError):
        resolve_model_folder(model)


def test_a_good_id_is_found(hub: Path) -> None:
    _cache(hub)
    assert resolve_model_folder("org/m").name == REV


@pytest.mark.parametrize("content", ["..", ".", "../../etc", "/etc", ".hidden", "a/b"])
def test_a_ref_that_is_not_one_plain_name_is_not_followed(hub: Path, content: str) -> None:
    folder = _cache(hub, ref=content)
    (folder / "snapshots" / "x").mkdir()  # two snapshots: listing cannot pick one
    (folder / "snapshots" / "x" / "config.json").write_text("{}")
    with pytest.raises(ModelNotCachedError):
        resolve_model_config("org/m")


def test_a_snapshot_linked_outside_the_cache_is_refused(hub: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text('{"secret": 1}')
    folder = hub / "models--org--m"
    (folder / "snapshots").mkdir(parents=True)
    (folder / "snapshots" / REV).symlink_to(outside)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REV)
    with pytest.raises(ModelNotCachedError, match="outside the cached repository folder"):
        resolve_model_config("org/m")


def test_a_config_linked_outside_the_cache_is_refused(hub: Path, tmp_path: Path) -> None:
    folder = _cache(hub)
    (tmp_path / "elsewhere.json").write_text("{}")
    config = folder / "snapshots" / REV / "config.json"
    config.unlink()
    config.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ModelNotCachedError, match="outside"):
        resolve_model_config("org/m")


def test_a_config_linked_to_the_blobs_folder_is_read(hub: Path) -> None:
    folder = _cache(hub)
    (folder / "blobs").mkdir()
    (folder / "blobs" / "abc").write_text("{}")
    config = folder / "snapshots" / REV / "config.json"
    config.unlink()
    config.symlink_to(Path("../../blobs/abc"))  # huggingface_hub's own layout
    assert resolve_model_config("org/m") == config


def test_a_cached_repository_folder_given_as_a_path_cannot_escape(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _cache(hub)
    config = folder / "snapshots" / REV / "config.json"
    config.unlink()
    (tmp_path / "elsewhere.json").write_text("{}")
    config.symlink_to(tmp_path / "elsewhere.json")
    assert main(["plan", str(folder), "--kv-cache-memory", "1GiB"]) == 2
    assert "outside" in capsys.readouterr().err


# -- safetensors headers ----------------------------------------------------------


def _raw_header(path: Path, header: Mapping[str, object], data: int = 0) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data))


def test_a_shape_with_too_many_dimensions_is_refused(tmp_path: Path) -> None:
    shape = [1] * (MAX_TENSOR_DIMS + 1)
    _raw_header(
        tmp_path / "a.safetensors",
        {"t": {"dtype": "U8", "shape": shape, "data_offsets": [0, 1]}},
        1,
    )
    with pytest.raises(WeightFileError, match="dimensions"):
        read_safetensors_header(tmp_path / "a.safetensors")


def test_a_huge_shape_product_is_refused_without_printing_it(tmp_path: Path) -> None:
    shape = [2**47] * MAX_TENSOR_DIMS
    _raw_header(
        tmp_path / "a.safetensors",
        {"t": {"dtype": "F64", "shape": shape, "data_offsets": [0, 8]}},
        8,
    )
    with pytest.raises(WeightFileError, match="shape holds over") as info:
        read_safetensors_header(tmp_path / "a.safetensors")
    assert len(str(info.value)) < 300


def test_too_many_tensors_in_one_header_are_refused(tmp_path: Path) -> None:
    header = {
        f"t{i}": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
        for i in range(MAX_FILE_TENSORS + 1)
    }
    _raw_header(tmp_path / "a.safetensors", header)
    with pytest.raises(WeightFileError, match="over"):
        read_safetensors_header(tmp_path / "a.safetensors")


def test_overlapping_offsets_are_refused(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
        "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]},
    }
    _raw_header(tmp_path / "a.safetensors", header, 6)
    with pytest.raises(WeightFileError, match="overlap"):
        read_safetensors_header(tmp_path / "a.safetensors")


def test_adjacent_and_empty_tensors_do_not_overlap(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
        "e": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]},
        "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]},
    }
    _raw_header(tmp_path / "a.safetensors", header, 8)
    assert [t.name for t in read_safetensors_header(tmp_path / "a.safetensors")] == ["a", "e", "b"]


def test_a_fifo_shard_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "model.safetensors")
    with pytest.raises(WeightFileError, match="named pipe"):
        read_model_folder(tmp_path)


def test_shards_that_are_one_file_are_read_once(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "real.safetensors", {"w": ("BF16", (4, 4))})
    for i in range(3):
        (tmp_path / f"alias{i}.safetensors").symlink_to(tmp_path / "real.safetensors")
    index = {
        "metadata": {"total_size": 32},
        "weight_map": {f"w{i}": f"alias{i}.safetensors" for i in range(3)}
        | {"w": "real.safetensors"},
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    assert [t.name for t in read_model_folder(tmp_path)] == ["w"]


@pytest.mark.parametrize("name", ["a\0b.safetensors", "..", ".", ""])
def test_shard_names_that_are_not_plain_are_typed_errors(tmp_path: Path, name: str) -> None:
    index = {"metadata": {"total_size": 0}, "weight_map": {"w": name}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(WeightFileError, match="plain file name"):
        read_checkpoint_index(tmp_path / "model.safetensors.index.json")


def test_a_normal_sharded_folder_still_reads(tmp_path: Path) -> None:
    write_index(
        tmp_path, {"a.safetensors": {"x": ("BF16", (2, 2))}, "b.safetensors": {"y": ("F32", (3,))}}
    )
    assert sorted(t.name for t in read_model_folder(tmp_path)) == ["x", "y"]


def test_a_config_naming_a_trillion_experts_is_refused_at_once() -> None:
    from kvpure.memory_profile.checkpoint_tensors import MAX_EXPERT_LAYERS, checkpoint_tensors
    from kvpure.models.config import parse_model_config

    config = json.loads((Path(__file__).parent.parent / "examples" / "llama3_8b.json").read_text())
    config["num_local_experts"] = 10**12
    with pytest.raises(InvalidFieldError, match=str(MAX_EXPERT_LAYERS)):
        checkpoint_tensors(parse_model_config(config))
