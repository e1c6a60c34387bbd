"""Traces where a full-attention block is larger than the hash block (partial tails).

``python gen_partial_tail_traces.py SEED COUNT OUT.json [--preempt]``: hybrids whose
full-attention group has 16-token blocks beside a group of 4-token blocks (a sliding
window, a second full-attention group, or a Mamba group), so requests are hashed every
4 tokens and ``FullAttentionManager._cache_partial_tail_block`` registers the prompt's
last hash boundary on the block holding it. Prompts of every length around the 4- and
16-token boundaries share prefixes (hits on promoted blocks), decodes run into the
partly filled blocks, pools are small (evictions drop partial and promoted keys), EAGLE
with lookahead hashes and with ``disable_lookahead_block_hashes`` (the manager's
``use_eagle``), events always on. ``--preempt`` adds the oracle-only op ``preempt``
(only ``cache_replay_vllm.py``, 0.26, knows it); ``--mm`` gives prompts image
placeholders (the partial tail event's multimodal extra keys).
"""

import json
import random
import sys

from gen_cache_traces import attn, mamba
from gen_mutant_cache_traces import REPLAY, plan


def layers_of(kind, rng):
    full = attn("FullAttentionSpec", 16, head=8)
    if kind == "sw":
        return {"f": full, "s": attn("SlidingWindowSpec", 4, head=32, window=rng.choice([3, 5, 9]))}, "none"
    if kind == "full":
        return {"f": full, "g": attn("FullAttentionSpec", 4, head=32)}, "none"
    return {"f": full, "m": mamba(4, "none", page=16 * 8 * 4 * 2)}, "none"


def mm_features(rng, length):
    """One or two image placeholders inside the prompt (sorted, apart)."""
    out, at = [], rng.randint(0, max(length - 2, 0))
    for k in range(rng.randint(1, 2)):
        size = rng.randint(1, 5)
        if at + size > length:
            break
        out.append({"identifier": f"img-{rng.choice('abc')}{k}", "offset": at, "length": size})
        at += size + rng.randint(0, 3)
    return out


def ops(rng, mml, preempt, mm=False):
    prefixes = [[rng.randint(0, 50) for _ in range(mml)] for _ in range(2)]
    out, live, lengths, n = [], [], {}, 0
    for _ in range(rng.randint(8, 20)):
        r = rng.random()
        if r < 0.4 or not live:
            length = rng.choice([rng.randint(1, mml - 8), rng.choice([5, 8, 17, 20, 21, 23, 24, 25, 33, 36])])
            cut = rng.randint(length // 2, length)
            prompt = rng.choice(prefixes)[:cut] + [rng.randint(51, 99) for _ in range(length - cut)]
            arrive = {"op": "arrive", "request_id": f"r{n}", "prompt_token_ids": prompt}
            if mm and rng.random() < 0.6 and length >= 2:
                arrive["mm_features"] = mm_features(rng, length)
            out.append(arrive)
            live.append(f"r{n}")
            lengths[f"r{n}"] = length
            n += 1
        elif r < 0.7:
            who = rng.choice(live)
            k = min(rng.randint(1, 9), mml - 2 - lengths[who])
            if k > 0:
                lengths[who] += k
                out.append({"op": "decode", "request_id": who,
                            "token_ids": [rng.randint(0, 99) for _ in range(k)]})
        elif r < 0.78:
            out.append({"op": "retry", "request_id": rng.choice(live)})
        elif r < 0.86 and preempt:
            out.append({"op": "preempt", "request_id": rng.choice(live)})
        elif r < 0.98:
            who = rng.choice(live)
            live.remove(who)
            out.append({"op": "finish", "request_id": who})
        else:
            out.append({"op": "reset_prefix_cache"})
    return out


def trace(rng, i, preempt, mm=False):
    kind = rng.choice(["sw", "sw", "full", "mamba"])
    layers, mode = layers_of(kind, rng)
    draft = rng.choice([None, None, "eagle", "eagle_nolookahead"])
    spec = None
    if draft:
        spec = {"method": "eagle", "num_speculative_tokens": 1}
        if draft == "eagle_nolookahead":
            spec["disable_lookahead_block_hashes"] = True
    mml = 48
    per_request = sum(-(-mml // s["block_size"]) for s in layers.values())
    num_blocks = rng.randint(per_request + 1, per_request + 12)  # small: evictions
    name = f"partial_{kind}_{draft or 'plain'}{'_preempt' if preempt else ''}{'_mm' if mm else ''}_{i}"
    return {"format": "kvpure-cache-replay/1", "name": name,
            "description": "a partial tail block (full attention 16 over 4-token hashes)",
            "plan_input": plan(layers, 4, num_blocks, mml=mml, spec=spec, mode=mode,
                               algo=rng.choice(["sha256", "xxhash"])),
            "replay": {**REPLAY, "use_int_block_hashes": rng.random() < 0.7,
                       "watermark": rng.choice([0.0, 0.0, 0.1]),
                       "reserve_full_isl": rng.random() < 0.5},
            "ops": ops(rng, mml, preempt, mm)}


def mm_tail_cases():
    """Image placeholders inside the partial tail's hash block (tokens 16..20 of a
    22-token prompt): two in the window, or one in it and the last one after it (0.26
    scans the event's keys from the last item on)."""
    prompt = list(range(1, 23))
    out = []
    for layout, features in (
        ("two_in_window", [{"identifier": "img-a", "offset": 16, "length": 2},
                           {"identifier": "img-b", "offset": 18, "length": 1}]),
        ("last_after_window", [{"identifier": "img-a", "offset": 15, "length": 3},
                               {"identifier": "img-b", "offset": 21, "length": 1}]),
    ):
        for kind in ("sw", "full"):
            layers, mode = layers_of(kind, random.Random(0))
            ops = [{"op": "arrive", "request_id": "a", "prompt_token_ids": prompt, "mm_features": features},
                   {"op": "decode", "request_id": "a", "token_ids": list(range(60, 72))},
                   {"op": "finish", "request_id": "a"},
                   {"op": "arrive", "request_id": "b", "prompt_token_ids": prompt, "mm_features": features},
                   {"op": "decode", "request_id": "b", "token_ids": list(range(80, 92))}]
            out.append({"format": "kvpure-cache-replay/1", "name": f"partial_{kind}_mm_{layout}",
                        "description": "multimodal keys of a partial tail's event",
                        "plan_input": plan(layers, 4, 40, mml=48, mode=mode), "replay": dict(REPLAY),
                        "ops": ops})
    return out


if __name__ == "__main__":
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    made = [trace(rng, i, "--preempt" in sys.argv, "--mm" in sys.argv) for i in range(count)]
    if "--mm" in sys.argv:
        made += mm_tail_cases()
    json.dump(made, open(sys.argv[3], "w"), indent=1)
