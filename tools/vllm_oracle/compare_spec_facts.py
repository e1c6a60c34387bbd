"""Compare kvpure's per-spec numbers with spec_facts_vllm.py's output."""

import json
import sys

from kvpure.errors import KVPureError
from kvpure.interop.planning import parse_kv_cache_spec, render_kv_cache_spec
from kvpure.settings import PlannerSettings
from kvpure.specs import get_kv_cache_spec_kind, get_kv_cache_spec_sliding_window

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from settings_grid import SETTINGS  # noqa: E402


def settings_for(s):
    return PlannerSettings(max_model_len=s["mml"], max_num_batched_tokens=s["mnbt"],
                           decode_context_parallel_size=s["dcp"], mamba_cache_mode=s["mode"],
                           async_scheduling=s["async"], pipeline_parallel_size=s["pp"],
                           max_num_encoder_input_tokens=1500)


bad = 0
rows = json.load(open(sys.argv[1]))
for row in rows:
    try:
        spec = parse_kv_cache_spec(row["spec"])
    except KVPureError as err:
        if "construct_error" not in row:
            bad += 1
            print("kvpure rejected", row["spec"], err)
        continue
    if "construct_error" in row:
        bad += 1
        print("vLLM rejected", row["spec"])
        continue
    problems = []
    if render_kv_cache_spec(spec) != row["rendered"]:
        problems.append(("rendered", render_kv_cache_spec(spec)["_derived"], row["rendered"]["_derived"]))
    if get_kv_cache_spec_kind(spec).value != row["kind"]:
        problems.append(("kind",))
    if get_kv_cache_spec_sliding_window(spec) != row["sliding_window"]:
        problems.append(("window",))
    for s, want in zip(SETTINGS, row["per_settings"]):
        st = settings_for(s)
        for name, fn in (("max_memory_usage_bytes", lambda: spec.max_memory_usage_bytes(st)),
                         ("max_num_blocks_per_req", lambda: spec.max_num_blocks_per_req(st, s["mml"]))):
            try:
                got = fn()
            except KVPureError as err:
                got = {"error": "AssertionError" if isinstance(err, ValueError) else type(err).__name__}
            if got != want[name]:
                problems.append((name, s, got, want[name]))
    if problems:
        bad += 1
        print(row["spec"]["type"], problems[:3])
print(f"{len(rows) - bad}/{len(rows)} specs agree")
