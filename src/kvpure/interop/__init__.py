"""vLLM-shaped JSON in and out.

- ``kvpure.interop.planning``: a planning case (``vllm_config``,
  ``available_memory``, ``kv_cache_specs``) into kvpure values, and a planning
  result back into the goldens' ``output`` / ``final_max_model_len`` /
  ``derived`` shapes.
- ``kvpure.interop.hashing``: a hashing request (the fields of the hash
  goldens' cases) into a frozen request value.

This is the edge of the library: it reads JSON-shaped data (never files; the
CLI reads files) and raises ``InvalidFieldError`` naming the field for
anything malformed.
"""
