"""vLLM's start-up memory profile, computed offline: exact where files allow, estimated elsewhere.

- :mod:`~kvpure.memory_profile.safetensors_header` reads tensor shapes and
  dtypes from safetensors headers (no weight data is read);
- :mod:`~kvpure.memory_profile.sharding` splits those tensors per worker as
  vLLM's parallel layers shard them (tensor, pipeline and expert parallel);
- :mod:`~kvpure.memory_profile.checkpoint_tensors` lists the tensors a
  config.json implies, for models whose weight files are not at hand;
- :mod:`~kvpure.memory_profile.encoders` counts vision towers and projectors
  from config.json;
- :mod:`~kvpure.memory_profile.releases` holds one rules record per range of
  vLLM V1 releases (0.10 to 0.34; V0 refused);
- :mod:`~kvpure.memory_profile.estimate` holds the fitted terms (activation
  peak, non-torch memory, CUDA graphs) with their stated error;
- :mod:`~kvpure.memory_profile.extensible` sizes 0.34's extensible KV cache;
- :mod:`~kvpure.memory_profile.budget` puts it together into a
  :class:`~kvpure.memory_profile.budget.MemoryBudget` per worker.

Nothing here imports torch; the modules are imported on demand.
"""
