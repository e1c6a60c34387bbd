"""The hostile inputs :mod:`attacks` runs: one builder per case, grouped by issue 24's items.

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
    """One hostile input. ``expect``: ``refused`` (exit 2 / a kvpure error) or ``clean``
    (exit 0 or 2, no traceback: a hostile input that is also valid)."""

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


def _cases() -> list[Attack]:
    a: list[Attack] = []
    # -- item 1: bounded text, tokenizer failures typed -----------------------------------
    tok = ("--tokenizer", "{d}/tok")
    a += [
        Attack(
            "prompt of 5 MiB",
            1,
            ("cache", *LLAMA, *tok, "{d}/w.jsonl"),
            make=_both(_tokenizer(), _write("w.jsonl", json.dumps({"prompt": "ab " * (2 << 20)}))),
        ),
        Attack(
            "message content of 5 MiB",
            1,
            ("cache", *LLAMA, *tok, "{d}/w.jsonl"),
            make=_both(
                _tokenizer(),
                _write(
                    "w.jsonl",
                    json.dumps({"messages": [{"role": "user", "content": "ab " * (2 << 20)}]}),
                ),
            ),
        ),
        Attack(
            "prompt with a lone surrogate",
            1,
            ("cache", *LLAMA, *tok, "{d}/w.jsonl"),
            make=_both(_tokenizer(), _write("w.jsonl", '{"prompt": "a\\ud800b"}\n')),
        ),
        Attack(
            "message with a lone surrogate",
            1,
            ("cache", *LLAMA, *tok, "{d}/w.jsonl"),
            make=_both(
                _tokenizer(),
                _write("w.jsonl", '{"messages": [{"role": "user", "content": "\\udfff"}]}\n'),
            ),
        ),
        Attack(
            "tokenizer.json not JSON",
            1,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(tokenizer__json="{not json"),
        ),
        Attack(
            "tokenizer.json with a model tokenizers panics on",
            1,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(
                tokenizer__json=json.dumps(
                    {
                        "version": "1.0",
                        "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]},
                    }
                )
            ),
        ),
        Attack(
            "tokenizer.json with an unknown model type",
            1,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(tokenizer__json=json.dumps({"model": {"type": "Nope"}})),
        ),
        Attack(
            "tokenizer_config.json a list",
            1,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(tokenizer_config__json="[1, 2]"),
        ),
        Attack(
            "tokenizer folder empty",
            1,
            ("cache", *LLAMA, *tok, _CHAT),
            make=lambda d: (d / "tok").mkdir(),
        ),
    ]
    # -- item 2: escapes from the Hugging Face cache ------------------------------------
    hub_env = {"HF_HUB_CACHE": "{d}/hub"}
    for model in ("org/..", "../org/m", "org/m@..", "org/m@../../outside", "org/m@/etc", "org\\m"):
        a.append(Attack(f"hub id {model!r}", 2, ("plan", model, *MEM), make=_hub(), env=hub_env))
    for ref in ("../x", "../../outside", "/etc", "a/b", "..", ".", REV + "\n../x"):
        a.append(
            Attack(
                f"refs/main holds {ref!r}",
                2,
                ("plan", "org/m", *MEM),
                make=_hub(ref=ref),
                env=hub_env,
            )
        )
    a += [
        Attack(
            "a good hub id is found (control)",
            2,
            ("plan", "org/m", *MEM),
            make=_hub(),
            env=hub_env,
            expect="works",
        ),
        Attack(
            "snapshot linked outside the cache",
            2,
            ("plan", "org/m", *MEM),
            make=_hub(link="outside"),
            env=hub_env,
        ),
        Attack(
            "config.json linked outside the cache",
            2,
            ("plan", "org/m", *MEM),
            make=_hub(config_link="{d}/outside/config.json"),
            env=hub_env,
        ),
        Attack(
            "config.json linked to /etc/passwd",
            2,
            ("plan", "org/m", *MEM),
            make=_hub(config_link="/etc/passwd"),
            env=hub_env,
        ),
        Attack(
            "cache --model id linked outside",
            2,
            ("cache", "--model", "org/m", *MEM, _IDS),
            make=_hub(link="outside"),
            env=hub_env,
        ),
    ]
    # -- item 3: hangs: FIFOs and devices, templates, events listen ----------------------
    for what, argv, name in (
        ("plan config", ("plan", "{d}/p", *MEM), "p"),
        ("cache workload", ("cache", *LLAMA, "{d}/p"), "p"),
        ("cache --model", ("cache", "--model", "{d}/p", *MEM, _IDS), "p"),
        ("cache --tokenizer", ("cache", *LLAMA, "--tokenizer", "{d}/p", _CHAT), "p"),
        ("hash request", ("hash", "--seed", "0", "{d}/p"), "p"),
        ("cache-replay trace", ("cache-replay", "{d}/p"), "p"),
        ("events decode", ("events", "decode", "{d}/p"), "p"),
        ("events audit", ("events", "audit", "--algo", "sha256", "{d}/p"), "p"),
        ("model folder config.json", ("plan", "{d}/m", *MEM), "m/config.json"),
    ):
        make = _fifo(name) if "/" not in name else _both(_write("m/x", ""), _fifo(name))
        a.append(Attack(f"FIFO as {what}", 3, argv, make=make))
    a += [
        Attack(
            "FIFO tokenizer.json",
            3,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(tokenizer__json="FIFO"),
        ),
        Attack(
            "FIFO tokenizer_config.json",
            3,
            ("cache", *LLAMA, *tok, _CHAT),
            make=_tokenizer(tokenizer_config__json="FIFO"),
        ),
    ]
    for dev in ("/dev/zero", "/dev/urandom", "/dev/null", "/dev/stdin"):
        a += [
            Attack(f"{dev} as plan config", 3, ("plan", dev, *MEM)),
            Attack(f"{dev} as workload", 3, ("cache", *LLAMA, dev)),
            Attack(f"{dev} as events capture", 3, ("events", "decode", dev)),
            Attack(f"{dev} as trace", 3, ("cache-replay", dev)),
        ]
    a.append(
        Attack("/dev/zero as tokenizer", 3, ("cache", *LLAMA, "--tokenizer", "/dev/zero", _CHAT))
    )
    templates = {
        "a 5 MiB literal": _HUGE,
        "2000 nested ifs": _DEEP,
        "5000 nested parentheses": _PARENS,
        "range(10**9)": "{% for i in range(10**9) %}x{% endfor %}",
        "nested range(10**5) loops": (
            "{% for i in range(10**5) %}{% for j in range(10**5) %}x{% endfor %}{% endfor %}"
        ),
        "'x' * 10**9": "{{ 'x' * 10**9 }}",
        "10**(10**10)": "{{ 10**(10**10) }}",
        "doubling a string": "{% set s = namespace(v='x') %}{% for i in range(64) %}"
        "{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}",
        "recursive macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "a syntax error": "{% for %}",
        "an unknown filter": "{{ messages | nope }}",
        "attribute escape": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "join of a huge list": "{{ ([1] * 10**8) | join(',') }}",
    }
    for what, template in templates.items():
        a.append(
            Attack(
                f"chat template: {what}",
                3,
                ("cache", *LLAMA, *tok, "{d}/w.jsonl"),
                make=_both(_tokenizer(template=template), _chat_workload),
            )
        )
    listen = ("events", "listen", "tcp://127.0.0.1:9")
    for option, value in (
        ("--timeout", "nan"),
        ("--timeout", "-1"),
        ("--timeout", "inf"),
        ("--timeout", "1e400"),
        ("--timeout", "-0.0001"),
        ("--count", "-1"),
        ("--count", "0"),
        ("--count", "9" * 40),
        ("--max-frame-bytes", "-1"),
        ("--max-frame-bytes", "0"),
        ("--max-frame-bytes", "nan"),
        ("--max-frame-bytes", str(2**70)),
    ):
        a.append(Attack(f"events listen {option} {value}", 3, (*listen, option, value)))
    a += [
        Attack(
            "events listen endpoint with NUL",
            3,
            ("events", "listen", "tcp://a\0b:1", "--timeout", "0"),
        ),
        Attack("events listen bad endpoint", 3, ("events", "listen", "nope://x", "--timeout", "0")),
        Attack(
            "events listen capture to a FIFO",
            3,
            (*listen, "--timeout", "0", "--capture", "{d}/p"),
            make=_fifo("p"),
        ),
        Attack(
            "events listen capture to /dev/full",
            3,
            (*listen, "--timeout", "0", "--capture", "/dev/full"),
        ),
        Attack(
            "cache --plot to a FIFO",
            3,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                "1GiB,2GiB",
                "--plot",
                "{d}/p.png",
                _IDS,
            ),
            make=_fifo("p.png"),
        ),
        Attack(
            "cache --plot into a missing folder",
            3,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                "1GiB,2GiB",
                "--plot",
                "{d}/no/p.png",
                _IDS,
            ),
        ),
        Attack(
            "events listen capture to a regular file (control)",
            3,
            (*listen, "--timeout", "0", "--capture", "{d}/cap.bin"),
            expect="works",
            outputs=("cap.bin",),
        ),
        Attack(
            "events listen capture to a folder",
            3,
            (*listen, "--timeout", "0", "--capture", "{d}"),
        ),
    ]
    # -- item 4: memory -----------------------------------------------------------------
    a += [
        Attack(
            "a 48 MiB single-line workload",
            4,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=_big_line(48),
            expect="clean",
            heavy=True,
        ),
        Attack(
            "a 64 MiB single-line workload",
            4,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=_big_line(64),
            expect="clean",
            heavy=True,
        ),
        Attack(
            "bad first line of a long workload",
            4,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=_write("w.jsonl", "{nope\n" + '{"prompt_token_ids": [1]}\n' * 200_000),
        ),
        Attack(
            "cache-replay of 10**12 blocks", 4, ("cache-replay", "{d}/t.json"), make=_trace(10**12)
        ),
        Attack(
            "cache-replay --json of 10**12 blocks",
            4,
            ("cache-replay", "--json", "{d}/t.json"),
            make=_trace(10**12),
        ),
        Attack(
            "cache-replay --json of 200,000 blocks stays small",
            4,
            ("cache-replay", "--json", "{d}/t.json"),
            make=_trace(200_000, ops=40),
            expect="clean",
            max_stdout=8 << 20,
            heavy=True,
        ),
        Attack(
            "cache with 10**12 blocks",
            4,
            ("cache", *LLAMA, "--num-gpu-blocks-override", str(10**12), _IDS),
        ),
        Attack(
            "cache with 10**12 blocks (a single number)",
            4,
            ("cache", "--model", "{ex}/llama3_8b.json", "--kv-cache-memory", "1000000TiB", _IDS),
        ),
        Attack(
            "plan with 10**12 blocks",
            4,
            ("plan", "{ex}/llama3_8b.json", *MEM, "--num-gpu-blocks-override", str(10**12)),
            expect="clean",
        ),
        Attack(
            "plan with 10**40 bytes",
            4,
            ("plan", "{ex}/llama3_8b.json", "--kv-cache-memory", "1" + "0" * 40),
        ),
        Attack(
            "plan --json with 2**62 blocks",
            4,
            (
                "plan",
                "--json",
                "{ex}/llama3_8b.json",
                *MEM,
                "--num-gpu-blocks-override",
                str(2**62),
            ),
            expect="clean",
        ),
        Attack(
            "safetensors header of 10**12 x 10**12",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [10**12, 10**12], "data_offsets": [0, 2]}}, 2
            ),
        ),
        Attack(
            "safetensors header of 10**6 dims",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [1] * 10**6, "data_offsets": [0, 2]}}, 2
            ),
        ),
        Attack(
            "safetensors header claiming 2**60 bytes",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=lambda d: (
                _safetensors(b"")(d)
                or (d / "m" / "model.safetensors").write_bytes(struct.pack("<Q", 2**60))
            ),
        ),
        Attack(
            "safetensors header of 300,000 tensors",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {
                    f"t{i}": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
                    for i in range(300_000)
                },
                600_000,
            ),
            heavy=True,
        ),
        Attack(
            "safetensors header with a float dim",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors({"a": {"dtype": "BF16", "shape": [1.5], "data_offsets": [0, 2]}}, 2),
        ),
        Attack(
            "safetensors header with a negative dim",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors({"a": {"dtype": "BF16", "shape": [-1], "data_offsets": [0, 2]}}, 2),
        ),
        Attack(
            "safetensors header not an object",
            4,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(b"[1, 2, 3]"),
        ),
    ]
    # -- item 5: tracebacks -------------------------------------------------------------
    for where in ("cache_salt", "lora_name"):
        for algo in ("sha256_cbor", "xxhash_cbor"):
            a.append(
                Attack(
                    f"lone surrogate in {where} under {algo}",
                    5,
                    ("hash", "--algo", algo, "--seed", "0", "{d}/r.json"),
                    make=_request(**{where: "\ud800x"}),
                )
            )
    a += [
        Attack(
            "lone surrogate in a multimodal id",
            5,
            ("hash", "--algo", "sha256_cbor", "--seed", "0", "{d}/r.json"),
            make=_request(mm_features=[{"identifier": "\udc80", "offset": 0, "length": 5}]),
        ),
        Attack(
            "lone surrogate in a workload's cache_salt",
            5,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=_write("w.jsonl", '{"prompt_token_ids": [1, 2, 3], "cache_salt": "\\ud800"}\n'),
            expect="clean",
        ),
        Attack(
            "lone surrogate, API",
            5,
            code="from kvpure import *\n"
            "s = HashScheme.from_seed(algorithm='sha256_cbor', block_size=2, seed='0',\n"
            "                         profile=VLLM_0_34)\n"
            "hash_prompt(s, HashRequest(prompt_token_ids=(1, 2, 3, 4), cache_salt='\\ud800'))",
        ),
        Attack(
            "NUL in a shard name",
            5,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}},
                2,
                index={"weight_map": {"a": "model\u0000.safetensors"}},
            ),
        ),
        Attack(
            "shard name escaping the folder",
            5,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}},
                2,
                index={"weight_map": {"a": "../../outside.safetensors"}},
            ),
        ),
        Attack(
            "shard name absolute",
            5,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}},
                2,
                index={"weight_map": {"a": "/etc/passwd"}},
            ),
        ),
        Attack(
            "weight_map not a mapping",
            5,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}},
                2,
                index={"weight_map": [1]},
            ),
        ),
        Attack("NUL in a path", 5, ("plan", "{d}/a\0b", *MEM)),
        Attack(
            "request JSON of 10**6 nested lists",
            5,
            ("hash", "--seed", "0", "{d}/r.json"),
            make=_write("r.json", "[" * 10**6 + "]" * 10**6),
        ),
        Attack(
            "config JSON of 10**6 nested objects",
            5,
            ("plan", "{d}/c.json", *MEM),
            make=_write("c.json", '{"a":' * 10**6 + "1" + "}" * 10**6),
        ),
        Attack(
            "workload line of 10**6 nested lists",
            5,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=_write("w.jsonl", "[" * 10**6 + "]" * 10**6 + "\n"),
        ),
        Attack(
            "config JSON with NaN",
            5,
            ("plan", "{d}/c.json", *MEM),
            make=lambda d: (d / "c.json").write_text(
                (EX / "llama3_8b.json")
                .read_text()
                .replace('"num_hidden_layers": 32', '"num_hidden_layers": NaN')
            ),
        ),
        Attack(
            "config JSON with a 10**5-digit int",
            5,
            ("plan", "{d}/c.json", *MEM),
            make=lambda d: (d / "c.json").write_text(
                (EX / "llama3_8b.json")
                .read_text()
                .replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 100_000)
            ),
        ),
        Attack(
            "config not UTF-8",
            5,
            ("plan", "{d}/c.json", *MEM),
            make=_write("c.json", b"\xff\xfe{}"),
        ),
        Attack(
            "trace token id 2**64",
            5,
            ("cache-replay", "{d}/t.json"),
            make=lambda d: (
                _trace(16)(d)
                or (d / "t.json").write_text(
                    (d / "t.json").read_text().replace("[0, 1, 2", "[18446744073709551616, 1, 2", 1)
                )
            ),
        ),
    ]
    # -- item 7: correctness found along the way ---------------------------------------
    a += [
        Attack(
            "overlapping safetensors offsets",
            7,
            ("plan", "{d}/m", "--gpu", "H100-80GB"),
            make=_safetensors(
                {
                    "a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
                    "b": {"dtype": "BF16", "shape": [4], "data_offsets": [4, 12]},
                },
                12,
            ),
        ),
        Attack(
            "U+2028 and U+0085 inside workload strings",
            7,
            ("cache", *LLAMA, "--json", "{d}/w.jsonl"),
            make=_sep_workload,
            expect="works",
        ),
    ]
    return a


ATTACKS: tuple[Attack, ...] = tuple(_cases())
