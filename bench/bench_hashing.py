"""Prompt hashing speed: vLLM's per-block method (BASELINE) vs kvpure vs the hash-call floor.

Run: ``make bench`` (or ``.venv/bin/python bench/bench_hashing.py [--quick]``).

All three run in this process on the same prompts and produce the same digests (checked):

- BASELINE: vLLM's method, rewritten here in the shape of vLLM's ``request_block_hasher``:
  for each full block, generate the extra keys (LoRA name, multimodal (identifier, offset)
  pairs, the cache salt on block 0), slice the tokens, ``tuple()`` them and hash
  ``serialise((parent, tokens, extra_keys))`` (``cbor2.dumps(canonical=True)`` or
  ``pickle.dumps(protocol=5)``).
- kvpure: the public path, ``hash_prompt(scheme, HashRequest(...))`` (profile vllm-0.26):
  the package's extra keys for every block, then the fast chain hasher
  (``kvpure.hashing.fast_prompt.fast_hash_token_blocks``, through the C extension where
  built); for decoding,
  ``RequestBlockHashes.append_output_token_ids`` and ``extend_block_hashes`` (the public
  extension paths: extra keys, token bookkeeping, hashing), and one block through
  ``fast_hash_token_blocks`` against vLLM's ``hash_block_tokens`` body.
- floor: the hash calls alone on the payloads prebuilt (``sha256(p).digest()`` /
  ``xxh3_128_digest(p)``), i.e. the cost left if serialisation were free.

Prints microseconds per block (best of several runs, process CPU time, so that other load
on the machine counts less) and the ratios kvpure/baseline and kvpure/floor, then the
one-block extension (decoding) for each algorithm.
"""

from __future__ import annotations

import hashlib
import importlib
import pickle
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import cbor2
import xxhash

from kvpure.hashing import (
    VLLM_0_26,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    RequestBlockHashes,
    extend_block_hashes,
    fast_hash_token_blocks,
    hash_prompt,
)

ALGOS = ("sha256_cbor", "xxhash_cbor", "sha256", "xxhash")
VOCAB = 128_256  # Llama 3


# --- BASELINE: vLLM's per-block hasher, in its shape --------------------------------------


def _sha256_cbor(obj: object) -> bytes:
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def _xxhash_cbor(obj: object) -> bytes:
    return xxhash.xxh3_128_digest(cbor2.dumps(obj, canonical=True))


def _sha256(obj: object) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=5)).digest()


def _xxhash(obj: object) -> bytes:
    return xxhash.xxh3_128_digest(pickle.dumps(obj, protocol=5))


BASELINE_HASH_FNS: dict[str, Callable[[object], bytes]] = {
    "sha256_cbor": _sha256_cbor,
    "xxhash_cbor": _xxhash_cbor,
    "sha256": _sha256,
    "xxhash": _xxhash,
}


@dataclass
class MMFeature:
    identifier: str
    offset: int
    length: int


@dataclass
class Request:
    all_token_ids: list[int]
    lora_name: str | None = None
    cache_salt: str | None = None
    mm_features: list[MMFeature] = field(default_factory=list)
    block_hashes: list[bytes] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)


def baseline_mm_keys(
    request: Request, start: int, end: int, mm_idx: int
) -> tuple[list[object], int]:
    keys: list[object] = []
    features = request.mm_features
    if not features:
        return keys, mm_idx
    last = features[-1]
    if last.offset + last.length <= start:
        return keys, mm_idx
    if mm_idx < 0:
        mm_idx = len(features) + mm_idx
    while mm_idx < len(features):
        feature = features[mm_idx]
        if end > feature.offset:
            if start >= feature.offset + feature.length:
                mm_idx += 1
                continue
            keys.append((feature.identifier, feature.offset - start))
            if end >= feature.offset + feature.length:
                mm_idx += 1
            else:
                break
        else:
            break
    return keys, mm_idx


def baseline_extra_keys(
    request: Request, start: int, end: int, mm_idx: int
) -> tuple[tuple[object, ...] | None, int]:
    mm_keys, mm_idx = baseline_mm_keys(request, start, end, mm_idx)
    lora_keys: list[object] = [request.lora_name] if request.lora_name else []
    salt_keys: list[object] = [request.cache_salt] if start == 0 and request.cache_salt else []
    keys = lora_keys + mm_keys + salt_keys
    return (tuple(keys) if keys else None), mm_idx


def baseline_hash_block(
    hash_fn: Callable[[object], bytes],
    parent: bytes,
    block_tokens: Sequence[int],
    extra: tuple[object, ...] | None,
) -> bytes:
    return hash_fn((parent, tuple(block_tokens), extra))


def baseline_request_hasher(
    request: Request, block_size: int, hash_fn: Callable[[object], bytes], none_hash: bytes
) -> list[bytes]:
    """BASELINE: the new full blocks' hashes, one block at a time (vLLM's loop)."""
    start = len(request.block_hashes) * block_size
    mm_idx = -1 if start > 0 else 0
    parent = request.block_hashes[-1] if request.block_hashes else none_hash
    out: list[bytes] = []
    while start + block_size <= request.num_tokens:
        end = start + block_size
        extra, mm_idx = baseline_extra_keys(request, start, end, mm_idx)
        block = request.all_token_ids[start:end]
        parent = baseline_hash_block(hash_fn, parent, block, extra)
        out.append(parent)
        start = end
    return out


# --- kvpure: the public path (extra keys for every block, then the fast chain hasher) -----


def kvpure_request(request: Request) -> HashRequest:
    return HashRequest(
        prompt_token_ids=tuple(request.all_token_ids),
        lora_name=request.lora_name,
        cache_salt=request.cache_salt,
        mm_features=tuple(
            MultiModalFeature(identifier=f.identifier, offset=f.offset, length=f.length)
            for f in request.mm_features
        ),
    )


def kvpure_scheme(algo: str, block_size: int) -> HashScheme:
    return HashScheme.from_seed(algorithm=algo, block_size=block_size, seed="0", profile=VLLM_0_26)


# --- timing --------------------------------------------------------------------------------


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def best_of_each(fns: Sequence[Callable[[], object]], repeats: int, calls: int = 1) -> list[float]:
    """Best time of one call of each function, the functions run in turn (so load hits them
    alike); each sample times ``calls`` calls in a row, so that short calls are not lost in
    the timer's own cost."""
    best = [float("inf")] * len(fns)
    batch = range(calls)
    for _ in range(repeats):
        for index, fn in enumerate(fns):
            start = time.process_time()
            for _ in batch:
                fn()
            best[index] = min(best[index], (time.process_time() - start) / calls)
    return best


def make_request(num_tokens: int, with_extras: bool, seed: int) -> Request:
    rng = random.Random(seed)
    tokens = [rng.randrange(VOCAB) for _ in range(num_tokens)]
    if not with_extras:
        return Request(all_token_ids=tokens)
    image_tokens = min(576, num_tokens // 4)
    images = [
        MMFeature(
            identifier=hashlib.sha256(b"image-a").hexdigest(),
            offset=num_tokens // 8,
            length=image_tokens,
        ),
        MMFeature(
            identifier=hashlib.sha256(b"image-b").hexdigest(),
            offset=num_tokens // 2,
            length=image_tokens,
        ),
    ]
    return Request(
        all_token_ids=tokens, lora_name="sql-lora", cache_salt="salt-1234", mm_features=images
    )


def floor_run(algo: str, payloads: list[bytes]) -> list[bytes]:
    """The floor: the hash calls alone on the prebuilt payloads."""
    if algo.startswith("sha256"):
        sha = hashlib.sha256
        return [sha(p).digest() for p in payloads]
    xxh = xxhash.xxh3_128_digest
    return [xxh(p) for p in payloads]


def payloads_of(
    request: Request, block_size: int, algo: str, hashes: list[bytes], none_hash: bytes
) -> list[bytes]:
    """The payloads the baseline hashed (rebuilt once, outside the timings)."""
    serialise: Callable[[object], bytes] = (
        (lambda o: cbor2.dumps(o, canonical=True))
        if algo.endswith("_cbor")
        else (lambda o: pickle.dumps(o, protocol=5))
    )
    parents = [none_hash, *hashes[:-1]]
    tokens = request.all_token_ids
    out = []
    mm_idx = 0
    for i, parent in enumerate(parents):
        start = i * block_size
        extra, mm_idx = baseline_extra_keys(request, start, start + block_size, mm_idx)
        out.append(serialise((parent, tuple(tokens[start : start + block_size]), extra)))
    return out


def main(quick: bool) -> None:
    sizes = (1024, 32_768) if quick else (1024, 32_768, 131_072)
    repeats = {1024: 150, 32_768: 12, 131_072: 4}
    print(
        f"{'algo':12} {'tokens':>7} {'bs':>4} {'extras':>6} | {'baseline':>9} "
        f"{'kvpure':>8} {'floor':>7} us/block | {'kv/base':>7} {'kv/floor':>8}"
    )
    for with_extras in (False, True):
        for num_tokens in sizes:
            request = make_request(num_tokens, with_extras, seed=num_tokens)
            hash_request = kvpure_request(request)
            for block_size in (16, 64, 256):
                num_blocks = num_tokens // block_size
                reps = repeats[num_tokens]
                for algo in ALGOS:
                    fn = BASELINE_HASH_FNS[algo]
                    scheme = kvpure_scheme(algo, block_size)
                    none_hash = scheme.none_hash
                    expected = baseline_request_hasher(request, block_size, fn, none_hash)
                    if list(hash_prompt(scheme, hash_request)) != expected:
                        raise SystemExit(f"MISMATCH {algo} {num_tokens} {block_size}")
                    payloads = payloads_of(request, block_size, algo, expected, none_hash)
                    base, fast, floor = best_of_each(
                        (
                            partial(baseline_request_hasher, request, block_size, fn, none_hash),
                            partial(hash_prompt, scheme, hash_request),
                            partial(floor_run, algo, payloads),
                        ),
                        reps,
                    )
                    us = 1e6 / num_blocks
                    print(
                        f"{algo:12} {num_tokens:>7} {block_size:>4} "
                        f"{'yes' if with_extras else 'no':>6} | {base * us:9.2f} "
                        f"{fast * us:8.2f} {floor * us:7.2f}          | "
                        f"{fast / base:7.3f} {fast / floor:8.2f}"
                    )
    decode()


# --- decoding: one token (or one block) at a time ------------------------------------------


def baseline_decode_block(
    request: Request,
    tokens: Sequence[int],
    block_size: int,
    hash_fn: Callable[[object], bytes],
    none_hash: bytes,
) -> None:
    """BASELINE decoding: append each token to the lists in place, run the block hasher
    after each (vLLM's ``Request.append_output_token_ids``); then undo, to run again."""
    all_token_ids = request.all_token_ids
    block_hashes = request.block_hashes
    for token in tokens:
        all_token_ids.append(token)
        block_hashes.extend(baseline_request_hasher(request, block_size, hash_fn, none_hash))
    del all_token_ids[-len(tokens) :]
    del block_hashes[-(len(tokens) // block_size) :]


def kvpure_decode_block(state: RequestBlockHashes, tokens: Sequence[int]) -> RequestBlockHashes:
    """kvpure decoding: a new value per token."""
    for token in tokens:
        state = state.append_output_token_ids(token)
    return state


def real_vllm_decoder(
    prompt: Request, block_size: int, algo: str
) -> tuple[object, Callable[[Sequence[int]], None]] | None:
    """The REAL vLLM (``vllm.v1.request.Request`` with ``get_request_block_hasher``), if
    vLLM is installed; else None. Returns the request and a function that appends tokens
    one at a time through ``Request.append_output_token_ids`` and then undoes them."""
    try:  # imported by name: vLLM is optional and has no stubs here
        lora = importlib.import_module("vllm.lora.request")
        inputs = importlib.import_module("vllm.multimodal.inputs")
        sampling = importlib.import_module("vllm.sampling_params")
        hashing = importlib.import_module("vllm.utils.hashing")
        kv_cache_utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
        vllm_request = importlib.import_module("vllm.v1.request")
    except ImportError:
        return None
    LoRARequest = lora.LoRARequest
    MultiModalFeatureSpec = inputs.MultiModalFeatureSpec
    PlaceholderRange = inputs.PlaceholderRange
    SamplingParams = sampling.SamplingParams
    get_hash_fn_by_name = hashing.get_hash_fn_by_name
    VllmRequest = vllm_request.Request
    hash_fn = get_hash_fn_by_name(algo)
    kv_cache_utils.init_none_hash(hash_fn)
    request = VllmRequest(
        request_id="bench",
        prompt_token_ids=list(prompt.all_token_ids),
        sampling_params=SamplingParams(max_tokens=1 << 20),
        pooling_params=None,
        mm_features=[
            MultiModalFeatureSpec(
                data=None,
                modality="image",
                identifier=f.identifier,
                mm_position=PlaceholderRange(offset=f.offset, length=f.length),
            )
            for f in prompt.mm_features
        ],
        lora_request=LoRARequest(prompt.lora_name or "", 1, "/lora") if prompt.lora_name else None,
        cache_salt=prompt.cache_salt,
        block_hasher=kv_cache_utils.get_request_block_hasher(block_size, hash_fn),
    )

    def decode(tokens: Sequence[int]) -> None:
        for token in tokens:
            request.append_output_token_ids(token)
        del request._all_token_ids[-len(tokens) :]
        del request._output_token_ids[-len(tokens) :]
        del request.block_hashes[-(len(tokens) // block_size) :]

    return request, decode


def decode() -> None:
    print()
    print("decoding after a 32,768-token prompt, LoRA + salt + images; us per block,")
    print("best of 50 interleaved rounds (one-block calls timed over 200 calls in a row):")
    print("  block : BASELINE hashes one block (its tokens already in the list); kvpure")
    print("          append_output_token_ids(block) / extend_block_hashes / one block hashed")
    print("  1-tok : block_size tokens appended one at a time (BASELINE: list.append + the")
    print("          hasher; kvpure: a new RequestBlockHashes per token); REAL vLLM column")
    print("          only when `import vllm` works (Request.append_output_token_ids)")
    print(
        f"  {'algo':12} {'bs':>3} | {'base':>6} {'append':>6} {'extend':>6} {'1 blk':>6} | "
        f"{'base':>7} {'kvpure':>7} {'vLLM':>7} | {'append':>6} {'extend':>6} {'1 blk':>6} "
        f"{'1-tok':>6} {'kv/vLLM':>7} (kvpure/baseline)"
    )
    for block_size in (16, 256):
        request = make_request(32_768 + block_size, True, seed=7)
        prompt_request = replace(request, all_token_ids=request.all_token_ids[:32_768])
        prompt = kvpure_request(prompt_request)
        new_tokens = request.all_token_ids[32_768:]
        for algo in ALGOS:
            fn = BASELINE_HASH_FNS[algo]
            scheme = kvpure_scheme(algo, block_size)
            done = baseline_request_hasher(request, block_size, fn, scheme.none_hash)
            state = RequestBlockHashes.start(scheme, prompt)
            if list(state.append_output_token_ids(new_tokens).block_hashes) != done:
                raise SystemExit(f"MISMATCH extension {algo}")
            if list(kvpure_decode_block(state, new_tokens).block_hashes) != done:
                raise SystemExit(f"MISMATCH one-token extension {algo}")
            all_tokens = state.all_token_ids.extend(new_tokens)
            extended = extend_block_hashes(scheme, prompt, all_tokens, state.block_hashes)
            if list(extended) != done:
                raise SystemExit(f"MISMATCH extend_block_hashes {algo}")
            request.block_hashes = done[:-1]
            parent = done[-2]
            extra = baseline_extra_keys(request, 32_768, 32_768 + block_size, -1)[0]
            one = fast_hash_token_blocks(algo, parent, new_tokens, block_size, [extra])
            if one != [baseline_hash_block(fn, parent, new_tokens, extra)]:
                raise SystemExit(f"MISMATCH one block {algo}")
            base, append, extend, base_one, fast_one = best_of_each(
                (
                    partial(baseline_request_hasher, request, block_size, fn, scheme.none_hash),
                    partial(state.append_output_token_ids, new_tokens),
                    partial(extend_block_hashes, scheme, prompt, all_tokens, state.block_hashes),
                    partial(baseline_hash_block, fn, parent, new_tokens, extra),
                    partial(fast_hash_token_blocks, algo, parent, new_tokens, block_size, [extra]),
                ),
                50,
                200,
            )
            # one token at a time: the baseline on the prompt's own lists
            base_request = replace(
                prompt_request,
                all_token_ids=list(prompt_request.all_token_ids),
                block_hashes=done[:-1],
            )
            decoders: list[Callable[[], object]] = [
                partial(baseline_decode_block, base_request, new_tokens, block_size, fn, done[-1]),
                partial(kvpure_decode_block, state, new_tokens),
            ]
            real = real_vllm_decoder(prompt_request, block_size, algo)
            if real is not None:
                vllm_request, vllm_decode = real
                if list(getattr(vllm_request, "block_hashes", [])) != done[:-1]:
                    raise SystemExit(f"MISMATCH real vLLM prompt {algo}")
                decoders.append(partial(vllm_decode, new_tokens))
            times = best_of_each(decoders, 50, 5)
            base_tok, kv_tok = times[0], times[1]
            vllm_tok = times[2] if real is not None else float("nan")
            request.block_hashes = []
            us = 1e6
            print(
                f"  {algo:12} {block_size:>3} | {base * us:6.2f} {append * us:6.2f} "
                f"{extend * us:6.2f} {fast_one * us:6.2f} | {base_tok * us:7.2f} "
                f"{kv_tok * us:7.2f} {vllm_tok * us:7.2f} | {append / base:6.2f} "
                f"{extend / base:6.2f} {fast_one / base_one:6.2f} {kv_tok / base_tok:6.2f} "
                f"{kv_tok / vllm_tok:7.2f}"
            )


if __name__ == "__main__":
    if "--decode" in sys.argv:
        decode()
    else:
        main(quick="--quick" in sys.argv)
