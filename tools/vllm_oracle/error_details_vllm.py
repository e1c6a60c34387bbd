"""Where and why the real vLLM 0.26.0 planner fails on the oracle's error cases.

``python error_details_vllm.py OUT.json`` (vLLM on PYTHONPATH as in README.md; run from
the repository root so the oracle files are found) re-runs vLLM's
``get_kv_cache_configs`` on every case of ``tests/data/vllm-0.26.0-oracle/planning_*.json.gz``
whose recorded outcome is an exception other than ValueError/NotImplementedError (vLLM's
assertions and its crashes on inputs it does not check). For each it records the
exception's type and message, the function and source line that raised, and the
integer, string and list-of-int locals of that frame. Asserts with no message say
nothing in their text; the frame's values are what vLLM compared, so
tests/test_golden_planning_oracle.py checks kvpure's message against them.
"""

import gzip
import json
import linecache
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))

from run_vllm import Cfg, ku, parse_spec  # noqa: E402

ORACLE = "tests/data/vllm-0.26.0-oracle"
FILES = ("planning_fuzz.json.gz", "planning_models.json.gz", "planning_edges.json.gz")
PLAIN = ("ValueError", "NotImplementedError")


def _plain(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return value
    if isinstance(value, list | tuple) and all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        return list(value)
    return None


def details(case):
    cfg = Cfg(case["input"]["vllm_config"])
    specs = [{n: parse_spec(s) for n, s in w.items()} for w in case["input"]["kv_cache_specs"]]
    try:
        ku.get_kv_cache_configs(cfg, specs, list(case["input"]["available_memory"]))
    except Exception as error:  # noqa: BLE001  (vLLM's own failure is the datum)
        frame, line = list(traceback.walk_tb(error.__traceback__))[-1]
        code = frame.f_code
        local_values = {}
        for name, value in frame.f_locals.items():
            plain = _plain(value)
            if plain is not None:
                local_values[name] = plain
        return {
            "type": type(error).__name__,
            "message": str(error),
            "function": code.co_name,
            "source_line": linecache.getline(code.co_filename, line).strip(),
            "locals": local_values,
        }
    return {"type": None}


def main():
    out = []
    for name in FILES:
        data = json.loads(gzip.decompress(open(os.path.join(ORACLE, name), "rb").read()))
        for index, case in enumerate(data["cases"]):
            if "error" not in case or case["error"]["type"] in PLAIN:
                continue
            found = details(case)
            assert found["type"] == case["error"]["type"], (name, index, found)
            assert found["message"] == case["error"]["message"], (name, index, found)
            out.append({"file": name, "index": index, "kind": case["kind"], **found})
    with open(sys.argv[1], "w") as handle:
        json.dump({"meta": {"vllm_version": "0.26.0"}, "cases": out}, handle, indent=1)
        handle.write("\n")


if __name__ == "__main__":
    main()
