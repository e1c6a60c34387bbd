"""Join gen_partial_tail_traces.py's traces with a vLLM oracle's replay of them.

``python join_partial_tail_cases.py VERSION TRACES.json VLLM.json OUT.json.gz`` (VERSION
0.26.0: ``cache_replay_vllm.py``; 0.34.0: ``cache_replay_vllm034.py``). A trace vLLM
refused is kept with its error (kvpure must refuse it too).
"""

import gzip
import json
import sys

version, traces, results = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
cases = []
for trace, result in zip(traces, results, strict=True):
    if "error" in result:
        result = {"error": {k: result["error"][k] for k in ("type", "message")}}
    cases.append({"trace": trace, "vllm": result})
script = "cache_replay_vllm.py" if version == "0.26.0" else "cache_replay_vllm034.py"
meta = {"vllm_version": version,
        "made_by": f"python tools/vllm_oracle/gen_partial_tail_traces.py, then {script} "
                   f"(the real vLLM {version} KVCacheManager), joined by join_partial_tail_cases.py",
        "num_cases": len(cases)}
text = json.dumps({"meta": meta, "cases": cases}, separators=(",", ":")) + "\n"
with open(sys.argv[4], "wb") as out:  # gzip without a timestamp: the same bytes each time
    out.write(gzip.compress(text.encode(), mtime=0))
