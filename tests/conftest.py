"""Test-wide setup: beartype on both packages, hypothesis profiles, data paths.

``beartype_packages`` must run before anything imports kvpure, so it stays at
the very top of this file.
"""

from __future__ import annotations

from beartype.claw import beartype_packages

beartype_packages(("kvpure", "kvpure_gpu"))

import os  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

if os.environ.get("KVPURE_TEST_NO_EXTENSION") == "1":  # `make unit` runs the C-backed paths twice
    from kvpure.cache.pool_loops import set_accelerated as set_pool_accelerated
    from kvpure.events.accel import set_accelerated as set_events_accelerated
    from kvpure.free_queue import set_accelerated as set_queue_accelerated
    from kvpure.hashing.accelerator import set_enabled

    set_enabled(False)
    set_events_accelerated(False)
    set_queue_accelerated(False)
    set_pool_accelerated(False)

DATA_DIR = Path(__file__).parent / "data"
GOLDEN_026 = DATA_DIR / "vllm-0.26.0"
GOLDEN_033 = DATA_DIR / "vllm-0.33.0"
