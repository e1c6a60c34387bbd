"""The wider attack set, paths: hub ids, revisions, refs and links (item 2); a FIFO, a
socket, a folder or a device link as every file kvpure reads or writes (item 3)."""

from __future__ import annotations

from attack_builders import _CHAT, _IDS, LLAMA, MEM, REV, Attack, _hub, _safetensors
from attack_builders_more import (
    both,
    hub_with,
    ref_bytes,
    ref_special,
    snapshot_link,
    special,
    special_at,
    tensor,
    tokenizer_special,
    weights_in_hub,
)

HUB = {"HF_HUB_CACHE": "{d}/hub"}
GPU = ("--gpu", "H100-80GB")


def _ids() -> list[Attack]:
    ids = (
        "org/m@%2e%2e",
        "%2e%2e/m",
        "org/%2e%2e%2f%2e%2e",
        "org/m@..%2f..",
        "org/m@refs/main",
        "org/m@main/../../outside",
        "/abs/m",
        "org//m",
        "org/m@",
        ".org/m",
        "org/.m",
        "org/m@.x",
        "org/m\\..\\..",
        "org/m@..\\..\\outside",
        "org/\uff4d",
        "org/m\u202e",
        "org/m@\u0131",
        "org/m@" + "a" * 5000,
        "o" * 5000 + "/m",
        "org/m\n",
        " org/m",
        "~/m",
        "org/m@~",
        "org/m@\udcff",
    )
    a = [Attack(f"hub id {m[:40]!r}", 2, ("plan", m, *MEM), make=_hub(), env=HUB) for m in ids]
    a += [
        Attack(
            "cache --model hub id 'org/m@..'",
            2,
            ("cache", "--model", "org/m@..", *MEM, _IDS),
            make=_hub(),
            env=HUB,
        ),
        Attack(
            "hub id with NUL, API",
            2,
            code="from kvpure.models.hf_cache import resolve_model_folder\n"
            "resolve_model_folder('org/m\\x00')",
        ),
        Attack(
            "hub id '../x', API",
            2,
            code="from kvpure.models.hf_cache import resolve_model_folder\n"
            "resolve_model_folder('org/../x', {'HF_HUB_CACHE': '/tmp'})",
        ),
        Attack(
            "hub id as bytes, API",
            2,
            code="from kvpure.models.hf_cache import resolve_model_folder\n"
            "resolve_model_folder(b'org/m')",
        ),
        Attack(
            "hub revision '/etc', API",
            2,
            code="from kvpure.models.hf_cache import resolve_model_config\n"
            "resolve_model_config('org/m@/etc', {'HF_HUB_CACHE': '/tmp'})",
        ),
    ]
    return a


def _refs() -> list[Attack]:
    plan = ("plan", "org/m", *MEM)
    a = [
        Attack("refs/main holds an absolute path", 2, plan, make=ref_bytes(b"/etc"), env=HUB),
        Attack("refs/main holds 10 MB", 2, plan, make=ref_bytes(b"a" * 10**7), env=HUB),
        Attack("refs/main holds a NUL", 2, plan, make=ref_bytes(b"ab\0cd"), env=HUB),
        Attack(
            "refs/main holds REV then a NUL",
            2,
            plan,
            make=ref_bytes(REV.encode() + b"\0../x"),
            env=HUB,
        ),
        Attack("refs/main holds '..\\..\\x'", 2, plan, make=ref_bytes(b"..\\..\\x"), env=HUB),
        Attack("refs/main holds invalid UTF-8", 2, plan, make=ref_bytes(b"\xff\xfe"), env=HUB),
        Attack("refs/main empty", 2, plan, make=ref_bytes(b""), env=HUB),
        Attack(
            "refs/main holds REV and CRLF (control)",
            2,
            plan,
            make=ref_bytes(REV.encode() + b"\r\n"),
            env=HUB,
            expect="works",
        ),
        Attack(
            "hub id org/m@other, a snapshot folder (control)",
            2,
            ("plan", "org/m@other", *MEM),
            make=_hub(),
            env=HUB,
            expect="works",
        ),
        Attack(
            "cached repo folder as a path, refs/main '../x'",
            2,
            ("plan", "{d}/hub/models--org--m", *MEM),
            make=_hub(ref="../x"),
        ),
        Attack(
            "cached repo folder as a path, snapshot linked to /etc",
            2,
            ("plan", "{d}/hub/models--org--m", *MEM),
            make=snapshot_link("/etc"),
        ),
    ]
    for kind in ("fifo", "socket", "dir", "zero", "passwd"):
        a.append(Attack(f"refs/main a {kind}", 2, plan, make=ref_special(kind), env=HUB))
    for target in ("/", "/etc", "../../../outside", "{d}/outside"):
        a.append(
            Attack(
                f"snapshot linked to {target}",
                2,
                plan,
                make=snapshot_link(target),
                env=HUB,
            )
        )
    a += [
        Attack(
            "config.json a link loop",
            2,
            plan,
            make=hub_with(
                lambda d, repo: (
                    (
                        (repo / "snapshots" / REV / "config.json").unlink(),
                        (repo / "snapshots" / REV / "config.json").symlink_to("loop"),
                        (repo / "snapshots" / REV / "loop").symlink_to("config.json"),
                    )
                    and None
                )
            ),
            env=HUB,
        ),
        Attack(
            "config.json a link into blobs/ (control)",
            2,
            plan,
            make=hub_with(
                lambda d, repo: (
                    (
                        (repo / "blobs").mkdir(),
                        (repo / "snapshots" / REV / "config.json").rename(repo / "blobs" / "c1"),
                        (repo / "snapshots" / REV / "config.json").symlink_to("../../blobs/c1"),
                    )
                    and None
                )
            ),
            env=HUB,
            expect="works",
        ),
        Attack(
            "config.json a FIFO in the cache",
            2,
            plan,
            make=hub_with(
                lambda d, repo: special(repo / "snapshots" / REV / "config.json", "fifo")
            ),
            env=HUB,
        ),
        Attack(
            "hub weights linked outside the cache",
            2,
            ("plan", "org/m", *GPU),
            make=weights_in_hub(link_outside=True),
            env=HUB,
        ),
        Attack(
            "hub weights in blobs/ (control)",
            2,
            ("plan", "org/m", *GPU),
            make=weights_in_hub(link_outside=False),
            env=HUB,
            expect="works",
        ),
        Attack(
            "HF_HUB_CACHE a FIFO",
            2,
            plan,
            make=special_at("hubfifo", "fifo"),
            env={"HF_HUB_CACHE": "{d}/hubfifo"},
        ),
        Attack("HF_HUB_CACHE /dev/null", 2, plan, env={"HF_HUB_CACHE": "/dev/null"}),
        Attack("HF_HOME a regular file", 2, plan, env={"HF_HOME": "/etc/passwd"}),
    ]
    return a


def _files() -> list[Attack]:
    a: list[Attack] = []
    slots = (
        ("plan config", ("plan", "{d}/p", *MEM), "p", None),
        ("cache workload", ("cache", *LLAMA, "{d}/p"), "p", None),
        ("cache --model", ("cache", "--model", "{d}/p", *MEM, _IDS), "p", None),
        ("hash request", ("hash", "--seed", "0", "{d}/p"), "p", None),
        ("cache-replay trace", ("cache-replay", "{d}/p"), "p", None),
        ("events decode", ("events", "decode", "{d}/p"), "p", None),
        ("events audit", ("events", "audit", "--algo", "sha256", "{d}/p"), "p", None),
        (
            "model.safetensors",
            ("plan", "{d}/m", *GPU),
            "m/model.safetensors",
            _safetensors({"a": tensor()}, 2),
        ),
        (
            "the shard an index names",
            ("plan", "{d}/m", *GPU),
            "m/model-00001-of-00001.safetensors",
            _safetensors(
                {"a": tensor()}, 2, index={"weight_map": {"a": "model-00001-of-00001.safetensors"}}
            ),
        ),
    )
    for what, argv, name, base in slots:
        kinds = ("socket", "dir") if base is None else ("fifo", "socket", "dir", "zero")
        for kind in kinds:
            a.append(Attack(f"{kind} as {what}", 3, argv, make=special_at(name, kind, base)))
    index_base = _safetensors(
        {"a": tensor()}, 2, index={"weight_map": {"a": "model-00001-of-00001.safetensors"}}
    )
    for kind in ("fifo", "socket", "zero"):
        a.append(
            Attack(
                f"{kind} as the shards index",
                3,
                ("plan", "{d}/m", *GPU),
                make=special_at("m/model.safetensors.index.json", kind, index_base),
                expect="clean",
            )
        )
    tok = ("cache", *LLAMA, "--tokenizer", "{d}/tok", "{d}/w.jsonl")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        for kind in (
            ("socket", "dir", "zero")
            if name != "chat_template.jinja"
            else (
                "fifo",
                "socket",
                "dir",
                "zero",
            )
        ):
            a.append(Attack(f"{kind} as {name}", 3, tok, make=tokenizer_special(name, kind)))
    a += [
        Attack(
            "socket as --tokenizer",
            3,
            ("cache", *LLAMA, "--tokenizer", "{d}/p", _CHAT),
            make=special_at("p", "socket"),
        ),
        Attack(
            "socket as events listen --capture",
            3,
            ("events", "listen", "tcp://127.0.0.1:9", "--timeout", "0", "--capture", "{d}/p"),
            make=special_at("p", "socket"),
        ),
        Attack(
            "/dev/null as events listen --capture",
            3,
            ("events", "listen", "tcp://127.0.0.1:9", "--timeout", "0", "--capture", "/dev/null"),
        ),
        Attack(
            "socket as cache --plot",
            3,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                "1GiB,2GiB",
                "--plot",
                "{d}/p",
                _IDS,
            ),
            make=special_at("p", "socket"),
        ),
        Attack(
            "folder as cache --plot",
            3,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                "1GiB,2GiB",
                "--plot",
                "{d}/p",
                _IDS,
            ),
            make=special_at("p", "dir"),
        ),
        Attack(
            "/dev/full as cache --plot",
            3,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                "1GiB,2GiB",
                "--plot",
                "/dev/full",
                _IDS,
            ),
        ),
        Attack(
            "a valid cache --plot writes only its PNG (control)",
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
            expect="works",
            outputs=("p.png",),
        ),
        Attack(
            "stdin '-' as workload, empty",
            3,
            ("cache", *LLAMA, "-"),
        ),
        Attack(
            "stdin '-' as workload, garbage",
            3,
            ("cache", *LLAMA, "-"),
            stdin=b"\x00\xff garbage\n" * 1000,
        ),
        Attack("/dev/zero as hash request", 3, ("hash", "--seed", "0", "/dev/zero")),
        Attack("/dev/zero as events audit", 3, ("events", "audit", "/dev/zero")),
        Attack(
            "/proc/self/mem as plan config",
            3,
            ("plan", "/proc/self/mem", *MEM),
        ),
    ]
    return a


def path_cases() -> list[Attack]:
    return [*_ids(), *_refs(), *_files()]
