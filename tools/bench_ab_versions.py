"""Two kvpure versions timed in one process: the free queue and hashing, new/old ratios.

``python tools/bench_ab_versions.py OLD_SRC`` (with the project's src on PYTHONPATH).
OLD_SRC is the ``src`` folder of an older checkout, e.g. the commit before the
runtime-type checks (``mkdir /tmp/kv-before && git archive ad4f0c8~ src | tar -x -C
/tmp/kv-before``, then OLD_SRC is ``/tmp/kv-before/src``). Its
``kvpure`` package is copied to a temporary folder as ``kvpure_before`` (imports
rewritten) so both load side by side; each measure takes turns between the two
and keeps the best of several rounds of process CPU time, garbage collector off.
A ratio new/old above 1 means the current code is slower.
"""

from __future__ import annotations

import atexit
import gc
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROUNDS = 15


def _load_old(old_src: Path) -> ModuleType:
    tmp = Path(tempfile.mkdtemp(prefix="kvpure-before-"))
    atexit.register(shutil.rmtree, tmp, True)
    target = tmp / "kvpure_before"
    shutil.copytree(old_src / "kvpure", target, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bkvpure\b(?=[.\s])", "kvpure_before", text)
        path.write_text(text)
    sys.path.insert(0, str(tmp))
    import kvpure_before

    return kvpure_before


def _best(fn: Callable[[], object], rounds: int, number: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.disable()
        start = time.process_time()
        for _ in range(number):
            fn()
        elapsed = time.process_time() - start
        gc.enable()
        best = min(best, elapsed / number)
    return best


def _ab(name: str, new: Callable[[], object], old: Callable[[], object], number: int) -> None:
    new_best = old_best = float("inf")
    for _ in range(ROUNDS):  # take turns so both see the same load
        new_best = min(new_best, _best(new, 1, number))
        old_best = min(old_best, _best(old, 1, number))
    print(f"| {name:44} | {new_best * 1e6:10.2f} | {old_best * 1e6:10.2f} | {new_best / old_best:5.3f} |")


def _queue_cases(pkg: Any) -> dict[str, Callable[[], object]]:
    """Operations on a prebuilt queue (each returns it to a full queue), and the build."""
    Block, Queue = pkg.KVCacheBlock, pkg.FreeKVCacheBlockQueue
    n = 20_000
    blocks = [Block(i) for i in range(n)]
    queue = Queue(blocks)
    halves = blocks[::2]

    def popleft_append() -> None:
        for _ in range(n):
            queue.append(queue.popleft())

    def remove_append() -> None:
        for block in halves:
            queue.remove(block)
        for block in halves:
            queue.append(block)

    def batches() -> None:
        for _ in range(n // 64):
            queue.append_n(queue.popleft_n(64))
            queue.prepend_n(queue.popleft_n(64))

    def build_blocks() -> None:
        [Block(i) for i in range(n)]

    def build_queue() -> None:
        fresh = [Block(i) for i in range(n)]
        Queue(fresh)

    return {
        "queue: 20,000 popleft + append": popleft_append,
        "queue: 10,000 remove + append": remove_append,
        "queue: 312 x (popleft_n + append_n + prepend_n)": batches,
        "queue: 20,000 KVCacheBlock(i)": build_blocks,
        "queue: 20,000 blocks + FreeKVCacheBlockQueue": build_queue,
    }


def _hash_cases(pkg: Any) -> dict[str, Callable[[], object]]:
    hashing = pkg.hashing
    scheme = hashing.HashScheme.from_seed(
        algorithm="sha256_cbor", block_size=16, seed="0", profile=hashing.VLLM_0_26
    )
    tokens = tuple(range(8192))
    request = hashing.HashRequest(prompt_token_ids=tokens)
    rich = hashing.HashRequest(
        prompt_token_ids=tokens,
        lora_name="adapter",
        cache_salt="salt",
        mm_features=(hashing.MultiModalFeature(identifier="img", offset=100, length=500),),
    )
    state = hashing.RequestBlockHashes.start(scheme, request)

    def decode() -> None:
        current = state
        for token in range(64):
            current = current.append_output_token_ids(token)

    return {
        "hash: 8,192-token prompt, sha256_cbor bs16": lambda: hashing.hash_prompt(
            scheme, request
        ),
        "hash: same, LoRA + salt + image": lambda: hashing.hash_prompt(scheme, rich),
        "hash: decode 64 tokens one at a time": decode,
        "hash: RequestBlockHashes.start": lambda: hashing.RequestBlockHashes.start(
            scheme, request
        ),
    }


def main() -> None:
    old = _load_old(Path(sys.argv[1]))
    import importlib

    import kvpure

    importlib.import_module("kvpure.hashing.accelerator").set_enabled(False)
    importlib.import_module("kvpure_before.hashing.accelerator").set_enabled(False)
    print(f"| {'measure (pure Python)':44} | {'new us':>10} | {'old us':>10} | new/old |")
    print(f"|{'-' * 46}|{'-' * 12}|{'-' * 12}|-------|")
    new_q, old_q = _queue_cases(kvpure), _queue_cases(old)
    for name in new_q:
        _ab(name, new_q[name], old_q[name], 3)
    new_h, old_h = _hash_cases(kvpure), _hash_cases(old)
    for name in new_h:
        _ab(name, new_h[name], old_h[name], 5)


if __name__ == "__main__":
    main()
