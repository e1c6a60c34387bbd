"""kvpure against vLLM 0.34's own request hasher, with and without lookahead, and the C floor.

Run: ``.venv/bin/python bench/bench_hash_vllm034.py [--quick]`` (the C extension built).

BASELINE is vLLM 0.34.0's own code, run in this process: the functions
``get_request_block_hasher``, ``generate_block_hash_extra_keys`` (and its helpers),
``generate_lookahead_block_hash_extra_keys`` and ``hash_block_tokens`` of
``vllm/v1/core/kv_cache_utils.py``, ``get_mm_features_in_window`` of
``vllm/multimodal/utils.py``, ``TokenBuffer``/``token_slice`` of ``vllm/v1/token_buffer.py``,
``ConstantList`` of ``vllm/v1/utils.py`` and the four hash functions of
``vllm/utils/hashing.py``, compiled from the unpacked wheel's source files
(``KVPURE_VLLM034_ROOT``, default ``/work/vllm/0.34.0``) without importing the ``vllm``
package (whose import needs torch and a GPU stack). The ``Request`` it hashes is a
stand-in holding exactly the fields 0.34's ``Request.__init__`` gives the hasher
(``_all_token_ids`` a ``TokenBuffer``, ``all_token_ids`` a ``ConstantList`` of it,
``block_hashes``, ``mm_features``, ``lora_request``, ``cache_salt``, ``prompt_embeds``) and
its ``append_output_token_ids``/``update_block_hashes`` bodies. NONE_HASH is set as
``init_none_hash`` sets it with ``PYTHONHASHSEED=0``; every digest is checked equal to
kvpure's.

Timed (process CPU time, best of several rounds, the two sides in turn):

- prompt: 32,768 random token ids, block size 16: vLLM's ``Request`` built with its hasher
  (which hashes the prompt) against ``hash_prompt(scheme, HashRequest(...))``;
- decode: after a 4,096-token prompt, 2,048 output tokens appended one at a time
  (``Request.append_output_token_ids`` against ``RequestBlockHashes.append_output_token_ids``);

each with L = 0 and L = 1 (EAGLE/MTP servers), for the four algorithms; and the floor: the
same bytes vLLM hashes (every block's serialised payload, prebuilt) through SHA-256 /
XXH3-128 in a C loop (``kvpure.hashing._chain.floor_digests``: OpenSSL's SHA256 and
libxxhash's XXH3_128bits, the calls kvpure's C chain makes), so ``kvpure/floor`` is what
kvpure spends beyond hashing itself.
"""

from __future__ import annotations
import __future__

import ast
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kvpure.hashing import (
    VLLM_0_34,
    HashRequest,
    HashScheme,
    RequestBlockHashes,
    accelerator,
    hash_prompt,
)
from kvpure.hashing.fast_prompt import block_payloads

ALGOS = ("sha256_cbor", "xxhash_cbor", "sha256", "xxhash")
VOCAB = 128_256
ROOT = Path(os.environ.get("KVPURE_VLLM034_ROOT", "/work/vllm/0.34.0")) / "vllm"


# --- vLLM 0.34's own functions, compiled from its source -----------------------------------


def _compile_from(path: Path, names: set[str], namespace: dict[str, Any]) -> None:
    """Run the top-level definitions ``names`` of ``path`` in ``namespace``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    body: list[ast.stmt] = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names
    ]
    found = {getattr(node, "name", "") for node in body}
    if found != names:
        raise SystemExit(f"{path}: missing {sorted(names - found)}")
    code = compile(
        ast.Module(body=body, type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    exec(code, namespace)  # vLLM's code, run as it is written


def load_vllm_034(algo: str, seed: str = "0") -> dict[str, Any]:
    """A namespace holding vLLM 0.34's hasher functions, with NONE_HASH for ``seed``."""
    import bisect
    import hashlib
    from array import array
    from collections.abc import Collection, Iterable, Iterator
    from pickle import PickleBuffer
    from typing import Generic, NewType, TypeVar, overload

    import numpy as np

    hashing: dict[str, Any] = {"__name__": "vllm.utils.hashing"}
    source = (ROOT / "utils/hashing.py").read_text()
    exec(compile(source, str(ROOT / "utils/hashing.py"), "exec"), hashing)
    hash_fn = hashing["get_hash_fn_by_name"](algo)
    ns: dict[str, Any] = {
        "__name__": "vllm_034_hasher",
        "Any": Any,
        "Callable": Callable,
        "Sequence": Sequence,
        "Collection": Collection,
        "Iterable": Iterable,
        "Iterator": Iterator,
        "Generic": Generic,
        "TypeVar": TypeVar,
        "T": TypeVar("T"),
        "overload": overload,
        "array": array,
        "np": np,
        "PickleBuffer": PickleBuffer,
        "bisect": bisect,
        "hashlib": hashlib,
        "BlockHash": NewType("BlockHash", bytes),
        "tensor_data": None,  # prompt embeddings are not benchmarked
    }
    _compile_from(ROOT / "utils/collection_utils.py", {"as_list"}, ns)
    token_buffer = ROOT / "v1/token_buffer.py"
    tree = ast.parse(token_buffer.read_text())
    for node in tree.body:  # TokenBuffer is defined under `if TYPE_CHECKING: ... else:`
        if isinstance(node, ast.If):
            body = node.orelse
            code = compile(ast.Module(body=body, type_ignores=[]), str(token_buffer), "exec")
            exec(code, ns)
    _compile_from(token_buffer, {"token_slice"}, ns)
    _compile_from(ROOT / "v1/utils.py", {"ConstantList"}, ns)
    _compile_from(ROOT / "multimodal/utils.py", {"get_mm_features_in_window"}, ns)
    _compile_from(
        ROOT / "v1/core/kv_cache_utils.py",
        {
            "hash_block_tokens",
            "_gen_mm_extra_hash_keys",
            "_gen_lora_extra_hash_keys",
            "_gen_prompt_embeds_extra_hash_keys",
            "generate_block_hash_extra_keys",
            "get_request_block_hasher",
            "generate_lookahead_block_hash_extra_keys",
        },
        ns,
    )
    ns["NONE_HASH"] = ns["BlockHash"](hash_fn(seed))  # init_none_hash with PYTHONHASHSEED
    ns["hash_fn"] = hash_fn
    token_buffer_cls, constant_list = ns["TokenBuffer"], ns["ConstantList"]

    class Request:
        """The fields vLLM 0.34's ``Request.__init__`` gives its hasher, and its append."""

        def __init__(self, prompt_token_ids: list[int], block_hasher: Any) -> None:
            self.prompt_token_ids = token_buffer_cls(prompt_token_ids)
            self.prompt_embeds = None
            self._prompt_embeds_per_block_hashes: dict[Any, bytes] = {}
            self._output_token_ids: list[int] = []
            self._all_token_ids = token_buffer_cls(self.prompt_token_ids)
            self.cache_salt = None
            self.mm_features: list[Any] = []
            self.lora_request = None
            self.output_token_ids = constant_list(self._output_token_ids)
            self.all_token_ids = constant_list(self._all_token_ids)
            self.block_hashes: list[bytes] = []
            self._block_hasher = block_hasher
            self.update_block_hashes()

        @property
        def num_tokens(self) -> int:
            return len(self._all_token_ids)

        def append_output_token_ids(self, token_ids: int | list[int]) -> None:
            if isinstance(token_ids, int):
                self._output_token_ids.append(token_ids)
                self._all_token_ids.append(token_ids)
            else:
                self._output_token_ids.extend(token_ids)
                self._all_token_ids.extend(token_ids)
            self.update_block_hashes()

        def update_block_hashes(self) -> None:
            if self._block_hasher is not None:
                self.block_hashes.extend(self._block_hasher(self))

    ns["Request"] = Request
    return ns


# --- timing ---------------------------------------------------------------------------------


def _best(functions: Sequence[Callable[[], object]], rounds: int, repeat: int) -> list[float]:
    best = [float("inf")] * len(functions)
    for _ in range(rounds):
        for index, function in enumerate(functions):
            start = time.process_time()
            for _ in range(repeat):
                function()
            best[index] = min(best[index], (time.process_time() - start) / repeat)
    return best


def _floor(algo: str, payloads: list[bytes]) -> Callable[[], object]:
    floor = accelerator.floor_digests()
    if floor is None:
        raise SystemExit("the C extension is not built: no floor")
    code = {"sha256": 0, "sha256_cbor": 1, "xxhash": 2, "xxhash_cbor": 3}[algo]
    return lambda: floor(code, payloads)


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 3 if quick else 7
    rng = random.Random(32_768)
    prompt = [rng.randrange(VOCAB) for _ in range(32_768)]
    decode_prompt = prompt[:4096]
    outputs = [rng.randrange(VOCAB) for _ in range(2048)]
    print(
        f"extension: {accelerator.accelerated()}, xxhash route: {accelerator.xxhash_route()}, "
        f"vLLM source: {ROOT}"
    )
    header = f"{'algo':12} {'L':>2} | {'vLLM ms':>8} {'kvpure ms':>9} {'floor ms':>8}"
    print("prompt, 32,768 tokens, block 16 (kvpure/vLLM, kvpure/floor)")
    print(f"{header} | {'kv/vLLM':>7} {'kv/floor':>8}")
    for lookahead in (0, 1):
        for algo in ALGOS:
            ns = load_vllm_034(algo)
            hasher = ns["get_request_block_hasher"](16, ns["hash_fn"], lookahead)
            scheme = HashScheme.from_seed(
                algorithm=algo,
                block_size=16,
                seed="0",
                profile=VLLM_0_34,
                num_hash_lookahead_tokens=lookahead,
            )
            request = HashRequest(prompt_token_ids=tuple(prompt))
            expected = ns["Request"](prompt, hasher).block_hashes
            got = list(hash_prompt(scheme, request))
            if got != expected:
                raise SystemExit(f"MISMATCH prompt {algo} L={lookahead}")
            parents = [scheme.none_hash, *got[:-1]]
            # the exact bytes vLLM hashes: (parent, tokens, extra keys) serialised per block
            extras = (
                [None] * len(got)
                if not lookahead
                else [(None, prompt[16 * (i + 1)]) for i in range(len(got))]
            )
            payloads = block_payloads(algo, parents, prompt, 16, extras)
            vllm_s, kv_s, floor_s = _best(
                [
                    partial(ns["Request"], prompt, hasher),
                    partial(hash_prompt, scheme, request),
                    _floor(algo, payloads),
                ],
                rounds,
                3,
            )
            print(
                f"{algo:12} {lookahead:>2} | {vllm_s * 1e3:8.2f} {kv_s * 1e3:9.3f} "
                f"{floor_s * 1e3:8.3f} | {kv_s / vllm_s:7.3f} {kv_s / floor_s:8.2f}"
            )
    print("decode: 4,096-token prompt, then 2,048 tokens one at a time, block 16 (ms per 2,048)")
    print(f"{'algo':12} {'L':>2} | {'vLLM ms':>8} {'kvpure ms':>9} | {'kv/vLLM':>7}")
    for lookahead in (0, 1):
        for algo in ALGOS:
            ns = load_vllm_034(algo)
            hasher = ns["get_request_block_hasher"](16, ns["hash_fn"], lookahead)
            scheme = HashScheme.from_seed(
                algorithm=algo,
                block_size=16,
                seed="0",
                profile=VLLM_0_34,
                num_hash_lookahead_tokens=lookahead,
            )
            start_state = RequestBlockHashes.start(
                scheme, HashRequest(prompt_token_ids=tuple(decode_prompt))
            )

            expected_prompt = ns["Request"](decode_prompt, hasher).block_hashes

            def vllm_decode(
                ns: dict[str, Any] = ns, hasher: Any = hasher, known: list[bytes] = expected_prompt
            ) -> list[bytes]:
                req = ns["Request"](decode_prompt, None)
                req.block_hashes = list(known)
                req._block_hasher = hasher
                for token in outputs:
                    req.append_output_token_ids(token)
                hashes: list[bytes] = req.block_hashes
                return hashes

            def kv_decode(state: RequestBlockHashes = start_state) -> RequestBlockHashes:
                for token in outputs:
                    state = state.append_output_token_ids(token)
                return state

            if list(start_state.block_hashes) != expected_prompt:
                raise SystemExit(f"MISMATCH decode prompt {algo} L={lookahead}")
            if list(kv_decode().block_hashes) != vllm_decode():
                raise SystemExit(f"MISMATCH decode {algo} L={lookahead}")
            vllm_s, kv_s = _best([vllm_decode, kv_decode], rounds, 5)
            # the prompt's bookkeeping (building the Request) is in vLLM's time: subtract it
            (setup_s,) = _best([partial(ns["Request"], decode_prompt, None)], rounds, 5)
            vllm_s -= setup_s
            print(
                f"{algo:12} {lookahead:>2} | {vllm_s * 1e3:8.3f} {kv_s * 1e3:9.3f} | "
                f"{kv_s / vllm_s:7.3f}"
            )


if __name__ == "__main__":
    main()
