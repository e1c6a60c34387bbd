"""Direct-call cases for the per-group managers (issue 24, round 4: mutcache).

``python gen_manager_direct_cases.py OUT.json`` writes the cases;
``manager_direct_vllm.py OUT.json VLLM.json`` runs them through vLLM 0.26.0's own
managers and copies each case beside vLLM's answers (the file
``tests/data/vllm-0.26.0-oracle/manager_direct.json`` that
``tests/test_cache_manager_direct.py`` reads). Each case's ``why`` names the code it
exercises: calls a coordinator never makes (a lookup aligned to two blocks, the
admission cap's default, R-SWA gaps of two prompt lengths) and pool states no trace
reaches (a parent block evicted before its child).
"""

import json
import sys

from gen_cache_traces import attn
from gen_mutant_cache_traces import plan, trace


def case(name, why, plan_input, direct, overrides=None):
    return {"name": name, "why": why, "trace": trace(name, why, plan_input, [], overrides),
            "direct": direct}


def req(rid, n, base=0):
    return {"op": "request", "rid": rid, "tokens": [base + 1 + i for i in range(n)]}


def op(kind, **fields):
    return {"op": kind, **fields}


def main():
    sw = lambda bs, w: attn("SlidingWindowSpec", bs, window=w)  # noqa: E731
    full = attn("FullAttentionSpec", 4)
    out = []
    out.append(case(
        "sw_admission_cap_default",
        "get_num_blocks_to_allocate caps a sliding-window request only when asked "
        "(apply_admission_cap defaults to False)",
        plan({"l0": sw(4, 8)}, 4, 64, mml=64),
        [req("a", 60),
         op("count", g=0, rid="a", n=60, computed=[], total=0, local=0),
         op("count", g=0, rid="a", n=60, computed=[], total=0, local=0, cap=True),
         op("count", g=0, rid="a", n=60, computed=[], total=0, local=0, cap=False)],
        # the cap binds below the model length only when fewer tokens are in flight (a
        # field of the replay config no plan input sets: chunked prefill is not modelled)
        overrides={"max_in_flight_tokens": 8},
    ))
    out.append(case(
        "sw_skipped_hit_blocks_of_a_holder",
        "a request that holds blocks (not admitted) counts only the hit blocks past "
        "the skipped ones it does not hold (num_skipped_blocks - num_req_blocks)",
        plan({"l0": sw(4, 5)}, 4, 40, mml=64),
        [req("a", 40),
         op("new", g=0, rid="a", n=8),
         op("count", g=0, rid="a", n=40, computed=list(range(10, 20)), total=24, local=24),
         op("count", g=0, rid="a", n=40, computed=list(range(10, 20)), total=36, local=36),
         op("count", g=0, rid="a", n=40, computed=list(range(10, 20)), total=4, local=4)],
    ))
    out.append(case(
        "remove_skipped_of_an_unknown_request",
        "nothing to skip: no block table is made for a request never seen; a sliding "
        "window with tokens to skip makes an empty one (vLLM's defaultdict)",
        plan({"f0": full, "s0": sw(4, 5), "f1": full, "s1": sw(4, 5)}, 4, 40, mml=64),
        [op("skip", g=0, rid="ghost", processed=10),
         op("skip", g=1, rid="ghost2", processed=3),
         op("skip", g=1, rid="ghost3", processed=12),
         op("skip", g=0, rid="ghost4", processed=0)],
    ))
    out.append(case(
        "no_prefix_caching_add_computed_blocks",
        "caching off: a new request with no hit blocks is given none (no error); one "
        "with hit blocks is refused (vLLM's assertion)",
        plan({"l0": full}, 4, 40, mml=64, caching=False),
        [req("a", 9),
         op("add", g=0, rid="a", computed=[], local=0),
         op("new", g=0, rid="a", n=9),
         op("add", g=0, rid="b", computed=[5], local=4)],
    ))
    rswa = {**attn("FullAttentionSpec", 4), "type": "RSWASpec", "rswa_window": 8}
    out.append(case(
        "rswa_gaps_of_two_prompt_lengths",
        "R-SWA frees the gap between the prompt and the decode window back to front and "
        "stops at a null; a window past the table is clamped to it",
        plan({"l0": rswa}, 4, 64, mml=128),
        [req("a", 48),
         op("new", g=0, rid="a", n=48),
         op("skip", g=0, rid="a", processed=40, prompt=16),
         op("skip", g=0, rid="a", processed=40, prompt=4),
         op("skip", g=0, rid="a", processed=40),
         op("skip", g=0, rid="a", processed=200, prompt=16),
         op("skip", g=0, rid="a", processed=200, prompt=2),
         op("free", g=0, rid="a")],
    ))
    out.append(case(
        "sw_hit_aligned_to_two_blocks",
        "a sliding-window lookup aligned to two blocks: a run must end on a boundary, so "
        "a cached block just below one whose follower is missing starts no run",
        plan({"l0": sw(4, 4)}, 4, 40, mml=64),
        [req("a", 13), req("b", 20),
         op("new", g=0, rid="a", n=13),
         op("cache", g=0, rid="a", n=12),
         op("hit", g=0, rid="b", max=16, groups=[0], eagle=False, align=8),
         op("hit", g=0, rid="b", max=16, groups=[0], eagle=False, align=4),
         op("hit", g=0, rid="b", max=12, groups=[0], eagle=False, align=8),
         op("hit", g=0, rid="b", max=16, groups=[0], eagle=True, align=8)],
    ))
    for window in (9, 13, 17):
        out.append(case(
            f"sw_hit_eagle_realigned_w{window}",
            "no run long enough (EAGLE needs one more block): the run from the start is "
            "realigned, the EAGLE block dropped and realigned again",
            plan({"l0": sw(4, window)}, 4, 40, mml=64),
            [req("a", 17), req("b", 24),
             op("new", g=0, rid="a", n=17),
             op("cache", g=0, rid="a", n=12),
             op("hit", g=0, rid="b", max=20, groups=[0], eagle=True, align=8),
             op("hit", g=0, rid="b", max=20, groups=[0], eagle=False, align=8),
             op("cache", g=0, rid="a", n=16),
             op("hit", g=0, rid="b", max=20, groups=[0], eagle=True, align=8),
             op("hit", g=0, rid="b", max=20, groups=[0], eagle=True, align=16)],
        ))
    layers = {"f0": full, "f1": full, "f2": full, "f3": full, "s0": sw(4, 5), "s1": sw(4, 5)}
    out.append(case(
        "full_two_groups_parent_evicted",
        "two full-attention groups of one batch: a parent block evicted before its "
        "child (freed head first) ends the common hit at the parent",
        plan(layers, 4, 40),
        [req("a", 17),
         op("new", g=0, rid="a", n=16), op("cache", g=0, rid="a", n=16),
         op("new", g=1, rid="a", n=16), op("cache", g=1, rid="a", n=16),
         op("hit", g=0, rid="a", max=16, groups=[0, 1], eagle=False, align=4),
         op("free_forward", g=0, rid="a"), op("free_forward", g=1, rid="a"),
         op("take_until", keep=7),
         op("hit", g=0, rid="a", max=16, groups=[0, 1], eagle=False, align=4),
         op("hit", g=0, rid="a", max=16, groups=[0], eagle=False, align=4),
         op("hit", g=1, rid="a", max=16, groups=[1], eagle=False, align=4)],
    ))
    out.append(case(
        "chunked_local_parent_evicted",
        "chunked local attention: inside the current chunk the hit is a run from the "
        "chunk's start, ended by the first evicted block",
        plan({"l0": attn("ChunkedLocalAttentionSpec", 4, chunk=16)}, 4, 40, mml=64),
        [req("a", 29),
         op("new", g=0, rid="a", n=28), op("cache", g=0, rid="a", n=28),
         op("hit", g=0, rid="a", max=28, groups=[0], eagle=False, align=4),
         op("free_forward", g=0, rid="a"),
         op("take_until", keep=2),
         op("hit", g=0, rid="a", max=28, groups=[0], eagle=False, align=4),
         op("hit", g=0, rid="a", max=15, groups=[0], eagle=False, align=4),
         op("hit", g=0, rid="a", max=0, groups=[0], eagle=False, align=4)],
    ))
    out.append(case(
        "chunked_local_one_token_chunks",
        "one-token chunks and blocks: a one-token lookup starts past the first chunk",
        plan({"l0": attn("ChunkedLocalAttentionSpec", 1, chunk=1)}, 1, 40),
        [req("a", 3),
         op("hit", g=0, rid="a", max=1, groups=[0], eagle=False, align=1),
         op("hit", g=0, rid="a", max=2, groups=[0], eagle=False, align=1),
         op("hit", g=0, rid="a", max=0, groups=[0], eagle=False, align=1)],
    ))
    out.append(case(
        "no_prefix_caching_hybrid_lookup",
        "caching off: the coordinator finds no hit, in a hybrid too",
        plan({"f0": full, "s0": sw(4, 5)}, 4, 40, caching=False),
        [req("a", 9), op("chit", rid="a", max=8), op("chit", rid="a", max=0)],
    ))
    eagle = {"method": "eagle", "num_speculative_tokens": 1}
    three = {"f0": full, "a0": sw(4, 5), "b0": sw(4, 9)}
    out.append(case(
        "eagle_three_batches_second_pass",
        "full + two sliding windows with EAGLE: the second window shortens the hit, so "
        "the search runs again at the shorter length, and a window whose EAGLE drop was "
        "verified does not drop again (its block past the new length was evicted)",
        plan(three, 4, 40, mml=40, spec=eagle),
        [req("a", 33),
         op("new", g=0, rid="a", n=32), op("cache", g=0, rid="a", n=32),
         op("new", g=1, rid="a", n=32), op("cache", g=1, rid="a", n=32),
         op("new", g=2, rid="a", n=32), op("cache", g=2, rid="a", n=20),
         op("chit", rid="a", max=32),
         op("skip", g=1, rid="a", processed=24),
         op("take_until", keep=4),
         op("chit", rid="a", max=32),
         op("chit", rid="a", max=20),
         op("chit", rid="a", max=16)],
    ))
    holes = {"f0": full, "a0": sw(4, 5), "b0": sw(4, 3)}
    out.append(case(
        "eagle_three_batches_reverified",
        "full + two sliding windows with EAGLE: in the second pass the first window "
        "shortens the hit without a drop, so the second window, verified at the longer "
        "length, drops its EAGLE block again at the shorter one (its block there evicted)",
        plan(holes, 4, 40, mml=40, spec=eagle),
        [req("a", 33),
         op("new", g=0, rid="a", n=32), op("cache", g=0, rid="a", n=32),
         op("new", g=1, rid="a", n=32), op("cache", g=1, rid="a", n=32),
         op("new", g=2, rid="a", n=32), op("cache", g=2, rid="a", n=28),
         op("chit", rid="a", max=32),
         # the first window frees its blocks 0-5, the second its 0-4 (back to front)
         op("skip", g=1, rid="a", processed=28),
         op("skip", g=2, rid="a", processed=22),
         # the first window's blocks 0-3 are held again, so the evictions take its
         # blocks 5 and 4 and the second window's 4
         op("add", g=1, rid="d", computed=[9, 10, 11, 12], local=0),
         op("take_until", keep=4),
         op("chit", rid="a", max=32),
         op("chit", rid="a", max=24),
         op("chit", rid="a", max=20)],
    ))
    marked = case(
        "eagle_group_second_of_its_batch",
        "only the second of two full-attention groups is an EAGLE group (as DeepSeek V4's "
        "MTP layer group is marked): its whole spec batch drops the EAGLE block",
        plan(layers, 4, 40, spec=eagle),
        [req("a", 17),
         op("new", g=0, rid="a", n=16), op("cache", g=0, rid="a", n=16),
         op("new", g=1, rid="a", n=16), op("cache", g=1, rid="a", n=16),
         op("new", g=2, rid="a", n=16), op("cache", g=2, rid="a", n=16),
         op("chit", rid="a", max=16)],
    )
    marked["eagle_groups"] = [1]
    out.append(marked)
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
