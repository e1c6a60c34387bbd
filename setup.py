"""The optional C accelerators of kvpure's prompt hashing, of the free block queue's batch
operations (``kvpure._queue_links``), of the block pool's loops (``kvpure._pool_loops``) and
of KV event decoding (``kvpure.events._decode``); metadata lives in pyproject.toml.

``kvpure.hashing._chain`` is built where a C compiler, the Python headers and OpenSSL's
headers (libssl-dev) are present; ``optional=True`` lets the install go on without it, and
kvpure then hashes in pure Python (``kvpure.hashing.accelerator.accelerated()`` says which).
"""

from setuptools import Extension, setup

_CSRC = "src/kvpure/hashing/csrc"

setup(
    ext_modules=[
        Extension(
            "kvpure.hashing._chain",
            sources=[
                f"{_CSRC}/{unit}.c"
                for unit in (
                    "chain",
                    "prelaid",
                    "token_items",
                    "sha_ni",
                    "encode",
                    "digest",
                    "block_hasher",
                    "decode",
                )
            ],
            depends=[f"{_CSRC}/chain.h"],
            libraries=["crypto"],
            extra_compile_args=[
                "-O2",
                "-std=c11",
                "-fvisibility=hidden",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
            ],
            optional=True,
        ),
        *(
            Extension(
                f"kvpure._{name}",
                sources=[f"src/kvpure/csrc/{name}.c"],
                extra_compile_args=[
                    "-O2",
                    "-std=c11",
                    "-fvisibility=hidden",
                    "-Wall",
                    "-Wextra",
                    "-Wno-unused-parameter",
                ],
                optional=True,
            )
            for name in ("queue_links", "pool_loops")
        ),
        Extension(
            "kvpure.events._decode",
            sources=[
                "src/kvpure/events/csrc/event_decode.c",
                "src/kvpure/events/csrc/msgpack_read.c",
            ],
            depends=["src/kvpure/events/csrc/msgpack_read.h"],
            extra_compile_args=[
                "-O2",
                "-std=c11",
                "-fvisibility=hidden",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
            ],
            optional=True,
        ),
    ]
)
