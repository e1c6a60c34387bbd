"""Issue 24's hostile inputs, items 4, 5 and 7: sizes, tracebacks, correctness."""

from __future__ import annotations

import struct

from attack_builders import (
    _IDS,
    EX,
    LLAMA,
    MEM,
    Attack,
    _big_line,
    _request,
    _safetensors,
    _sep_workload,
    _trace,
    _write,
)


def size_cases() -> list[Attack]:
    """The cases of items 4, 5 and 7."""
    a: list[Attack] = []
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
