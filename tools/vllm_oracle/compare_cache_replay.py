"""Compare kvpure's cache replay with cache_replay_vllm.py's output.

``python compare_cache_replay.py TRACES.json VLLM_OUT.json`` prints the first
differences per trace (records field by field, usage to 1e-12 relative).
"""

import json
import math
import sys

from kvpure.cache import replay_trace
from kvpure.errors import KVPureError


def diff(a, b, path, out):
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)):
            out.append(f"{path}: {a!r} != {b!r}")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in b:
            if k not in a:
                out.append(f"{path}.{k} missing")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
        return
    if a != b:
        out.append(f"{path}: {json.dumps(a)[:300]} != {json.dumps(b)[:300]}")


def compare(trace, want):
    try:
        got = replay_trace(trace)
    except KVPureError as err:
        if "error" in want:
            return []
        return [f"kvpure raised {err!r}; vLLM replayed"]
    if "error" in want:
        return [f"vLLM failed ({want['error']['type']}: {want['error']['message'][:200]}) but kvpure replayed"]
    out = []
    diff(got["records"], want["records"], "records", out)
    diff(got["final_state"], want["final_state"], "final_state", out)
    return out


if __name__ == "__main__":
    traces = json.load(open(sys.argv[1]))
    wants = json.load(open(sys.argv[2]))
    bad = 0
    for i, (t, w) in enumerate(zip(traces, wants)):
        problems = compare(t, w)
        if problems:
            bad += 1
            print(f"trace {i} ({t.get('name')}): {len(problems)} differences")
            for p in problems[:5]:
                print("   ", p)
    print(f"{len(traces) - bad}/{len(traces)} agree")
