"""vLLM 0.26.0's layout predicates on every worker of the planning goldens and generated cases.

``python grouping_helpers_vllm.py OUT.json`` (vLLM on PYTHONPATH as in README.md; run
from the repository root). For each worker's layer -> spec map of
``tests/data/vllm-0.26.0/*.json`` and ``tests/data/vllm-0.26.0-generated/*.json`` (and
the empty map) it records what vLLM's ``is_kv_cache_spec_uniform`` and
``is_kv_cache_page_size_uniform`` return. tests/test_grouping_predicates.py checks
kvpure's functions of the same names against them.
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from run_vllm import ku, parse_spec  # noqa: E402


def main():
    out = {"empty": [ku.is_kv_cache_spec_uniform({}), ku.is_kv_cache_page_size_uniform({})]}
    paths = sorted(glob.glob("tests/data/vllm-0.26.0/*.json")) + sorted(
        glob.glob("tests/data/vllm-0.26.0-generated/*.json")
    )
    for path in paths:
        case = json.load(open(path))
        if "input" not in case or "kv_cache_specs" not in case.get("input", {}):
            continue
        rows = []
        for worker in case["input"]["kv_cache_specs"]:
            try:
                specs = {name: parse_spec(spec) for name, spec in worker.items()}
                rows.append(
                    [ku.is_kv_cache_spec_uniform(specs), ku.is_kv_cache_page_size_uniform(specs)]
                )
            except Exception as error:  # noqa: BLE001  (vLLM's failure is recorded)
                rows.append({"error": type(error).__name__})
        out[os.path.relpath(path, "tests/data")] = rows
    with open(sys.argv[1], "w") as handle:
        json.dump(out, handle, indent=0)
        handle.write("\n")


if __name__ == "__main__":
    main()
