"""Prompt hashing with and without the C accelerator, against vLLM's method (BASELINE).

Run: ``.venv/bin/python bench/bench_hash_accel.py`` (after ``python setup.py build_ext
--inplace`` or an install that built the extension). 32,768 random token ids, block sizes
16, 64 and 256, plain and with LoRA + salt + 2 images; BASELINE, the prompt generator and
the timing are those of ``bench/bench_hashing.py``; every path's digests are checked equal.
Prints kvpure/baseline with the extension (C) and without it (Python).
"""

from __future__ import annotations

from functools import partial

from bench.bench_hashing import (
    ALGOS,
    BASELINE_HASH_FNS,
    baseline_request_hasher,
    best_of_each,
    kvpure_request,
    kvpure_scheme,
    make_request,
)
from kvpure.hashing import accelerator, hash_prompt

TARGETS = {"sha256_cbor": 0.10, "xxhash_cbor": 0.07, "sha256": 0.35, "xxhash": 0.25}


def main() -> None:
    print(f"extension built: {accelerator.available()}, xxhash route: {accelerator.xxhash_route()}")
    print(f"{'algo':12} {'bs':>4} {'extras':>6} | {'C/base':>7} {'py/base':>7} {'target':>6}")
    for with_extras in (False, True):
        request = make_request(32_768, with_extras, seed=32_768)
        hash_request = kvpure_request(request)
        for block_size in (16, 64, 256):
            for algo in ALGOS:
                scheme = kvpure_scheme(algo, block_size)
                fn = BASELINE_HASH_FNS[algo]
                expected = baseline_request_hasher(request, block_size, fn, scheme.none_hash)
                ratios = []
                for enabled in (True, False):
                    accelerator.set_enabled(enabled)
                    if list(hash_prompt(scheme, hash_request)) != expected:
                        raise SystemExit(f"MISMATCH {algo} {block_size} extension={enabled}")
                    base, kv = best_of_each(
                        (
                            partial(
                                baseline_request_hasher, request, block_size, fn, scheme.none_hash
                            ),
                            partial(hash_prompt, scheme, hash_request),
                        ),
                        8,
                    )
                    ratios.append(kv / base)
                target = TARGETS[algo] if block_size == 16 else 0.5
                print(
                    f"{algo:12} {block_size:>4} {'yes' if with_extras else 'no':>6} | "
                    f"{ratios[0]:7.3f} {ratios[1]:7.3f} {target:6.2f}"
                )
    accelerator.set_enabled(True)


if __name__ == "__main__":
    main()
