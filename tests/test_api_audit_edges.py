"""More of the public API refusing bad input with typed errors, in a user's own process.

The same runner as :mod:`tests.test_api_audit` (a fresh interpreter without the
suite's beartype hook, each case in its own ``try``): the plan API's model and
memory arguments, the memory options given beside ``--kv-cache-memory`` (vLLM's
parser refuses them there too), the report's arguments and the bounds on sizes.
"""

from __future__ import annotations

from tests.test_api_audit import _run

SETUP = """
import json, math
import kvpure
from kvpure import Deployment, capacity_report, model_layout, parse_model_config, plan_deployment
from kvpure.specs import FullAttentionSpec, KVDtype, SlidingWindowSpec

CONFIG = json.load(open("examples/llama3_8b.json"))
LAYOUT = model_layout(parse_model_config(CONFIG))
D = Deployment(kv_cache_memory_bytes=2**34)
SPEC = dict(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)

def plan(**flags):
    return plan_deployment(CONFIG, kv_cache_memory="24GiB", **flags)
"""

CASES: tuple[str, ...] = (
    # -- the model argument
    "plan_deployment(None, kv_cache_memory='24GiB')",
    "plan_deployment(3, kv_cache_memory='24GiB')",
    "plan_deployment(b'examples/llama3_8b.json', kv_cache_memory='24GiB')",
    "plan_deployment('no/such/config.json', kv_cache_memory='24GiB')",
    "plan_deployment([CONFIG], kv_cache_memory='24GiB')",
    "kvpure.estimate_kv_cache_memory(None, gpu='H100-80GB')",
    "kvpure.estimate_kv_cache_memory('no/such/folder', gpu='H100-80GB')",
    # -- the memory given
    "plan_deployment(CONFIG, kv_cache_memory=object())",
    "plan_deployment(CONFIG, kv_cache_memory=[[2**34]])",
    "plan_deployment(CONFIG, kv_cache_memory=[True])",
    "plan_deployment(CONFIG, kv_cache_memory=[1.5])",
    # -- memory-estimate options beside --kv-cache-memory
    "plan(gpu_memory_utilization='x')",
    "plan(gpu_memory_utilization=float('nan'))",
    "plan(gpu_memory_utilization=float('inf'))",
    "plan(gpu_memory_utilization=0)",
    "plan(gpu_memory_utilization=1.5)",
    "plan(gpu_memory_utilization=-1)",
    "plan(quantization='md5')",
    "plan(enforce_eager='maybe')",
    "plan(flashinfer_sampler=3)",
    "plan(memory_profile_version='0.5')",
    "plan(memory_profile_version='banana')",
    # -- the report
    "capacity_report(None, D)",
    "capacity_report(CONFIG, D)",
    "capacity_report(LAYOUT, None)",
    "capacity_report(LAYOUT, {'kv_cache_memory_bytes': 2**34})",
    "capacity_report(LAYOUT, D, with_suggestion='yes')",
    "capacity_report(LAYOUT, D, with_suggestion=None)",
    # -- sizes
    "Deployment(kv_cache_memory_bytes=2**200)",
    "Deployment(kv_cache_memory_bytes=2**34, kv_cache_memory_per_gpu=(2**200,))",
    "FullAttentionSpec(**{**SPEC, 'block_size': 2**200})",
    "FullAttentionSpec(**{**SPEC, 'num_kv_heads': 2**41})",
    "FullAttentionSpec(**{**SPEC, 'head_size': 2**64})",
    "SlidingWindowSpec(**SPEC, sliding_window=2**100)",
)

ACCEPTED: tuple[str, ...] = (
    "plan(gpu_memory_utilization=0.9)",
    "plan(gpu_memory_utilization=1)",
    "plan(quantization='fp8')",
    "plan(enforce_eager=True)",
    "plan(memory_profile_version='0.26')",
    "capacity_report(LAYOUT, D, with_suggestion=False)",
    "Deployment(kv_cache_memory_bytes=2**96)",
    "FullAttentionSpec(**{**SPEC, 'block_size': 2**40})",
    "plan_deployment(CONFIG, kv_cache_memory=['12GiB', 2**34], tensor_parallel_size=2)",
)


def test_every_bad_input_is_a_typed_error_in_a_users_process() -> None:
    results = _run(SETUP, CASES)
    failures = {case: outcome for case, outcome in results.items() if outcome != "typed"}
    assert failures == {}, "\n".join(f"{case}  ->  {outcome}" for case, outcome in failures.items())
    assert len(results) == len(CASES)


def test_the_good_inputs_beside_them_are_accepted() -> None:
    results = _run(SETUP, ACCEPTED)
    assert results == dict.fromkeys(ACCEPTED, "accepted")


def test_the_memory_switches_take_bools_as_the_cli_takes_on_and_off() -> None:
    import json
    from pathlib import Path

    from kvpure import plan_deployment

    config = json.loads((Path(__file__).parents[1] / "examples" / "llama3_8b.json").read_text())

    def kv(value: object) -> int:
        plan = plan_deployment(config, gpu="H100-80GB", enforce_eager=value)  # type: ignore[arg-type]  # a text or a bool, as the CLI's on/off
        assert plan.memory is not None
        return plan.memory.workers[0].budget.kv_cache_bytes

    assert kv(True) == kv("on")
    assert kv(False) == kv("off")
    assert kv(True) > kv(False)  # no CUDA graphs charged
