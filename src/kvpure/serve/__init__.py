"""``vllm serve`` as an operator types it: a GPU, a usage context and flags.

- :mod:`kvpure.serve.gpus`: the GPU catalogue (``--gpu H100-80GB``) and custom GPUs;
- :mod:`kvpure.serve.rules`: one frozen record of serve-default rules per vLLM release;
- :mod:`kvpure.serve.backends`: the attention backend vLLM picks for a GPU
  and a model, and its default block size;
- :mod:`kvpure.serve.flags`: the serve flags given, as one typed value;
- :mod:`kvpure.serve.defaults`: every setting resolved as the named release resolves it,
  each with where it came from, and the :class:`~kvpure.models.deployment.Deployment`
  that follows;
- :mod:`kvpure.serve.verdict`: starts or not, and the flags that would make it fit.
"""
