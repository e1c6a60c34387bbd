"""The wider attack set, inputs: chat templates and tokenizer folders (items 1, 3),
``events listen`` options (item 3), and the C hasher under finalizers (item 1)."""

from __future__ import annotations

import json

from attack_builders import LLAMA, Attack, _tokenizer
from attack_builders_more import both, capture, chat_workload, frame, tokenizer_edit, tokenizer_json

TOK = ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl")

TEMPLATES = {
    "lipsum(10**6)": "{{ lipsum(10**6) }}",
    "lipsum(10**4, min=10**6)": "{{ lipsum(10**4, true, 10**6, 10**6) }}",
    "format width 10**9": "{{ '{:>999999999}'.format('x') }}",
    "%-format width 10**9": "{{ '%999999999d' % 1 }}",
    "center(10**9)": "{{ 'x' | center(10**9) }}",
    "ljust(10**9)": "{{ 'x'.ljust(10**9) }}",
    "zfill(10**9)": "{{ '1'.zfill(10**9) }}",
    "expandtabs(10**9)": "{{ '\\t\\t'.expandtabs(10**9) }}",
    "indent(10**9)": "{{ 'a\\nb' | indent(10**9) }}",
    "replace amplification": "{% set s = namespace(v='xxxxxxxxxx') %}{% for i in range(12) %}"
    "{% set s.v = s.v.replace('x', 'xxxxxxxxxx') %}{% endfor %}{{ s.v | length }}",
    "list doubling": "{% set s = namespace(v=[1]) %}{% for i in range(40) %}"
    "{% set s.v = s.v + s.v %}{% endfor %}{{ s.v | length }}",
    "messages * 10**8": "{{ (messages * 10**8) | length }}",
    "range(10**9) | list": "{{ range(10**9) | list | length }}",
    "range(10**8) | sum": "{{ range(10**8) | sum }}",
    "9**9**9": "{{ 9**9**9 }}",
    "2 ** 10**8 via a variable": "{% set n = 10**8 %}{{ 2 ** n }}",
    "tojson(indent=10**8)": "{{ messages | tojson(indent=10**8) }}",
    "wordwrap(1)": "{{ ('a ' * 10**6) | wordwrap(1) | length }}",
    "recursive loop": "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
    "macro via caller, deep": "{% macro f() %}{{ caller() }}{% endmacro %}"
    "{% macro g(n) %}{% call f() %}{{ g(n + 1) }}{% endcall %}{% endmacro %}{{ g(0) }}",
    "include": "{% include 'tokenizer.json' %}",
    "import": "{% import '/etc/passwd' as p %}{{ p }}",
    "extends": "{% extends '/etc/passwd' %}",
    "from import": "{% from 'x.jinja' import y %}{{ y }}",
    "__globals__ of a macro": "{% macro f() %}{% endmacro %}{{ f.__globals__ }}",
    "__class__ of a string": "{{ ''.__class__ }}",
    "self.__init__.__globals__": "{{ self.__init__.__globals__['os'] }}",
    "cycler globals": "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "namespace __init__": "{{ namespace.__init__.__globals__ }}",
    "raise_exception.__globals__": "{{ raise_exception.__globals__['__builtins__'] }}",
    "format_map escape": "{{ '{0.__class__}'.format_map({'0': 1}) }}",
    "format attribute escape": "{{ '{0.__class__.__mro__}'.format(messages) }}",
    "messages.append": "{{ messages.append(1) }}",
    "dict.update": "{% set d = {} %}{{ d.update({'a': 1}) }}",
    "huge int literal": "{{ " + "9" * 50000 + " }}",
    "huge list literal": "{{ [" + "1," * 200000 + "1] | length }}",
    "60 KiB literal x 100": "{{ ('" + "y" * 60000 + "' * 100) | length }}",
    "unclosed block": "{% if true %}x",
    "unknown tag": "{% nope %}",
    "unknown test": "{{ 1 is nope }}",
    "undefined call": "{{ nope() }}",
    "raise_exception": "{{ raise_exception('boom') }}",
    "strftime_now('%Y' * 10**6)": "{{ strftime_now('%Y' * 10**6) | length }}",
    "strftime_now of a bad format": "{{ strftime_now('%') }}",
    "division by zero": "{{ 1 / 0 }}",
    "float overflow": "{{ 1e308 * 10 }}",
    "int('9' * 10**5)": "{{ ('9' * 10**5) | int }}",
    "deep filter chain": "{{ 'x'" + " | upper" * 5000 + " }}",
    "batch(10**9)": "{{ messages | batch(10**9) | list }}",
    "slice(10**9)": "{{ messages | slice(10**9) | list | length }}",
    "batch(10**9, fill)": "{{ messages | batch(10**9, 'x') | list | length }}",
}


def _templates() -> list[Attack]:
    return [
        Attack(
            f"chat template: {what}",
            3,
            TOK,
            make=both(_tokenizer(template=template), chat_workload),
            expect="clean",
        )
        for what, template in TEMPLATES.items()
    ] + [
        Attack(
            "chat template of 5 MiB in chat_template.jinja",
            3,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "chat_template.jinja").write_text("x" * (5 << 20)),
                chat_workload,
            ),
        ),
        Attack(
            "chat_template.jinja not UTF-8",
            3,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "chat_template.jinja").write_bytes(b"\xff{{ x }}"),
                chat_workload,
            ),
        ),
        Attack(
            "chat template a number",
            3,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "tokenizer_config.json").write_text(
                    json.dumps({"chat_template": 5})
                ),
                chat_workload,
            ),
        ),
        Attack(
            "chat template list of 10**5 unnamed items",
            3,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "tokenizer_config.json").write_text(
                    json.dumps({"chat_template": [{"x": 1}] * 100000})
                ),
                chat_workload,
            ),
        ),
    ]


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"type": "Whitespace"}
    for _ in range(depth):
        value = {"type": "Sequence", "pretokenizers": [value]}
    return value


def _tokenizers() -> list[Attack]:
    return [
        Attack("tokenizer.json empty", 1, TOK, make=tokenizer_json("")),
        Attack("tokenizer.json null", 1, TOK, make=tokenizer_json("null")),
        Attack("tokenizer.json a list", 1, TOK, make=tokenizer_json([1, 2])),
        Attack("tokenizer.json not UTF-8", 1, TOK, make=tokenizer_json("\udcff{")),
        Attack(
            "tokenizer.json nested 10**5 deep",
            1,
            TOK,
            make=tokenizer_json('{"a":' * 100_000 + "1" + "}" * 100_000),
        ),
        Attack(
            "tokenizer.json pre-tokenizers nested 200 deep",
            1,
            TOK,
            make=tokenizer_json(
                {
                    "version": "1.0",
                    "pre_tokenizer": _nested(200),
                    "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
                }
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json of 300,000 words",
            1,
            TOK,
            make=tokenizer_json(
                lambda: {
                    "version": "1.0",
                    "model": {
                        "type": "WordLevel",
                        "vocab": {f"t{i}": i for i in range(300_000)},
                        "unk_token": "t0",
                    },
                }
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json WordLevel without its unk token",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    model={"type": "WordLevel", "vocab": {"b": 0}, "unk_token": "zz"},
                    pre_tokenizer={"type": "Whitespace"},
                    post_processor=None,
                    normalizer=None,
                    decoder=None,
                )
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json normalizer replacing every char by 1000",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    normalizer={
                        "type": "Replace",
                        "pattern": {"Regex": "(?s)."},
                        "content": "y" * 1000,
                    }
                )
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json split regex with nested quantifiers",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    pre_tokenizer={
                        "type": "Split",
                        "pattern": {"Regex": "(a|a|aa)+(a|a|aa)+$"},
                        "behavior": "Isolated",
                        "invert": False,
                    }
                )
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json bad regex",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    pre_tokenizer={
                        "type": "Split",
                        "pattern": {"Regex": "(("},
                        "behavior": "Isolated",
                        "invert": False,
                    }
                )
            ),
        ),
        Attack(
            "tokenizer.json post-processor naming an unknown token",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    post_processor={
                        "type": "TemplateProcessing",
                        "single": [{"SpecialToken": {"id": "<zz>", "type_id": 0}}],
                        "pair": [],
                        "special_tokens": {},
                    }
                )
            ),
        ),
        Attack(
            "tokenizer.json Unigram with an empty vocab",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(lambda t: t.update(model={"type": "Unigram", "vocab": []})),
            expect="clean",
        ),
        Attack(
            "tokenizer.json 10**5 added tokens",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    added_tokens=[
                        {
                            "id": 1000 + i,
                            "content": f"<x{i}>",
                            "special": True,
                            "single_word": False,
                            "lstrip": False,
                            "rstrip": False,
                            "normalized": False,
                        }
                        for i in range(100_000)
                    ]
                )
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer.json with a 2**40 token id",
            1,
            ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl"),
            make=tokenizer_edit(
                lambda t: t.update(
                    model={"type": "WordLevel", "vocab": {"aaaa": 2**40, "b": 0}, "unk_token": "b"},
                    pre_tokenizer={"type": "Whitespace"},
                )
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer_config.json bos_token a list",
            1,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "tokenizer_config.json").write_text(
                    json.dumps({"chat_template": "{{ bos_token }}x", "bos_token": [1]})
                ),
                chat_workload,
            ),
            expect="clean",
        ),
        Attack(
            "tokenizer_config.json nested 10**5 deep",
            1,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "tok" / "tokenizer_config.json").write_text(
                    '{"a":' * 100_000 + "1" + "}" * 100_000
                ),
                chat_workload,
            ),
        ),
        Attack(
            "a prompt of 100 MB",
            1,
            TOK,
            make=both(
                _tokenizer(),
                lambda d: (d / "w.jsonl").write_text('{"prompt": "' + "ab " * 33_000_000 + '"}\n'),
            ),
            heavy=True,
        ),
        Attack(
            "prompt text without --tokenizer",
            1,
            ("cache", *LLAMA, "{d}/w.jsonl"),
            make=lambda d: (d / "w.jsonl").write_text('{"prompt": "hi"}\n'),
        ),
        Attack(
            "10**4 messages in one request",
            1,
            TOK,
            make=lambda d: (
                (
                    _tokenizer()(d),
                    (d / "w.jsonl").write_text(
                        json.dumps(
                            {"messages": [{"role": "user", "content": "hi " * 200}] * 10_000}
                        )
                    ),
                )
                and None
            ),
            expect="clean",
        ),
        Attack(
            "message role 10**5 chars, content a dict",
            1,
            TOK,
            make=lambda d: (
                (
                    _tokenizer()(d),
                    (d / "w.jsonl").write_text(
                        json.dumps({"messages": [{"role": "u" * 100_000, "content": {"a": 1}}]})
                    ),
                )
                and None
            ),
        ),
    ]


def _listen() -> list[Attack]:
    listen = ("events", "listen")
    bad = [
        ("--timeout 1e309", ("tcp://127.0.0.1:9", "--timeout", "1e309")),
        ("--timeout -inf", ("tcp://127.0.0.1:9", "--timeout", "-inf")),
        ("--timeout +nan", ("tcp://127.0.0.1:9", "--timeout", "+nan")),
        ("--timeout 0x10", ("tcp://127.0.0.1:9", "--timeout", "0x10")),
        ("--timeout 1e9", ("tcp://127.0.0.1:9", "--timeout", "1e9")),
        ("--timeout empty", ("tcp://127.0.0.1:9", "--timeout", "")),
        ("--count 2**63", ("tcp://127.0.0.1:9", "--timeout", "0", "--count", str(2**63))),
        ("--count 1.5", ("tcp://127.0.0.1:9", "--timeout", "0", "--count", "1.5")),
        ("--count nan", ("tcp://127.0.0.1:9", "--timeout", "0", "--count", "nan")),
        ("--max-frame-bytes 1e3", ("tcp://127.0.0.1:9", "--max-frame-bytes", "1e3")),
        ("endpoint empty", ("", "--timeout", "0")),
        ("endpoint 'tcp://'", ("tcp://", "--timeout", "0")),
        ("endpoint '[::1'", ("tcp://[::1", "--timeout", "0")),
        ("endpoint port 99999", ("tcp://127.0.0.1:99999", "--timeout", "0")),
        ("endpoint wildcard", ("tcp://*:5557", "--timeout", "0")),
        ("endpoint pgm", ("pgm://eth0;239.1.1.1:5555", "--timeout", "0")),
        ("endpoint of 100 KB", ("tcp://" + "a" * 100_000 + ":1", "--timeout", "0")),
        ("endpoint unicode", ("tcp://\u00e9\u00e9:1", "--timeout", "0")),
        ("endpoint undecodable bytes", ("tcp://\udcff:1", "--timeout", "0")),
        ("endpoint ipc in a missing folder", ("ipc:///nonexistent/dir/s", "--timeout", "0")),
        ("topic undecodable bytes", ("tcp://127.0.0.1:9", "--timeout", "0", "--topic", "\udcff")),
        (
            "capture into a missing folder",
            ("tcp://127.0.0.1:9", "--timeout", "0", "--capture", "{d}/no/c"),
        ),
    ]
    a = [Attack(f"events listen {what}", 3, (*listen, *args), expect="clean") for what, args in bad]
    a += [
        Attack(
            "events listen inproc endpoint (control)",
            3,
            (*listen, "inproc://x", "--timeout", "0"),
            expect="works",
        ),
        Attack(
            "events decode of a record claiming 4 GiB",
            3,
            ("events", "decode", "{d}/c.bin"),
            make=capture(b"\xff\xff\xff\xff" + b"\x90" * 100),
        ),
        Attack(
            "events decode of 10**6 empty records",
            3,
            ("events", "decode", "{d}/c.bin"),
            make=capture(b"\0\0\0\0" * 10**6),
        ),
        Attack(
            "events decode of msgpack nested 10**5 deep",
            3,
            ("events", "decode", "{d}/c.bin"),
            make=capture(frame(b"\x91" * 100_000 + b"\xc0")),
        ),
        Attack(
            "events decode of a msgpack array claiming 2**32-1 items",
            3,
            ("events", "decode", "{d}/c.bin"),
            make=capture(frame(b"\xdd\xff\xff\xff\xff")),
        ),
        Attack(
            "events audit --block-size 2**63",
            3,
            ("events", "audit", "--block-size", str(2**63), "{ex}/kv_events.capture"),
        ),
        Attack(
            "events audit --block-size 0",
            3,
            ("events", "audit", "--block-size", "0", "{ex}/kv_events.capture"),
        ),
        Attack(
            "events audit --lookahead 10**9",
            3,
            ("events", "audit", "--lookahead", str(10**9), "{ex}/kv_events.capture"),
        ),
        Attack(
            "events audit --seed with undecodable bytes",
            5,
            (
                "events",
                "audit",
                "--algo",
                "sha256_cbor",
                "--seed",
                "\udcff",
                "{ex}/kv_events.capture",
            ),
            expect="clean",
        ),
        Attack(
            "events audit --lora-path with undecodable bytes",
            5,
            ("events", "audit", "--lora-path", "\udcff=\udcfe", "{ex}/kv_events.capture"),
            expect="clean",
        ),
        Attack(
            "hash --seed with undecodable bytes, CBOR",
            5,
            ("hash", "--algo", "sha256_cbor", "--seed", "\udcff", "{ex}/request.json"),
            expect="clean",
        ),
        Attack(
            "hash --seed of 1 MB",
            5,
            ("hash", "--algo", "xxhash_cbor", "--seed", "7" * 100_000, "{ex}/request.json"),
            expect="clean",
        ),
    ]
    return a


_STATE = (
    "import gc\n"
    "from kvpure.hashing import VLLM_0_34, HashRequest, HashScheme, RequestBlockHashes\n"
    "s = HashScheme.from_seed(algorithm='{algo}', block_size=4, seed='0', profile=VLLM_0_34)\n"
    "st = RequestBlockHashes.start(s, HashRequest(prompt_token_ids=(1, 2, 3, 4, 5)))\n"
)


def _hasher() -> list[Attack]:
    finalizer = (
        "class F:\n"
        "    def __init__(self, act): self.act = act; self.me = self\n"
        "    def __del__(self): self.act()\n"
    )
    cases = {
        "a finalizer empties the list": (
            finalizer + "toks = [int(str(10**5 + i)) for i in range(40)]\n"
            "gc.set_threshold(1)\n"
            "for _ in range(50): F(toks.clear)\n"
            "del _\n"
            "st.append_output_token_ids(toks)\n",
            "clean",
        ),
        "a finalizer replaces the state's field": (
            finalizer + "gc.set_threshold(1)\n"
            "for _ in range(50): F(lambda: object.__setattr__(st, '_state', None))\n"
            "st.append_output_token_ids([int(str(10**5 + i)) for i in range(40)])\n",
            "survives",
        ),
        "an int subclass whose __index__ clears the list": (
            "toks = []\n"
            "class I(int):\n"
            "    def __index__(self): toks.clear(); return 1\n"
            "toks.extend(I(3) for _ in range(40))\n"
            "st.append_output_token_ids(toks)\n",
            "survives",
        ),
        "a bool token": ("st.append_output_token_ids(True)\n", "refused"),
        "a negative token": ("st.append_output_token_ids([1, -1])\n", "refused"),
        "a float token": ("st.append_output_token_ids([1.0])\n", "refused"),
        "a 2**64 token": ("st.append_output_token_ids(2**64)\n", "refused"),
        "None": ("st.append_output_token_ids(None)\n", "refused"),
        "a str": ("st.append_output_token_ids('12')\n", "refused"),
        "a generator that raises": (
            "def g():\n    yield 1\n    raise RuntimeError('x')\nst.append_output_token_ids(g())\n",
            "survives",
        ),
        "a list of lists": ("st.append_output_token_ids([[1]])\n", "refused"),
        "10**6 tokens at once": (
            "st.append_output_token_ids(range(10**6))\n",
            "clean",
        ),
        "an iterable whose length hint lies": (
            "class L:\n"
            "    def __iter__(self): return iter([1, 2, 3])\n"
            "    def __length_hint__(self): return 2**62\n"
            "st.append_output_token_ids(L())\n",
            "survives",
        ),
    }
    out = []
    for what, (body, expect) in cases.items():
        for algo in ("sha256", "xxhash_cbor"):
            out.append(
                Attack(
                    f"append_output_token_ids: {what} ({algo})",
                    1,
                    code=_STATE.replace("{algo}", algo) + body,
                    expect=expect,
                )
            )
    return out


def input_cases() -> list[Attack]:
    return [*_templates(), *_tokenizers(), *_listen(), *_hasher()]
