"""Issue 24's hostile inputs, items 1-3 (text bounds, escapes, hangs); items 4, 5 and 7 are in
:mod:`attack_cases_sizes`. :data:`ATTACKS` is all of them, in item order."""

from __future__ import annotations

import json

from attack_builders import (
    _CHAT,
    _DEEP,
    _HUGE,
    _IDS,
    _PARENS,
    LLAMA,
    MEM,
    REV,
    Attack,
    _both,
    _chat_workload,
    _fifo,
    _hub,
    _tokenizer,
    _write,
)
from attack_cases_data import data_cases
from attack_cases_inputs import input_cases
from attack_cases_paths import path_cases
from attack_cases_sizes import size_cases


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
    return a


ORIGINAL: tuple[Attack, ...] = (*_cases(), *size_cases())
"""The first set (127 cases)."""
WIDER: tuple[Attack, ...] = (*path_cases(), *input_cases(), *data_cases())
"""The wider set: every file slot, hub id, template, header and size not in the first."""
_TESTED_WIDER = frozenset(
    {
        # paths (item 2) and special files (item 3)
        "hub id 'org/m@%2e%2e'",
        "hub id with NUL, API",
        "refs/main holds a NUL",
        "refs/main a fifo",
        "snapshot linked to /",
        "config.json a link loop",
        "hub weights linked outside the cache",
        "hub weights in blobs/ (control)",
        "socket as plan config",
        "socket as cache workload",
        "fifo as model.safetensors",
        "zero as the shard an index names",
        "fifo as chat_template.jinja",
        "socket as events listen --capture",
        "a valid cache --plot writes only its PNG (control)",
        # templates, tokenizers, events listen, the C hasher (items 1, 3)
        "chat template: lipsum(10**6)",
        "chat template: huge list literal",
        "chat template: slice(10**9)",
        "chat template: batch(10**9, fill)",
        "chat template: format width 10**9",
        "chat template: include",
        "chat template: cycler globals",
        "tokenizer.json post-processor naming an unknown token",
        "tokenizer.json nested 10**5 deep",
        "events listen --timeout 1e309",
        "events listen endpoint wildcard",
        "events decode of msgpack nested 10**5 deep",
        "append_output_token_ids: a finalizer empties the list (sha256)",
        "append_output_token_ids: a bool token (xxhash_cbor)",
        # headers, workloads, sizes (items 4, 5, 7)
        "safetensors header: header empty object",
        "safetensors header: length 2**63",
        "safetensors header: one tensor inside another",
        "shards index: shard '../x'",
        "shards index: the same shard 1000 times",
        "workload: 10**6 blank lines then a bad one",
        "workload: '[' then 20 MB of spaces",
        "workload: U+2028 and U+2029 in a salt",
        "workload: a BOM on line 2",
        "plan --num-gpu-blocks-override 2**64",
        "cache-replay: 2**63 blocks",
        "hash --block-size 2**63",
    }
)
TESTED: tuple[Attack, ...] = (*ORIGINAL, *(a for a in WIDER if a.name in _TESTED_WIDER))
"""What tests/test_attacks.py runs (its light ones): the first set and a sample of the wider
set that covers each fix and each kind of file, template, header and size."""
assert len(TESTED) == len(ORIGINAL) + len(_TESTED_WIDER), "a tested name is not a case"
ATTACKS: tuple[Attack, ...] = (*sorted((*ORIGINAL, *WIDER), key=lambda a: a.item),)
