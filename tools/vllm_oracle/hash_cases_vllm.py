"""Block hashes of hand-made requests from the real vLLM request hasher (0.26.0 or 0.33.0).

``python hash_cases_vllm.py CASES.json OUT.json`` (or ``--direct CASES.json OUT.json``,
see :func:`direct_calls`) with vLLM's unpacked wheel and its
import deps on PYTHONPATH (see README.md). CASES is a list of requests in the
shape of the goldens' ``hashes.json`` cases (``name``, ``block_size``,
``prompt_token_ids``, ``lora_name``, ``lora_path``, ``cache_salt``,
``mm_features``, ``prompt_embeds`` as the goldens' recipe or null,
``appended_output_tokens``). For each case and algorithm it builds vLLM's own
``Request`` with ``get_request_block_hasher``, appends each step of output tokens
with ``Request.append_output_token_ids`` (so hashing resumes where vLLM resumes),
and records the block hashes, the token count, the hashes after the prompt and
the extra keys vLLM's ``generate_block_hash_extra_keys`` gives each full block
scanned from token 0. PYTHONHASHSEED is "0", as in the goldens.

These cases were written to kill mutants that the goldens' cases let live
(docs/mutation.md); tests/test_hash_mutants.py reads the output.
"""

import hashlib
import json
import os
import sys

os.environ["PYTHONHASHSEED"] = "0"

import torch  # noqa: E402

ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
RECIPE = "torch.arange(40*8, dtype=float32).reshape(40, 8) / 7.0"


def _jsonable(value):
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [_jsonable(item) for item in value]
    return value


def run_case(case):
    from vllm.lora.request import LoRARequest
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as ku
    from vllm.v1.request import Request

    embeds = None
    if case["prompt_embeds"] is not None:
        assert case["prompt_embeds"]["recipe"] == RECIPE
        embeds = torch.arange(40 * 8, dtype=torch.float32).reshape(40, 8) / 7.0

    def build(hasher):
        lora = None
        if case["lora_name"] is not None:
            lora = LoRARequest(case["lora_name"], 1, case["lora_path"] or "")
        mm = [
            MultiModalFeatureSpec(
                data=None,
                modality="image",
                identifier=f["identifier"],
                mm_position=PlaceholderRange(offset=f["offset"], length=f["length"]),
            )
            for f in case["mm_features"]
        ] or None
        tokens = case["prompt_token_ids"]
        return Request(
            case["name"],
            None if tokens is None else list(tokens),
            SamplingParams(max_tokens=1000),
            None,
            prompt_embeds=embeds,
            mm_features=mm,
            lora_request=lora,
            cache_salt=case["cache_salt"],
            block_hasher=hasher,
        )

    out = dict(case)
    out["hashes"] = {}
    for algo in ALGORITHMS:
        hash_fn = get_hash_fn_by_name(algo)
        ku.init_none_hash(hash_fn)
        request = build(ku.get_request_block_hasher(case["block_size"], hash_fn))
        after_prompt = len(request.block_hashes)
        for step in case["appended_output_tokens"]:
            request.append_output_token_ids(list(step))
        out["hashes"][algo] = {
            "block_hashes": [bytes(h).hex() for h in request.block_hashes],
            "num_tokens": request.num_tokens,
            "num_hashes_after_prompt": after_prompt,
        }
    request = build(None)
    for step in case["appended_output_tokens"]:
        request.append_output_token_ids(list(step))
    keys, mm_idx, start = [], 0, 0
    while start + case["block_size"] <= request.num_tokens:
        block_keys, mm_idx = ku.generate_block_hash_extra_keys(
            request, start, start + case["block_size"], mm_idx
        )
        keys.append(_jsonable(block_keys))
        start += case["block_size"]
    out["extra_keys_per_block_from_token_0"] = keys
    return out


def main():
    cases = json.load(open(sys.argv[1]))
    results = [run_case(case) for case in cases]
    from vllm.v1.core import kv_cache_utils as ku

    with open(ku.__file__, "rb") as source:
        source_sha = hashlib.sha256(source.read()).hexdigest()
    meta = {"kv_cache_utils_sha256": source_sha, "torch": torch.__version__}
    with open(sys.argv[2], "w") as handle:
        json.dump({"meta": meta, "pythonhashseed": "0", "cases": results}, handle, indent=1)
        handle.write("\n")




def direct_calls(case):
    """vLLM's ``generate_block_hash_extra_keys`` for every window and start index.

    Windows ``[start, start + block_size)`` start at every token up to the
    end of the tokens; the start index is each of -1 .. len(mm_features) (what a
    caller may pass, stale or not). The result is vLLM's (keys, next index).
    """
    from vllm.v1.core import kv_cache_utils as ku

    request = _direct_request(case)
    calls = []
    size = case["block_size"]
    for start in range(0, len(case["prompt_token_ids"]) + 1):
        for start_mm_idx in range(-1, len(case["mm_features"]) + 1):
            keys, next_idx = ku.generate_block_hash_extra_keys(
                request, start, start + size, start_mm_idx
            )
            calls.append([start, start + size, start_mm_idx, _jsonable(keys), next_idx])
    return {**case, "calls": calls, "resume_index": [_resume_index(request, s, size) for s in
                                                   range(0, len(case["prompt_token_ids"]) + 1)]}


def _resume_index(request, start, size):
    """The multimodal index vLLM's request block hasher starts from at ``start``.

    The branch at the top of ``get_request_block_hasher``'s inner function, run
    with vLLM's own helpers: 0.26 passes -1 (the last item) past token 0; 0.33
    asks ``vllm.multimodal.utils.get_mm_features_in_window`` when the last item
    ends after ``start``.
    """
    from vllm.v1.core import kv_cache_utils as ku

    if not hasattr(ku, "get_mm_features_in_window"):  # 0.26's hasher does not use it
        return -1 if start > 0 else 0
    features = request.mm_features
    if start > 0 and features:
        last = features[-1].mm_position
        if last.offset + last.length > start:
            return ku.get_mm_features_in_window(features, start, start + size)[0]
    return 0


def _direct_request(case):
    from vllm.lora.request import LoRARequest
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    embeds = None
    if case["prompt_embeds"] is not None:
        embeds = torch.arange(40 * 8, dtype=torch.float32).reshape(40, 8) / 7.0
    lora = None
    if case["lora_name"] is not None:
        lora = LoRARequest(case["lora_name"], 1, case["lora_path"] or "")
    mm = [
        MultiModalFeatureSpec(
            data=None,
            modality="image",
            identifier=f["identifier"],
            mm_position=PlaceholderRange(offset=f["offset"], length=f["length"]),
        )
        for f in case["mm_features"]
    ] or None
    request = Request(
        case["name"],
        list(case["prompt_token_ids"]),
        SamplingParams(max_tokens=1000),
        None,
        prompt_embeds=embeds,
        mm_features=mm,
        lora_request=lora,
        cache_salt=case["cache_salt"],
    )
    return request


def resume_calls(case):
    """The extra keys vLLM's request block hasher gives when it resumes at each block.

    The hasher is vLLM's own (``get_request_block_hasher``) with a hash function that
    records the extra keys it is given; ``request.block_hashes`` is set to as many
    placeholders as blocks before the resume point, which is where vLLM resumes.
    Output: ``[start, [keys of each block from start to the last full block]]``.
    """
    from vllm.v1.core import kv_cache_utils as ku

    request = _direct_request(case)
    seen = []

    def recording_hash(payload):
        if isinstance(payload, tuple):  # (parent, tokens, extra_keys); not the seed
            seen.append(payload[2])
        return hashlib.sha256(repr(len(seen)).encode()).digest()

    ku.init_none_hash(recording_hash)
    hasher = ku.get_request_block_hasher(case["block_size"], recording_hash)
    size = case["block_size"]
    calls = []
    for done in range(0, len(case["prompt_token_ids"]) // size + 1):
        request.block_hashes = [b"placeholder"] * done
        seen.clear()
        hasher(request)
        calls.append([done * size, [_jsonable(keys) for keys in seen]])
    return {**case, "resumes": calls}


def main_direct():
    """``python hash_cases_vllm.py --direct CASES.json OUT.json``."""
    cases = json.load(open(sys.argv[2]))
    from vllm.v1.core import kv_cache_utils as ku

    with open(ku.__file__, "rb") as source:
        source_sha = hashlib.sha256(source.read()).hexdigest()
    results = [{**direct_calls(case), **resume_calls(case)} for case in cases]
    with open(sys.argv[3], "w") as handle:
        json.dump({"meta": {"kv_cache_utils_sha256": source_sha}, "cases": results}, handle)
        handle.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "--direct":
        main_direct()
    else:
        main()
