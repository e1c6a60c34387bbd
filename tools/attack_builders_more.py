"""Builders of the wider attack set (:mod:`attack_cases_paths`, :mod:`attack_cases_inputs`).

Each returns a ``make(d)`` that builds a case's files in its fresh folder ``d``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
from collections.abc import Callable
from pathlib import Path

from attack_builders import EX, REV, _hub, _tokenizer

Make = Callable[[Path], None]


def special(path: Path, kind: str) -> None:
    """``path`` made a ``fifo``, ``socket``, ``dir``, or a link to ``/dev/zero``
    (``zero``) or ``/etc/passwd`` (``passwd``), replacing what is there."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.close()
    elif kind == "dir":
        path.mkdir()
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "passwd":
        path.symlink_to("/etc/passwd")
    else:
        raise ValueError(kind)


def special_at(name: str, kind: str, base: Make | None = None) -> Make:
    """``base`` built, then ``d/name`` made ``kind``."""

    def make(d: Path) -> None:
        if base is not None:
            base(d)
        special(d / name, kind)

    return make


def hub_with(change: Callable[[Path, Path], None], **hub: str) -> Make:
    """The cache of :func:`attack_builders._hub`, then ``change(d, repo_folder)``."""

    def make(d: Path) -> None:
        _hub(**hub)(d)
        change(d, d / "hub" / "models--org--m")

    return make


def ref_bytes(data: bytes) -> Make:
    def change(d: Path, repo: Path) -> None:
        (repo / "refs" / "main").write_bytes(data)

    return hub_with(change)


def ref_special(kind: str) -> Make:
    return hub_with(lambda d, repo: special(repo / "refs" / "main", kind))


def snapshot_link(target: str) -> Make:
    """``snapshots/REV`` a link to ``target`` (``{d}`` is the case folder)."""

    def change(d: Path, repo: Path) -> None:
        snap = repo / "snapshots" / REV
        shutil.rmtree(snap)
        snap.symlink_to(target.replace("{d}", str(d)))

    return hub_with(change)


def weights_in_hub(link_outside: bool) -> Make:
    """A cached qwen2 snapshot whose ``model.safetensors`` lies in ``blobs/`` (the
    control) or outside the cache (``{d}/outside``)."""

    def change(d: Path, repo: Path) -> None:
        snap = repo / "snapshots" / REV
        shutil.copy(EX / "qwen2_7b.json", snap / "config.json")
        raw = json.dumps({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
        body = struct.pack("<Q", len(raw)) + raw + bytes(2)
        if link_outside:
            (d / "outside" / "model.safetensors").write_bytes(body)
            (snap / "model.safetensors").symlink_to(d / "outside" / "model.safetensors")
        else:
            (repo / "blobs").mkdir()
            (repo / "blobs" / "abc").write_bytes(body)
            (snap / "model.safetensors").symlink_to("../../blobs/abc")

    return hub_with(change)


def tokenizer_special(name: str, kind: str, template: str | None = None) -> Make:
    """The tiny tokenizer in ``d/tok`` with ``name`` made ``kind``; a chat workload beside."""
    return special_at(f"tok/{name}", kind, both(_tokenizer(template=template), chat_workload))


def tokenizer_json(data: object) -> Make:
    """The tiny tokenizer with its tokenizer.json replaced by ``data`` (JSON-dumped unless
    a str; a function is called first), and a chat workload."""

    def make(d: Path) -> None:
        made = data() if callable(data) else data
        text = made if isinstance(made, str) else json.dumps(made)
        _tokenizer()(d)
        (d / "tok" / "tokenizer.json").write_bytes(text.encode("utf-8", "surrogateescape"))
        chat_workload(d)

    return make


def tokenizer_edit(edit: Callable[[dict[str, object]], None]) -> Make:
    """The tiny tokenizer with its tokenizer.json edited in place; a prompt workload."""

    def make(d: Path) -> None:
        _tokenizer()(d)
        path = d / "tok" / "tokenizer.json"
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
        (d / "w.jsonl").write_text(json.dumps({"prompt": "aaaa " * 2000 + "b"}) + "\n")

    return make


def chat_workload(d: Path) -> None:
    (d / "w.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))


def both(*makers: Make) -> Make:
    def make(d: Path) -> None:
        for maker in makers:
            maker(d)

    return make


def header(
    raw: bytes | dict[str, object] | Callable[[], bytes], data: int = 0, length: int | None = None
) -> Make:
    """``d/m`` (a qwen2 config) with ``model.safetensors`` of header ``raw`` (bytes, a
    header to dump, or a function making the bytes; its stated length ``length``, default
    the true one) and ``data`` bytes after it."""

    def make(d: Path) -> None:
        (d / "m").mkdir()
        shutil.copy(EX / "qwen2_7b.json", d / "m" / "config.json")
        made = raw() if callable(raw) else raw
        body = made if isinstance(made, bytes) else json.dumps(made).encode()
        stated = len(body) if length is None else length
        (d / "m" / "model.safetensors").write_bytes(struct.pack("<Q", stated) + body + bytes(data))

    return make


def tensor(dtype: object = "BF16", shape: object = (1,), offsets: object = (0, 2)) -> object:
    return {
        "dtype": dtype,
        "shape": list(shape) if isinstance(shape, tuple) else shape,
        "data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets,
    }


def index(weight_map: object, total: object = 2, shards: dict[str, object] | None = None) -> Make:
    """``d/m`` with a ``model.safetensors.index.json`` and ``shards`` (name: header)."""

    def make(d: Path) -> None:
        (d / "m").mkdir()
        shutil.copy(EX / "qwen2_7b.json", d / "m" / "config.json")
        for name, head in (shards or {"s.safetensors": {"a": tensor()}}).items():
            raw = json.dumps(head).encode()
            (d / "m" / name).write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(2))
        names = weight_map() if callable(weight_map) else weight_map
        full = {"metadata": {"total_size": total}, "weight_map": names}
        (d / "m" / "model.safetensors.index.json").write_text(json.dumps(full))

    return make


def lines(
    text: str | bytes | Callable[[], str | bytes], count: int = 1, name: str = "w.jsonl"
) -> Make:
    """``d/name`` holding ``text`` (or what a function returns) ``count`` times."""

    def make(d: Path) -> None:
        made = text() if callable(text) else text
        data = made.encode("utf-8", "surrogatepass") if isinstance(made, str) else made
        with (d / name).open("wb") as out:
            step = max(1, (1 << 22) // max(1, len(data)))
            left = count
            while left > 0:
                out.write(data * min(step, left))
                left -= step

    return make


def trace_with(**changes: object) -> Make:
    """The bundled cache-replay trace, top-level keys replaced (``ops`` included)."""

    def make(d: Path) -> None:
        trace = json.loads((EX / "cache_replay_trace.json").read_text())
        config = trace["plan_input"]["vllm_config"]["cache_config"]
        for key, value in changes.items():
            if key == "blocks":
                config["num_gpu_blocks_override"] = value
            else:
                trace[key] = value
        (d / "t.json").write_text(json.dumps(trace))

    return make


def request_with(**fields: object) -> Make:
    def make(d: Path) -> None:
        request = json.loads((EX / "request.json").read_text())
        request.update(fields)
        (d / "r.json").write_text(json.dumps(request))

    return make


def capture(records: bytes) -> Make:
    return lambda d: (d / "c.bin").write_bytes(records)


def frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload
