"""Join the mutation round's traces with vLLM's replay of them (see gen_mutant_cache_traces.py).

``python join_mutant_cases.py TRACES.json VLLM.json OUT.json``; a trace vLLM refused
stops the join (every hand-made trace must replay).
"""

import gzip
import json
import sys

traces = json.load(open(sys.argv[1]))
results = json.load(open(sys.argv[2]))
cases = []
for trace, result in zip(traces, results, strict=True):
    if "error" in result:
        raise SystemExit(f"{trace['name']}: vLLM refused it: {result['error']}")
    cases.append({"trace": trace, "vllm": result})
meta = {"vllm_version": "0.26.0",
        "made_by": "python tools/vllm_oracle/gen_mutant_cache_traces.py, then cache_replay_vllm.py "
                   "(the real vLLM 0.26.0 KVCacheManager), joined by join_mutant_cases.py",
        "num_cases": len(cases)}
text = json.dumps({"meta": meta, "cases": cases}, separators=(",", ":")) + "\n"
with open(sys.argv[3], "wb") as out:  # gzip without a timestamp: the same bytes each time
    out.write(gzip.compress(text.encode(), mtime=0))
