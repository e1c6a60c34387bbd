"""The planning core's constructors of its result values, without the type check.

``get_kv_cache_configs`` checks its inputs once, at the public boundary
(:func:`kvpure.planning.inputs.check_plan_inputs`); everything the core builds from
them has the declared types by construction, which mypy checks on every call
below. So the core builds tensors, groups and configs with these
:func:`~kvpure.runtime_types.unchecked` constructors: each value's own field
checks (``__post_init__``) still run, only the per-argument type test is skipped.
Users' own constructions (``KVCacheGroupSpec(...)``) stay checked.
"""

from __future__ import annotations

from kvpure.runtime_types import unchecked
from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor
from kvpure.specs.uniform import UniformTypeKVCacheSpecs

new_kv_cache_tensor = unchecked(KVCacheTensor)
new_kv_cache_group = unchecked(KVCacheGroupSpec)
new_kv_cache_config = unchecked(KVCacheConfig)
new_uniform_type_specs = unchecked(UniformTypeKVCacheSpecs)

__all__ = [
    "new_kv_cache_config",
    "new_kv_cache_group",
    "new_kv_cache_tensor",
    "new_uniform_type_specs",
]
