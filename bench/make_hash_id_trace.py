"""Generate a synthetic hash-id trace shaped like Mooncake's conversation trace.

The public Mooncake FAST'25 conversation trace (``conversation_trace.jsonl``)
is not shipped with kvpure and is not fetched: this script writes a trace of
the same format and published statistics, from a seed, with no network.

Format (Mooncake, NVIDIA aiperf, InferenceX): one request a line,
``{"timestamp": MS, "input_length": N, "output_length": M, "hash_ids": [...]}``,
``hash_ids`` one id per 512-token block (the last one partial), chained: an id
stands for its block and every block before it.

Shape (the published figures of the conversation trace): 12,031 requests,
about 12,000 input tokens on average (144.8 M in all), about 340 output
tokens, timestamps over an hour, and an infinite-cache hit rate near 37% of
the prompt tokens. Conversations start from one of a few shared system
prompts and each later turn resends the whole conversation so far (the
previous prompt, the previous answer as new blocks, a new message).

Run: ``python bench/make_hash_id_trace.py OUT.jsonl [--requests N] [--seed S]
[--scale F]`` (``--scale 1.4`` gives a ~200 M-token trace, the size of the
tool&agent trace).
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

BLOCK = 512


def _lognormal_tokens(rng: random.Random, mean: float, sigma: float) -> int:
    mu = math.log(mean) - sigma * sigma / 2
    return max(1, int(rng.lognormvariate(mu, sigma)))


def generate(path: Path, requests: int, seed: int, scale: float, max_input: int) -> dict[str, int]:
    """Write the trace; return its totals (requests, tokens, infinite-cache hit tokens)."""
    rng = random.Random(seed)
    next_id = 0

    def new_ids(count: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + count))
        next_id += count
        return ids

    systems = [new_ids(rng.randrange(2, 9)) for _ in range(24)]
    sessions: list[tuple[list[int], int]] = []  # (full-block ids of the context, its tokens)
    seen: set[int] = set()
    total_tokens = hit_tokens = 0
    timestamp = 0.0
    with path.open("w", encoding="utf-8") as out:
        for _ in range(requests):
            timestamp += rng.expovariate(1 / 300.0)
            if sessions and rng.random() < 0.22:
                index = rng.randrange(len(sessions))
                context, context_tokens = sessions[index]
                answer = _lognormal_tokens(rng, 340 * scale, 0.8)
                message = _lognormal_tokens(rng, 2500 * scale, 1.2)
                length = context_tokens + answer + message
            else:
                index = -1
                context = list(rng.choice(systems))
                length = len(context) * BLOCK + _lognormal_tokens(rng, 8700 * scale, 1.1)
            length = min(length, max_input)
            full = length // BLOCK
            ids = context[:full] + new_ids(max(full - len(context), 0))
            if length % BLOCK:
                ids.append(new_ids(1)[0])
            hit = 0
            for block in ids[:full]:
                if block not in seen:
                    break
                hit += BLOCK
            hit = min(hit, length - 1)
            hit -= hit % BLOCK
            seen.update(ids[:full])
            total_tokens += length
            hit_tokens += hit
            output = _lognormal_tokens(rng, 343, 0.9)
            line = {
                "timestamp": int(timestamp),
                "input_length": length,
                "output_length": output,
                "hash_ids": ids,
            }
            out.write(json.dumps(line, separators=(", ", ": ")) + "\n")
            state = (ids[:full], full * BLOCK)
            if index >= 0:
                sessions[index] = state
            else:
                sessions.append(state)
            if len(sessions) > 400:
                sessions.pop(rng.randrange(len(sessions)))
    return {"requests": requests, "tokens": total_tokens, "infinite_cache_hits": hit_tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--requests", type=int, default=12_031)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the lengths")
    parser.add_argument("--max-input", type=int, default=126_000, help="longest prompt")
    args = parser.parse_args()
    totals = generate(args.out, args.requests, args.seed, args.scale, args.max_input)
    rate = totals["infinite_cache_hits"] / totals["tokens"]
    print(
        f"{totals['requests']:,} requests, {totals['tokens']:,} prompt tokens, "
        f"infinite-cache hits {totals['infinite_cache_hits']:,} ({rate:.2%})"
    )


if __name__ == "__main__":
    main()
