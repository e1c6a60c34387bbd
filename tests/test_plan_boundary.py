"""The planner checks its inputs once at the public boundary, then runs an unchecked core.

- ``get_kv_cache_configs`` refuses wrong argument types with a typed error naming
  the argument, in a user's own process (no beartype, no test hook);
- what the core builds with :func:`kvpure.runtime_types.unchecked` skips only the
  type test: the values' own field checks still run, and users' constructions stay
  checked;
- ``kvpure --help`` imports neither the planner, the specs, the prefix cache, the
  hashing nor the memory profile;
- an attention spec's remembered page size follows ``page_size_padded`` when vLLM's
  direct assignment is mirrored (``set_page_size_padded``);
- the facts vLLM only logs are worked out on first use of ``plan.workers``, equal to
  what the goldens hold (``tests/test_golden_planning.py`` renders them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvpure import get_kv_cache_configs
from kvpure.errors import InvalidFieldError, KVPureTypeError
from kvpure.runtime_types import unchecked
from kvpure.settings import PlannerSettings
from kvpure.specs import FullAttentionSpec, KVDtype
from kvpure.specs.attention import set_page_size_padded
from kvpure.specs.kv_cache_config import KVCacheGroupSpec, KVCacheTensor
from kvpure.specs.layer_map import LayerMap


def _spec(**changes: Any) -> FullAttentionSpec:
    fields: dict[str, Any] = {
        "block_size": 16,
        "num_kv_heads": 8,
        "head_size": 128,
        "dtype": KVDtype.BFLOAT16,
        **changes,
    }
    return FullAttentionSpec(**fields)


def _clean(code: str) -> str:
    """Run ``code`` in a fresh interpreter (no conftest, so no beartype); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


ROOT = Path(__file__).resolve().parent.parent
SETTINGS = PlannerSettings(max_model_len=4096)
SPECS = LayerMap.from_pairs([("layer.0", _spec()), ("layer.1", _spec())])


REFUSALS = """
import sys
from kvpure import get_kv_cache_configs
from kvpure.errors import InvalidFieldError, KVPureTypeError
from kvpure.settings import PlannerSettings
from kvpure.specs import FullAttentionSpec, KVDtype
from kvpure.specs.layer_map import LayerMap

spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
settings = PlannerSettings(max_model_len=4096)
specs = LayerMap.from_pairs([("layer.0", spec)])
cases = [
    ({"max_model_len": 4096}, [specs], [2**30]),
    (settings, specs, [2**30]),
    (settings, [{"layer.0": "full"}], [2**30]),
    (settings, [{0: spec}], [2**30]),
    (settings, [LayerMap.from_pairs([("layer.0", 16)])], [2**30]),
    (settings, [specs], 2**30),
    (settings, [specs], [True]),
    (settings, [specs], [1.5]),
    (settings, [specs], ["1GiB"]),
    (settings, [specs], [2**97]),
]
for args in cases:
    try:
        get_kv_cache_configs(*args)
    except InvalidFieldError as err:
        print("InvalidFieldError", err.field)
    except KVPureTypeError as err:
        print("KVPureTypeError", str(err).split(":")[1].split()[0])
    else:
        print("accepted")
print("beartype" in sys.modules)
"""


def test_the_public_planner_refuses_wrong_types_in_a_users_process() -> None:
    """No beartype there (a fresh interpreter): the boundary check alone refuses."""
    assert _clean(REFUSALS).splitlines() == [
        "KVPureTypeError settings",
        "KVPureTypeError specs_per_worker",
        "KVPureTypeError specs_per_worker[0]",
        "KVPureTypeError specs_per_worker[0]",
        "KVPureTypeError specs_per_worker[0]",
        "KVPureTypeError available_memory_per_worker",
        "InvalidFieldError available_memory[0]",
        "InvalidFieldError available_memory[0]",
        "InvalidFieldError available_memory[0]",
        "InvalidFieldError available_memory[0]",
        "False",
    ]


def test_unchecked_skips_the_type_test_but_not_the_field_checks() -> None:
    new_tensor = unchecked(KVCacheTensor)
    made = new_tensor(size=64, shared_by=("layer.0",))
    assert made == KVCacheTensor(size=64, shared_by=("layer.0",))
    assert type(made) is KVCacheTensor
    with pytest.raises(InvalidFieldError, match="size"):
        new_tensor(size=-1, shared_by=("layer.0",))


def test_users_constructions_stay_checked() -> None:
    with pytest.raises(KVPureTypeError, match="layer_names"):
        KVCacheGroupSpec(layer_names=["layer.0"], kv_cache_spec=_spec())  # type: ignore[arg-type]  # on purpose
    with pytest.raises(KVPureTypeError, match="shared_by"):
        KVCacheTensor(size=64, shared_by="layer.0")  # type: ignore[arg-type]  # on purpose


def test_help_imports_no_planning_cache_hashing_or_memory_module() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from kvpure.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('kvpure.planning', 'kvpure.specs', 'kvpure.cache', 'kvpure.hashing',\n"
        "         'kvpure.memory_profile', 'kvpure.models', 'kvpure.serve', 'kvpure.report',\n"
        "         'kvpure.events', 'kvpure.interop', 'pyrsistent', 'beartype')\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.startswith(\n"
        "    tuple(h + '.' for h in heavy))))\n"
    )
    assert _clean(code) == "[]"


def test_a_config_plan_does_not_load_the_case_reader_or_the_prefix_cache() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from kvpure.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['plan', 'examples/llama3_8b.json', '--kv-cache-memory', '24GiB'])\n"
        "print(code)\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.startswith(('kvpure.cache', 'kvpure.hashing', 'kvpure.interop'))))\n"
    )
    assert _clean(code).splitlines() == ["0", "[]"]


def test_a_remembered_page_size_follows_a_direct_padding() -> None:
    spec = _spec()
    unpadded = spec.page_size_bytes
    assert unpadded == 2 * 16 * 8 * 128 * 2
    set_page_size_padded(spec, unpadded * 2)
    assert spec.page_size_bytes == unpadded * 2
    set_page_size_padded(spec, None)
    assert spec.page_size_bytes == unpadded
    assert spec == _spec()  # the remembered size is not compared


def test_the_logged_facts_are_worked_out_on_first_use() -> None:
    plan = get_kv_cache_configs(SETTINGS, [SPECS], [2**30])
    first = plan.workers
    assert plan.workers is first
    assert (
        first[0].max_memory_usage_bytes_from_groups
        == 2 * 4096 // 16 * SPECS["layer.0"].page_size_bytes
    )
