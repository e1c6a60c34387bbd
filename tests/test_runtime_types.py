"""Wrong argument types are typed errors in users' own processes (no test hook).

Each case runs in a fresh interpreter without the suite's beartype claw, so the
test sees exactly what a user's process does.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = {
    "spec block size as str": "kvpure.FullAttentionSpec(block_size='16', num_kv_heads=8, "
    "head_size=128, dtype=kvpure.KVDtype.BFLOAT16)",
    "spec dtype as str": "kvpure.FullAttentionSpec(block_size=16, num_kv_heads=8, "
    "head_size=128, dtype='bfloat16')",
    "prefix caching as str": "kvpure.PlannerSettings(enable_prefix_caching='no')",
    "token ids as str": "kvpure.HashRequest(prompt_token_ids='abc')",
    "memory as str": "kvpure.Deployment(kv_cache_memory_bytes='24GiB')",
    "block id as str": "kvpure.KVCacheBlock('3')",
    "block id as float": "kvpure.KVCacheBlock(1.5)",
    "queue append of an int": "kvpure.FreeKVCacheBlockQueue([]).append(3)",
    "queue remove of an int": "kvpure.FreeKVCacheBlockQueue([]).remove(3)",
}


@pytest.mark.parametrize("expression", CASES.values(), ids=list(CASES))
def test_a_wrong_type_is_a_kvpure_type_error(expression: str) -> None:
    code = (
        "import kvpure\n"
        "from kvpure.errors import KVPureError\n"
        "try:\n"
        f"    {expression}\n"
        "except KVPureError as err:\n"
        "    print(isinstance(err, TypeError), type(err).__name__)\n"
        "else:\n"
        "    print('accepted')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "True", done.stdout
