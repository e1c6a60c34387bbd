"""What a hostile input of :mod:`attacks` is, and the builders that make its files.

A case builds its files in a fresh folder ``d`` and names the command (``kvpure``'s
arguments, or Python code that must raise a kvpure error). ``{d}`` in an argument
is that folder; ``{ex}`` the repository's ``examples`` folder.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
REV = "0123456789abcdef0123456789abcdef01234567"
MEM = ("--kv-cache-memory", "4GiB")
LLAMA = ("--model", "{ex}/llama3_8b.json", *MEM)


@dataclass(frozen=True)
class Attack:
    """One hostile input. ``expect``: ``refused`` (exit 2 / a kvpure error), ``clean``
    (exit 0 or 2, no traceback: a hostile input that is also valid), ``works`` (exit 0)
    or, for Python code only, ``survives`` (no crash, whatever is raised)."""

    name: str
    item: int
    argv: tuple[str, ...] = ()
    code: str = ""
    make: Callable[[Path], None] = lambda d: None
    expect: str = "refused"
    stdin: bytes = b""
    outputs: tuple[str, ...] = ()  # files the command may write, relative to d
    max_stdout: int = 1 << 20
    env: dict[str, str] = field(default_factory=dict)
    heavy: bool = False  # seconds of CPU: left out of --quick (the test suite's run)


# -- builders ---------------------------------------------------------------------


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda d: os.mkfifo(d / name)


def _write(name: str, text: str | bytes) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")

    return make


def _both(*makers: Callable[[Path], None]) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        for maker in makers:
            maker(d)

    return make


def _tokenizer(template: str | None = None, **files: str) -> Callable[[Path], None]:
    """A copy of the tiny chat tokenizer in ``d/tok`` with a chat template or files replaced."""

    def make(d: Path) -> None:
        shutil.copytree(EX / "tiny-chat-tokenizer", d / "tok")
        if template is not None:
            config_path = d / "tok" / "tokenizer_config.json"
            config = json.loads(config_path.read_text())
            config["chat_template"] = template
            config_path.write_text(json.dumps(config))
        for name, text in files.items():
            target = d / "tok" / name.replace("__", ".")
            target.unlink()
            if text == "FIFO":
                os.mkfifo(target)
            else:
                target.write_text(text)

    return make


def _chat_workload(d: Path) -> None:
    (d / "w.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))


def _hub(
    ref: str = REV, link: str | None = None, config_link: str | None = None
) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        folder = d / "hub" / "models--org--m"
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text(ref)
        (d / "outside").mkdir()
        shutil.copy(EX / "llama3_8b.json", d / "outside" / "config.json")
        if link is not None:
            (folder / "snapshots").mkdir()
            (folder / "snapshots" / REV).symlink_to(d / link)
            return
        (folder / "snapshots" / REV).mkdir(parents=True)
        config = folder / "snapshots" / REV / "config.json"
        if config_link is not None:
            config.symlink_to(config_link.replace("{d}", str(d)))
        else:
            shutil.copy(EX / "llama3_8b.json", config)
        (folder / "snapshots" / "other").mkdir()
        shutil.copy(EX / "llama3_8b.json", folder / "snapshots" / "other" / "config.json")

    return make


def _safetensors(
    header: dict[str, object] | bytes, data: int = 0, index: object = None
) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / "m").mkdir()
        shutil.copy(EX / "qwen2_7b.json", d / "m" / "config.json")
        raw = header if isinstance(header, bytes) else json.dumps(header).encode()
        name = "model.safetensors" if index is None else "model-00001-of-00001.safetensors"
        (d / "m" / name).write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data))
        if index is not None:
            full = {"metadata": {"total_size": data}, **index} if isinstance(index, dict) else index
            (d / "m" / "model.safetensors.index.json").write_text(json.dumps(full))

    return make


def _trace(blocks: int, ops: int = 8, tokens: int = 10) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        trace = json.loads((EX / "cache_replay_trace.json").read_text())
        trace["plan_input"]["vllm_config"]["cache_config"]["num_gpu_blocks_override"] = blocks
        trace["plan_input"]["available_memory"] = [blocks * 256 + 2**20]
        trace["ops"] = [
            {"op": "arrive", "request_id": f"r{i}", "prompt_token_ids": list(range(tokens))}
            for i in range(ops)
        ]
        (d / "t.json").write_text(json.dumps(trace))

    return make


def _big_line(mib: int) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        # MiB on one line: a prompt of mib/2 million one-digit token ids
        with (d / "w.jsonl").open("w") as out:
            out.write('{"prompt_token_ids": [')
            chunk = "1," * (1 << 19)
            for _ in range(mib):
                out.write(chunk)
            out.write("1]}\n")

    return make


def _sep_workload(d: Path) -> None:
    lines = [
        {"prompt_token_ids": list(range(40)), "cache_salt": "a\u2028b"},
        {"prompt_token_ids": list(range(40)), "lora_name": None, "cache_salt": "c\x85d"},
    ]
    (d / "w.jsonl").write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines))


def _request(**fields: object) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        request = json.loads((EX / "request.json").read_text())
        request.update(fields)
        (d / "r.json").write_text(json.dumps(request))

    return make


_HUGE = "{{ '" + "x" * (5 << 20) + "' }}"
_DEEP = "{% if true %}" * 2000 + "x" + "{% endif %}" * 2000
_PARENS = "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}"
_CHAT = "examples/chat_workload.jsonl"
_IDS = "examples/eviction_workload.jsonl"
