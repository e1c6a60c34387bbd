"""Compare kvpure with the real vLLM results produced by run_vllm.py.

``python compare.py INPUTS.json VLLM_OUT.json`` prints every disagreement.
"""

import json
import sys

from kvpure.errors import KVPureError
from kvpure.interop.planning import parse_planning_input, plan_case

# vLLM's assertions and crashes (a bug in vLLM, e.g. AttributeError) are typed ValueErrors in kvpure.
STDLIB = {"AssertionError": "ValueError", "AttributeError": "ValueError", "ZeroDivisionError": "ValueError"}
CHECK_MESSAGE = {"ValueError", "NotImplementedError", "RuntimeError"}


def compare(inp, want):
    if "construct_error" in want:
        try:
            parse_planning_input(inp)
        except KVPureError as err:
            return None if isinstance(err, ValueError) else f"construct: kvpure raised {err!r}"
        return f"construct: vLLM failed ({want['construct_error']}) but kvpure parsed"
    try:
        got = plan_case(inp)
    except KVPureError as err:  # malformed input the parser rejects (vLLM crashes later)
        got = {"error": {"type": type(err).__name__, "vllm_type": "ValueError", "message": str(err)}}
    except Exception as err:  # noqa: BLE001
        return f"kvpure crashed: {err!r}; vLLM: {json.dumps(want)[:300]}"
    if "error" in want:
        if "error" not in got:
            return f"vLLM failed {want['error']} but kvpure planned"
        wt = STDLIB.get(want["error"]["type"], want["error"]["type"])
        if got["error"]["vllm_type"] != wt:
            return f"error type {got['error']} vs {want['error']}"
        if want["error"]["type"] in CHECK_MESSAGE and got["error"]["message"] != want["error"]["message"]:
            return f"error message\n  kvpure: {got['error']['message']}\n  vllm:   {want['error']['message']}"
        return None
    if "error" in got:
        return f"kvpure failed {got['error']} but vLLM planned"
    for key in ("output", "final_max_model_len", "derived"):
        if got[key] != want[key]:
            return f"{key} differs:\n  kvpure: {json.dumps(got[key])[:600]}\n  vllm:   {json.dumps(want[key])[:600]}"
    return None


if __name__ == "__main__":
    inputs = json.load(open(sys.argv[1]))
    wants = json.load(open(sys.argv[2]))
    bad = 0
    for i, (inp, want) in enumerate(zip(inputs, wants)):
        msg = compare(inp, want)
        if msg:
            bad += 1
            print(f"case {i}: {msg}")
    print(f"{len(inputs) - bad}/{len(inputs)} agree")
