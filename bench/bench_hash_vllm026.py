"""``hash_prompt`` against the real vLLM 0.26 hasher, the C chain alone and the C floor.

Run (vLLM 0.26's source on the path, its dependencies importable on CPU)::

    PYTHONPATH=src:/work/vllm/0.26.0:/work/oracle_deps .venv/bin/python \
        bench/bench_hash_vllm026.py [--rounds N] [--old PATH_TO_OLD_CHAIN_SO]

Timed in this process, in turn round after round (process CPU time, best round of each),
on one prompt of 32,768 random ids below 128,256 (``--tokens`` another length, each timing
then as many calls as make 32,768 tokens), block size 16, no extra keys:

- vLLM: 0.26's own ``get_request_block_hasher(16, hash_fn)`` run on a real ``Request``
  (``vllm.v1.request.Request``) holding the prompt, ``NONE_HASH`` set by
  ``init_none_hash`` with ``PYTHONHASHSEED=0`` (kvpure's seed ``"0"``); skipped (ratios
  against the floor only) where ``import vllm`` fails;
- kvpure: ``hash_prompt(scheme, request)``, the ``HashRequest`` built once;
- chain: the extension's ``hash_blocks`` alone (the same prompt as a tuple);
- old chain: with ``--old``, another build of ``_chain`` (say main's, copied aside)
  loaded side by side from that path, its ``hash_blocks`` on the same input;
- floor: the very payloads vLLM hashes (prebuilt) through SHA-256 / XXH3-128 in a C loop
  (``_chain.floor_digests``).

Every digest list is checked equal to vLLM's (or to kvpure's where vLLM is missing).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import os
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import xxhash

from kvpure.hashing import VLLM_0_26, HashRequest, HashScheme, accelerator, hash_prompt
from kvpure.hashing.fast_prompt import block_payloads

ALGOS = ("sha256_cbor", "xxhash_cbor", "sha256", "xxhash")
CODES = {"sha256": 0, "sha256_cbor": 1, "xxhash": 2, "xxhash_cbor": 3}
GOALS = {"sha256_cbor": 0.04, "xxhash_cbor": 0.03, "sha256": 0.08, "xxhash": 0.06}
VOCAB = 128_256
NUM_TOKENS = 32_768
BLOCK_SIZE = 16


def load_vllm() -> dict[str, Any] | None:
    """vLLM 0.26's hasher pieces, or None where ``import vllm`` fails."""
    os.environ["PYTHONHASHSEED"] = "0"  # read by init_none_hash when it runs
    try:
        sampling = importlib.import_module("vllm.sampling_params")
        hashing = importlib.import_module("vllm.utils.hashing")
        kv_cache_utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
        request_module = importlib.import_module("vllm.v1.request")
    except Exception as err:  # any import failure: run without vLLM
        print(f"vLLM not importable ({type(err).__name__}: {err}); ratios against the floor")
        return None
    return {
        "SamplingParams": sampling.SamplingParams,
        "get_hash_fn_by_name": hashing.get_hash_fn_by_name,
        "kv_cache_utils": kv_cache_utils,
        "Request": request_module.Request,
    }


def vllm_hasher(vllm: dict[str, Any], algo: str, prompt: list[int]) -> Callable[[], list[bytes]]:
    """One run of vLLM's request block hasher over the whole prompt (its Request's
    ``block_hashes`` stay empty, so each call hashes every block)."""
    hash_fn = vllm["get_hash_fn_by_name"](algo)
    utils = vllm["kv_cache_utils"]
    utils.init_none_hash(hash_fn)
    hasher = utils.get_request_block_hasher(BLOCK_SIZE, hash_fn)
    request = vllm["Request"](
        request_id="bench",
        prompt_token_ids=prompt,
        sampling_params=vllm["SamplingParams"](max_tokens=1),
        pooling_params=None,
    )
    return partial(hasher, request)


def load_old_chain(path: str) -> ModuleType:
    """Another build of ``kvpure.hashing._chain`` from ``path``, beside the current one."""
    loader = importlib.machinery.ExtensionFileLoader("kvpure.hashing._chain", path)
    spec = importlib.util.spec_from_loader("kvpure.hashing._chain", loader, origin=path)
    if spec is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    module.init_xxhash(xxhash.xxh3_128_digest)
    return module


def _repeated(function: Callable[[], object], times: int) -> None:
    for _ in range(times):
        function()


def best_of_each(functions: Sequence[Callable[[], object]], rounds: int) -> list[float]:
    """Each function's best time, all run in turn each round, the round's first one rotating
    (so that none always follows vLLM's allocations, which leave the caches cold)."""
    best = [float("inf")] * len(functions)
    for round_index in range(rounds):
        for step in range(len(functions)):
            index = (round_index + step) % len(functions)
            start = time.process_time()
            functions[index]()
            best[index] = min(best[index], time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--old", help="path of another _chain build to time beside this one")
    parser.add_argument(
        "--tokens", type=int, default=NUM_TOKENS, help="prompt length (default 32768)"
    )
    args = parser.parse_args()
    vllm = load_vllm()
    old = load_old_chain(args.old) if args.old else None
    chain = accelerator.compiled_hash_blocks()
    floor = accelerator.floor_digests()
    if chain is None or floor is None:
        raise SystemExit("the C extension is not built")
    rng = random.Random(NUM_TOKENS)
    prompt = [rng.randrange(VOCAB) for _ in range(args.tokens)]
    request = HashRequest(prompt_token_ids=tuple(prompt))
    blocks = args.tokens // BLOCK_SIZE
    repeat = max(1, NUM_TOKENS // max(args.tokens, 1))  # calls per timing: 32,768 tokens each
    ns = 1e9 / (blocks * repeat)
    print(f"xxhash route: {accelerator.xxhash_route()}; ns per block, best of {args.rounds}")
    print(
        f"{'algo':12} | {'vLLM':>7} {'kvpure':>7} {'chain':>7} {'old':>7} {'floor':>7} | "
        f"{'kv/vLLM':>7} {'goal':>5} {'kv/floor':>8} {'chain/old':>9}"
    )
    for algo in ALGOS:
        scheme = HashScheme.from_seed(
            algorithm=algo, block_size=BLOCK_SIZE, seed="0", profile=VLLM_0_26
        )
        got = list(hash_prompt(scheme, request))
        extras = [None] * blocks
        tokens = tuple(prompt)
        functions: list[Callable[[], object]] = [
            partial(hash_prompt, scheme, request),
            partial(chain, algo, scheme.none_hash, tokens, BLOCK_SIZE, extras),
        ]
        if vllm is not None:
            run_vllm = vllm_hasher(vllm, algo, prompt)
            if run_vllm() != got:
                raise SystemExit(f"MISMATCH kvpure vs vLLM 0.26: {algo}")
            functions.append(run_vllm)
        if old is not None:
            old_run = partial(
                old.hash_blocks, CODES[algo], scheme.none_hash, tokens, BLOCK_SIZE, extras
            )
            if old_run() != got:
                raise SystemExit(f"MISMATCH old chain: {algo}")
            functions.append(old_run)
        if chain(algo, scheme.none_hash, tokens, BLOCK_SIZE, extras) != got:
            raise SystemExit(f"MISMATCH chain: {algo}")
        payloads = block_payloads(algo, [scheme.none_hash, *got[:-1]], prompt, BLOCK_SIZE, extras)
        functions.append(partial(floor, CODES[algo], payloads))
        if repeat > 1:
            functions = [partial(_repeated, function, repeat) for function in functions]
        times = best_of_each(functions, args.rounds)
        kv, ch = times[0], times[1]
        rest = times[2:]
        vllm_t = rest.pop(0) if vllm is not None else float("nan")
        old_t = rest.pop(0) if old is not None else float("nan")
        floor_t = rest.pop(0)
        print(
            f"{algo:12} | {vllm_t * ns:7.0f} {kv * ns:7.0f} {ch * ns:7.0f} {old_t * ns:7.0f} "
            f"{floor_t * ns:7.0f} | {kv / vllm_t:7.3f} {GOALS[algo]:5.2f} {kv / floor_t:8.2f} "
            f"{ch / old_t:9.2f}"
        )


if __name__ == "__main__":
    main()
