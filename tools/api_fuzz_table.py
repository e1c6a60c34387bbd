"""The entry points :mod:`api_fuzz` calls: a good call per entry and each parameter's kind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# -- bad values per parameter kind -------------------------------------------------

_NUMERIC = ["float('nan')", "float('inf')", "1.5", "'3'", "''", "object()", "2**200", "True"]
BAD: dict[str, list[str]] = {
    # a count (>= 1)
    "count": ["None", "0", "-1", *_NUMERIC],
    # an index or size (>= 0)
    "index": ["None", "-1", *_NUMERIC],
    # a token id list
    "tokens": [
        "None",
        "3",
        "'abc'",
        "b'ab'",
        "object()",
        "[True]",
        "[-1]",
        "[1.5]",
        "[None]",
        "[2**200]",
        "[object()]",
        "[[1]]",
        "{1: 2}",
        "[float('nan')]",
    ],
    "bytes": ["None", "3", "'abc'", "object()", "True", "[b'x']", "1.5"],
    "str": ["None", "3", "b'x'", "object()", "True", "['a']", "1.5"],
    "enum": ["None", "3", "b'x'", "object()", "True", "'nope'", "''"],
    "bool": ["None", "'yes'", "1", "2", "object()", "1.5"],
    "obj": ["None", "3", "'x'", "object()", "[]"],
    "seq": ["None", "3", "'x'", "object()", "[None]", "[3]", "[object()]"],
    "mapping": ["None", "3", "'x'", "object()", "[]", "{3: 4}"],
    "float": ["None", "float('nan')", "float('inf')", "-1.0", "'x'", "True", "object()"],
}
# optional parameters: every bad value except None
for _kind in list(BAD):
    BAD["opt_" + _kind] = [v for v in BAD[_kind] if v != "None"]


@dataclass(frozen=True)
class Entry:
    """A public entry point: a call template (``{name}`` per parameter) and the parameters."""

    name: str
    call: str
    params: dict[str, tuple[str, str]]  # name -> (good source, kind)
    also_good: tuple[str, ...] = ()  # bad-looking values that are valid for some parameter

    def cases(self) -> Iterator[tuple[str, str, str]]:
        """(parameter or '', bad value or '', source) per call; the first is the good call."""
        good = {name: value for name, (value, _kind) in self.params.items()}
        yield "", "", self.fill(good)
        for name, (_value, kind) in self.params.items():
            for bad in BAD[kind]:
                if f"{name}={bad}" in self.also_good:
                    continue
                yield name, bad, self.fill({**good, name: bad})

    def fill(self, values: dict[str, str]) -> str:
        """The call with ``{name}`` replaced by each parameter's source."""
        call = self.call
        for name, value in values.items():
            call = call.replace("{" + name + "}", value)
        return call


SETUP = """
import json, math
import kvpure
from kvpure import *
from kvpure import hashing, cache, events, specs
from kvpure.free_queue import KVCacheBlockCopy
from kvpure.specs.layer_map import LayerMap
from kvpure.block_table import BlockTableLayout, map_to_kernel_blocks, slot_for_position
from kvpure.serve.gpus import find_gpu, custom_gpu
from kvpure.text import ChatMessage, load_tokenizer

SCHEME = HashScheme.from_seed(algorithm='sha256', block_size=4, seed='0', profile=VLLM_0_34)
SCHEME26 = HashScheme.from_seed(algorithm='sha256', block_size=4, seed='0', profile=VLLM_0_26)
REQ = HashRequest(prompt_token_ids=tuple(range(10)))
SPEC = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=KVDtype.BFLOAT16)
SPECS = LayerMap.from_mapping({'a': SPEC})
S = PlannerSettings(vllm_version='0.26')
CONFIG = json.load(open('examples/llama3_8b.json'))
HF = parse_model_config(CONFIG)
LAYOUT = model_layout(HF)
D = Deployment(kv_cache_memory_bytes=2**34)
PLAN = get_kv_cache_configs(S, [{'a': SPEC}], [2**30])
KVC = PLAN.kv_cache_configs[0]
H32 = b'\\x01' * 32
TRACE = json.load(open('tests/data/vllm-0.26.0/cache_replay/eviction_lru.json'))['trace']
ROUTER = events.RouterSettings(algorithm='sha256', block_size=4, seed='0')
STORED = events.BlockStored(block_hashes=(1,), parent_block_hash=None, token_ids=(1, 2),
                            block_size=2, lora_id=None, medium='GPU', lora_name=None)
BATCH = events.KVEventBatch(ts=1.0, events=(STORED,))
PROFILE = events.get_event_profile('vllm-0.33')
PAYLOAD = events.encode_batch(BATCH, profile=PROFILE)

def queue(n=4):
    return FreeKVCacheBlockQueue([KVCacheBlock(i) for i in range(n)])

def block():
    return KVCacheBlock(0)

def state():
    return RequestBlockHashes.start(SCHEME, REQ)

RULES = cache.get_cache_rules('0.26')
from kvpure.interop.hashing import hash_request_from_json
from kvpure.block_table import block_table_width, compute_slot_mapping
"""

_SPEC = {
    "block_size": ("16", "count"),
    "num_kv_heads": ("8", "count"),
    "head_size": ("128", "count"),
    "dtype": ("KVDtype.BFLOAT16", "obj"),
}

ENTRIES: tuple[Entry, ...] = (
    # -- the free block queue and its blocks
    Entry(
        "KVCacheBlock",
        "KVCacheBlock({block_id}, ref_cnt={ref_cnt})",
        {"block_id": ("0", "index"), "ref_cnt": ("0", "index")},
    ),
    Entry(
        "KVCacheBlock.set_block_hash",
        "block().set_block_hash({block_hash}, {num_tokens})",
        {"block_hash": ("H32", "bytes"), "num_tokens": ("None", "opt_index")},
    ),
    Entry(
        "FreeKVCacheBlockQueue", "FreeKVCacheBlockQueue({blocks})", {"blocks": ("[block()]", "seq")}
    ),
    Entry("popleft_n", "queue().popleft_n({n})", {"n": ("2", "index")}),
    Entry("append_n", "q = queue(2); q.append_n({blocks})", {"blocks": ("[]", "seq")}),
    Entry("prepend_n", "q = queue(2); q.prepend_n({blocks})", {"blocks": ("[]", "seq")}),
    Entry(
        "remove",
        "q = queue(2); q.remove({block})",
        {"block": ("q.popleft() and q.fake_free_list_head.next_free_block", "obj")},
    ),
    Entry(
        "iter_blocks_after",
        "list(queue().iter_blocks_after({cursor}))",
        {"cursor": ("None", "opt_obj")},
    ),
    # -- hashing
    Entry(
        "HashRequest",
        "HashRequest(prompt_token_ids={prompt_token_ids}, lora_name={lora_name}, "
        "lora_path={lora_path}, cache_salt={cache_salt}, mm_features={mm_features}, "
        "prompt_embeds={prompt_embeds})",
        {
            "prompt_token_ids": ("(1, 2, 3)", "tokens"),
            "lora_name": ("None", "opt_str"),
            "lora_path": ("''", "str"),
            "cache_salt": ("None", "opt_str"),
            "mm_features": ("()", "seq"),
            "prompt_embeds": ("None", "opt_obj"),
        },
        also_good=("prompt_token_ids=None",),
    ),
    Entry(
        "HashScheme",
        "HashScheme(algorithm={algorithm}, block_size={block_size}, none_hash={none_hash}, "
        "profile={profile}, num_hash_lookahead_tokens={num_hash_lookahead_tokens})",
        {
            "algorithm": ("HashAlgorithm.SHA256", "enum"),
            "block_size": ("16", "count"),
            "none_hash": ("H32", "bytes"),
            "profile": ("VLLM_0_34", "obj"),
            "num_hash_lookahead_tokens": ("0", "index"),
        },
    ),
    Entry(
        "HashScheme.from_seed",
        "HashScheme.from_seed(algorithm={algorithm}, block_size={block_size}, seed={seed}, "
        "profile={profile}, random_none_hash={random_none_hash}, "
        "num_hash_lookahead_tokens={num_hash_lookahead_tokens})",
        {
            "algorithm": ("'sha256'", "enum"),
            "block_size": ("16", "count"),
            "seed": ("'0'", "str"),
            "profile": ("VLLM_0_34", "obj"),
            "random_none_hash": ("False", "bool"),
            "num_hash_lookahead_tokens": ("0", "index"),
        },
        also_good=("seed=None",),
    ),
    Entry(
        "HashAlgorithm.from_name", "HashAlgorithm.from_name({name})", {"name": ("'sha256'", "enum")}
    ),
    Entry("HashAlgorithm", "HashAlgorithm({name})", {"name": ("'sha256'", "enum")}),
    Entry(
        "MultiModalFeature",
        "MultiModalFeature(identifier={identifier}, offset={offset}, length={length})",
        {"identifier": ("'img'", "str"), "offset": ("0", "index"), "length": ("2", "count")},
    ),
    Entry(
        "PromptEmbeds",
        "PromptEmbeds(data={data}, row_size_bytes={row_size_bytes})",
        {"data": ("b'abcd'", "bytes"), "row_size_bytes": ("2", "count")},
    ),
    Entry(
        "RequestBlockHashes.start",
        "RequestBlockHashes.start({scheme}, {request})",
        {"scheme": ("SCHEME", "obj"), "request": ("REQ", "obj")},
    ),
    Entry(
        "append_output_token_ids",
        "state().append_output_token_ids({token_ids})",
        {"token_ids": ("[1, 2, 3]", "tokens")},
        also_good=("token_ids=3",),
    ),
    Entry(
        "append_output_token_ids(one)",
        "state().append_output_token_ids({token_id})",
        {"token_id": ("7", "index")},
        also_good=("token_id='3'", "token_id=''"),  # a str is an iterable of ... refused below
    ),
    Entry("get_block_hash", "get_block_hash({key})", {"key": ("H32 + b'\\x00' * 4", "bytes")}),
    Entry("get_group_id", "get_group_id({key})", {"key": ("H32 + b'\\x00' * 4", "bytes")}),
    Entry(
        "make_block_hash_with_group_id",
        "make_block_hash_with_group_id({block_hash}, {group_id})",
        {"block_hash": ("H32", "bytes"), "group_id": ("0", "index")},
    ),
    Entry(
        "maybe_convert_block_hash",
        "maybe_convert_block_hash({block_hash}, use_int_block_hashes={use_int})",
        {"block_hash": ("H32", "bytes"), "use_int": ("True", "bool")},
    ),
    Entry(
        "hash_block_tokens",
        "hash_block_tokens({fn}, {parent}, {tokens}, {extra_keys})",
        {
            "fn": ("SCHEME", "obj"),
            "parent": ("None", "opt_bytes"),
            "tokens": ("[1, 2, 3, 4]", "tokens"),
            "extra_keys": ("None", "opt_str"),
        },
        also_good=("extra_keys=['a']",),
    ),
    Entry(
        "hash_prompt",
        "hash_prompt({scheme}, {request})",
        {"scheme": ("SCHEME", "obj"), "request": ("REQ", "obj")},
    ),
    Entry(
        "BlockHashListWithBlockSize",
        "BlockHashListWithBlockSize({block_hashes}, {hash_block_size}, {target_block_size})",
        {
            "block_hashes": ("[H32, H32]", "seq"),
            "hash_block_size": ("16", "count"),
            "target_block_size": ("32", "count"),
        },
    ),
    Entry(
        "BlockHashListWithBlockSize[i]",
        "BlockHashListWithBlockSize([H32, H32], 16, 32)[{i}]",
        {"i": ("0", "index")},
        also_good=("i=-1",),  # a negative index counts from the end, as in a list
    ),
    Entry(
        "truncate_block_hashes",
        "hashing.truncate_block_hashes({block_hashes}, {num_tokens}, {hash_block_size})",
        {
            "block_hashes": ("[H32, H32]", "seq"),
            "num_tokens": ("16", "index"),
            "hash_block_size": ("16", "count"),
        },
    ),
    Entry(
        "num_frontend_block_hashes",
        "hashing.num_frontend_block_hashes({n}, hash_block_size={hbs}, num_lookahead_tokens={la})",
        {"n": ("16", "index"), "hbs": ("16", "count"), "la": ("0", "index")},
    ),
    Entry(
        "frontend_block_hashes",
        "hashing.frontend_block_hashes({block_hashes}, {n}, {scheme})",
        {
            "block_hashes": ("[H32]", "opt_seq"),
            "n": ("4", "index"),
            "scheme": ("SCHEME", "opt_obj"),
        },
    ),
    Entry(
        "resolve_block_hashes",
        "hashing.resolve_block_hashes({block_hashes}, {hbs}, {bs})",
        {"block_hashes": ("[H32, H32]", "seq"), "hbs": ("16", "count"), "bs": ("32", "count")},
    ),
    Entry(
        "hash_token_blocks",
        "hashing.hash_token_blocks({algo}, {parent}, {tokens}, {bs}, {extra})",
        {
            "algo": ("'sha256'", "enum"),
            "parent": ("H32", "bytes"),
            "tokens": ("[1, 2, 3, 4]", "tokens"),
            "bs": ("2", "count"),
            "extra": ("[None, None]", "seq"),
        },
        also_good=("extra=[None]", "tokens=[2**200]", "tokens=[-1]"),  # any int is hashed
    ),
    Entry(
        "fast_hash_token_blocks",
        "hashing.fast_hash_token_blocks({algo}, {parent}, {tokens}, {bs}, {extra})",
        {
            "algo": ("'sha256'", "enum"),
            "parent": ("H32", "bytes"),
            "tokens": ("[1, 2, 3, 4]", "tokens"),
            "bs": ("2", "count"),
            "extra": ("[None, None]", "seq"),
        },
        also_good=("extra=[None]", "tokens=[2**200]", "tokens=[-1]"),  # any int is hashed
    ),
    Entry(
        "none_hash_from_seed",
        "hashing.none_hash_from_seed({algorithm}, {seed})",
        {"algorithm": ("'sha256'", "enum"), "seed": ("'0'", "str")},
    ),
    Entry(
        "get_hash_fn_by_name", "hashing.get_hash_fn_by_name({name})", {"name": ("'sha256'", "enum")}
    ),
    Entry(
        "get_hash_profile", "hashing.get_hash_profile({name})", {"name": ("'vllm-0.26'", "enum")}
    ),
    Entry(
        "hash_profile_for_version",
        "hashing.hash_profile_for_version({v})",
        {"v": ("'0.26'", "enum")},
    ),
    Entry(
        "block_extra_keys",
        "hashing.block_extra_keys({scheme}, {request}, {n})",
        {"scheme": ("SCHEME", "obj"), "request": ("REQ", "obj"), "n": ("8", "index")},
    ),
    # -- specs and plan values
    Entry(
        "FullAttentionSpec",
        "FullAttentionSpec(block_size={block_size}, num_kv_heads={num_kv_heads}, "
        "head_size={head_size}, dtype={dtype}, sliding_window={sliding_window})",
        {**_SPEC, "sliding_window": ("None", "opt_count")},
    ),
    Entry(
        "SlidingWindowSpec",
        "SlidingWindowSpec(block_size={block_size}, num_kv_heads={num_kv_heads}, "
        "head_size={head_size}, dtype={dtype}, sliding_window={sliding_window})",
        {**_SPEC, "sliding_window": ("128", "count")},
    ),
    Entry(
        "MambaSpec",
        "MambaSpec(block_size={block_size}, shapes={shapes}, dtypes={dtypes})",
        {
            "block_size": ("16", "count"),
            "shapes": ("((2, 3),)", "seq"),
            "dtypes": ("(KVDtype.BFLOAT16,)", "seq"),
        },
    ),
    Entry(
        "KVCacheTensor",
        "KVCacheTensor(size={size}, shared_by={shared_by})",
        {"size": ("4096", "index"), "shared_by": ("('a',)", "seq")},
    ),
    Entry(
        "KVCacheGroupSpec",
        "KVCacheGroupSpec(layer_names={names}, kv_cache_spec={spec})",
        {"names": ("('a',)", "seq"), "spec": ("SPEC", "obj")},
    ),
    Entry(
        "KVCacheConfig",
        "KVCacheConfig(num_blocks={num_blocks}, kv_cache_tensors={tensors}, "
        "kv_cache_groups={groups})",
        {
            "num_blocks": ("KVC.num_blocks", "index"),
            "tensors": ("KVC.kv_cache_tensors", "seq"),
            "groups": ("KVC.kv_cache_groups", "seq"),
        },
    ),
    Entry("LayerMap.from_mapping", "LayerMap.from_mapping({m})", {"m": ("{'a': SPEC}", "mapping")}),
    Entry(
        "get_kv_quant_mode",
        "specs.get_kv_quant_mode({d})",
        {"d": ("'auto'", "enum")},
        also_good=("d='nope'", "d=''"),  # vLLM: any other string is no quantisation
    ),
    Entry("merge_specs", "specs.merge_specs({s})", {"s": ("[SPEC, SPEC]", "seq")}),
    Entry(
        "cdiv",
        "specs.cdiv({a}, {b})",
        {"a": ("7", "index"), "b": ("2", "count")},
        also_good=("a=-1", "a=2**200", "b=2**200"),  # exact int arithmetic, as vLLM's
    ),
    Entry(
        "round_up",
        "specs.round_up({a}, {b})",
        {"a": ("7", "index"), "b": ("2", "count")},
        also_good=("a=-1", "a=2**200", "b=2**200"),  # exact int arithmetic, as vLLM's
    ),
    # -- planning
    Entry(
        "PlannerSettings",
        "PlannerSettings(block_size={block_size}, enable_prefix_caching={epc}, "
        "max_model_len={mml}, prefix_caching_hash_algo={algo}, mamba_cache_mode={mcm}, "
        "vllm_version={v}, num_gpu_blocks_override={ngbo}, tensor_parallel_size={tp})",
        {
            "block_size": ("16", "count"),
            "epc": ("True", "bool"),
            "mml": ("4096", "count"),
            "algo": ("'sha256'", "enum"),
            "mcm": ("'none'", "enum"),
            "v": ("'0.26'", "enum"),
            "ngbo": ("None", "opt_count"),
            "tp": ("1", "count"),
        },
    ),
    Entry(
        "get_kv_cache_configs",
        "get_kv_cache_configs({settings}, {specs}, {mem})",
        {"settings": ("S", "obj"), "specs": ("[{'a': SPEC}]", "seq"), "mem": ("[2**30]", "seq")},
    ),
    Entry(
        "get_kv_cache_configs(mem)",
        "get_kv_cache_configs(S, [{'a': SPEC}], [{mem}])",
        {"mem": ("2**30", "index")},
    ),
    Entry(
        "get_kv_cache_groups",
        "get_kv_cache_groups({settings}, {specs})",
        {"settings": ("S", "obj"), "specs": ("SPECS", "mapping")},
    ),
    Entry(
        "estimate_max_model_len",
        "estimate_max_model_len({settings}, {specs}, {mem})",
        {"settings": ("S", "obj"), "specs": ("SPECS", "mapping"), "mem": ("2**30", "index")},
    ),
    Entry(
        "get_max_concurrency_for_kv_cache_config",
        "get_max_concurrency_for_kv_cache_config({settings}, {config})",
        {"settings": ("S", "obj"), "config": ("KVC", "obj")},
    ),
    # -- models and reports
    Entry("parse_model_config", "parse_model_config({data})", {"data": ("CONFIG", "mapping")}),
    Entry(
        "model_layout",
        "model_layout({config}, architecture_as={arch})",
        {"config": ("HF", "obj"), "arch": ("None", "opt_enum")},
    ),
    Entry(
        "Deployment",
        "Deployment(kv_cache_memory_bytes={mem}, block_size={bs}, max_model_len={mml}, "
        "kv_cache_dtype={kvd}, tensor_parallel_size={tp}, auto_fit_max_model_len={af})",
        {
            "mem": ("2**34", "index"),
            "bs": ("None", "opt_count"),
            "mml": ("None", "opt_count"),
            "kvd": ("'auto'", "enum"),
            "tp": ("1", "count"),
            "af": ("False", "bool"),
        },
    ),
    Entry(
        "capacity_report",
        "capacity_report({layout}, {deployment}, with_suggestion={ws})",
        {"layout": ("LAYOUT", "obj"), "deployment": ("D", "obj"), "ws": ("True", "bool")},
    ),
    Entry(
        "plan_deployment",
        "plan_deployment({model}, gpu={gpu}, vllm={vllm}, kv_cache_memory={mem}, "
        "max_model_len={mml}, tensor_parallel_size={tp})",
        {
            "model": ("CONFIG", "obj"),
            "gpu": ("None", "opt_enum"),
            "vllm": ("None", "opt_enum"),
            "mem": ("'24GiB'", "obj"),
            "mml": ("4096", "count"),
            "tp": ("1", "count"),
        },
        also_good=("mml=None", "tp=None", "mem=3", "mml='3'", "tp='3'", "mml=-1"),  # -1: auto-fit
    ),
    Entry(
        "plan_deployment(mem)",
        "plan_deployment(CONFIG, kv_cache_memory={mem})",
        {"mem": ("2**34", "index")},
    ),
    Entry(
        "estimate_kv_cache_memory",
        "estimate_kv_cache_memory({model}, gpu={gpu}, vllm={vllm})",
        {"model": ("CONFIG", "obj"), "gpu": ("'H100-80GB'", "enum"), "vllm": ("None", "opt_enum")},
    ),
    Entry("find_gpu", "find_gpu({name})", {"name": ("'H100-80GB'", "enum")}),
    # -- cache replay
    Entry("cache.parse_trace", "cache.parse_trace({data})", {"data": ("TRACE", "mapping")}),
    Entry(
        "cache.replay",
        "cache.replay({trace}, free_queue_limit={limit})",
        {"trace": ("cache.parse_trace(TRACE)", "obj"), "limit": ("4096", "index")},
    ),
    Entry(
        "cache.replay_trace",
        "cache.replay_trace({data}, vllm_version={v})",
        {"data": ("TRACE", "mapping"), "v": ("None", "opt_enum")},
    ),
    Entry("cache.get_cache_rules", "cache.get_cache_rules({v})", {"v": ("'0.26'", "enum")}),
    Entry(
        "cache.ReplaySettings",
        "cache.ReplaySettings(log_stats={ls}, watermark={wm}, pythonhashseed={seed})",
        {"ls": ("True", "bool"), "wm": ("0.0", "float"), "seed": ("'0'", "str")},
    ),
    Entry(
        "cache.BlockPool",
        "cache.BlockPool(num_gpu_blocks={n}, enable_caching={ec}, hash_block_size={hbs})",
        {"n": ("16", "count"), "ec": ("True", "bool"), "hbs": ("16", "count")},
    ),
    # -- events
    Entry(
        "events.decode_batch",
        "events.decode_batch({payload}, profile={profile}, strict={strict})",
        {
            "payload": ("PAYLOAD", "bytes"),
            "profile": ("None", "opt_obj"),
            "strict": ("False", "bool"),
        },
    ),
    Entry(
        "events.encode_batch",
        "events.encode_batch({batch}, profile={profile})",
        {"batch": ("BATCH", "obj"), "profile": ("PROFILE", "obj")},
    ),
    Entry(
        "events.get_event_profile", "events.get_event_profile({n})", {"n": ("'vllm-0.33'", "enum")}
    ),
    Entry(
        "events.encode_replay_request", "events.encode_replay_request({s})", {"s": ("0", "index")}
    ),
    Entry("events.split_capture", "events.split_capture({d})", {"d": ("b''", "bytes")}),
    Entry(
        "events.RouterSettings",
        "events.RouterSettings(algorithm={algo}, block_size={bs}, seed={seed})",
        {"algo": ("'sha256'", "enum"), "bs": ("4", "count"), "seed": ("'0'", "str")},
        also_good=("seed=None",),
    ),
    Entry(
        "events.KVEventBatch",
        "events.KVEventBatch(ts={ts}, events={ev}, data_parallel_rank={dp})",
        {"ts": ("1.0", "float"), "ev": ("(STORED,)", "seq"), "dp": ("None", "opt_index")},
    ),
    Entry(
        "events.BlockStored",
        "events.BlockStored(block_hashes={bh}, parent_block_hash=None, token_ids={t}, "
        "block_size={bs}, lora_id=None, medium='GPU', lora_name=None)",
        {"bh": ("(1,)", "seq"), "t": ("(1, 2)", "tokens"), "bs": ("2", "count")},
    ),
    Entry("events.LiveBlocks.apply", "events.LiveBlocks().apply({e})", {"e": ("STORED", "obj")}),
    Entry(
        "events.audit_batches",
        "events.audit_batches({batches}, {router})",
        {"batches": ("[BATCH]", "seq"), "router": ("ROUTER", "obj")},
    ),
    # -- block tables
    Entry(
        "BlockTableLayout",
        "BlockTableLayout(block_size={bs}, dcp_world_size={dcp})",
        {"bs": ("16", "count"), "dcp": ("1", "count")},
    ),
    # -- text
    Entry(
        "ChatMessage",
        "ChatMessage(role={role}, texts={texts}, name={name})",
        {"role": ("'user'", "str"), "texts": ("('hi',)", "seq"), "name": ("None", "opt_str")},
    ),
    Entry(
        "load_tokenizer",
        "load_tokenizer({path})",
        {"path": ("'examples/tiny-chat-tokenizer'", "str")},
    ),
    # -- round 2: more constructors and flags
    Entry(
        "PlannerSettings(2)",
        "PlannerSettings(cache_dtype={cd}, pipeline_parallel_size={pp}, "
        "disable_hybrid_kv_cache_manager={dh}, max_num_batched_tokens={mnbt}, "
        "async_scheduling={asy}, original_max_model_len={omml}, num_speculative_tokens={nst}, "
        "speculative_method={sm}, decode_context_parallel_size={dcp}, "
        "num_prefill_lookahead_tokens={npl})",
        {
            "cd": ("'auto'", "enum"),
            "pp": ("1", "count"),
            "dh": ("False", "bool"),
            "mnbt": ("8192", "count"),
            "asy": ("False", "bool"),
            "omml": ("None", "opt_count"),
            "nst": ("None", "opt_count"),
            "sm": ("None", "opt_enum"),
            "dcp": ("1", "count"),
            "npl": ("0", "index"),
        },
    ),
    Entry(
        "Deployment(2)",
        "Deployment(kv_cache_memory_bytes=2**34, dtype={dt}, mamba_ssm_cache_dtype={md}, "
        "pipeline_parallel_size={pp}, num_gpu_blocks_override={ngbo}, "
        "enable_prefix_caching={epc}, enable_hybrid_kv_cache_manager={eh}, "
        "max_num_batched_tokens={mnbt}, mamba_cache_mode={mcm}, kv_cache_memory_per_gpu={per}, "
        "async_scheduling={asy}, vllm_version={v}, num_speculative_tokens={nst})",
        {
            "dt": ("'auto'", "enum"),
            "md": ("'auto'", "enum"),
            "pp": ("1", "count"),
            "ngbo": ("None", "opt_count"),
            "epc": ("None", "opt_bool"),
            "eh": ("True", "bool"),
            "mnbt": ("8192", "count"),
            "mcm": ("None", "opt_enum"),
            "per": ("()", "seq"),
            "asy": ("None", "opt_bool"),
            "v": ("'0.34'", "enum"),
            "nst": ("None", "opt_count"),
        },
    ),
    Entry(
        "ChunkedLocalAttentionSpec",
        "ChunkedLocalAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, "
        "dtype=KVDtype.BFLOAT16, attention_chunk_size={c}, page_size_padded={pad}, "
        "is_draft={draft})",
        {"c": ("8192", "count"), "pad": ("None", "opt_count"), "draft": ("False", "bool")},
    ),
    Entry(
        "MLAAttentionSpec",
        "MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=KVDtype.BFLOAT16, "
        "cache_dtype_str={cds}, compress_ratio={cr})",
        {"cds": ("None", "opt_enum"), "cr": ("1", "count")},
    ),
    Entry(
        "UniformTypeKVCacheSpecs",
        "UniformTypeKVCacheSpecs(block_size=16, kv_cache_specs={m})",
        {"m": ("SPECS", "obj")},
    ),
    Entry(
        "KVCacheBlockCopy",
        "KVCacheBlockCopy(src_block_id={s}, dst_block_id={d})",
        {"s": ("0", "index"), "d": ("1", "index")},
    ),
    Entry(
        "CacheRequest",
        "cache.CacheRequest(request_id={rid}, hash_request={hr}, scheme={sc}, "
        "lora_int_id={lid}, kv_cache_report_mode={mode}, skip_reading_prefix_cache={skip})",
        {
            "rid": ("'r'", "str"),
            "hr": ("REQ", "obj"),
            "sc": ("SCHEME", "opt_obj"),
            "lid": ("None", "opt_index"),
            "mode": ("'incremental'", "enum"),
            "skip": ("False", "bool"),
        },
    ),
    Entry(
        "KVCacheManager",
        "cache.KVCacheManager(kv_cache_config={kvc}, max_model_len={mml}, "
        "scheduler_block_size={sbs}, hash_block_size={hbs}, enable_caching={ec}, "
        "watermark={wm}, rules={rules}, num_hash_lookahead_tokens={la})",
        {
            "kvc": ("KVC", "obj"),
            "mml": ("4096", "count"),
            "sbs": ("16", "count"),
            "hbs": ("16", "count"),
            "ec": ("True", "bool"),
            "wm": ("0.0", "float"),
            "rules": ("RULES", "obj"),
            "la": ("0", "index"),
        },
    ),
    Entry(
        "HashScheme.from_prefix_hash_config",
        "HashScheme.from_prefix_hash_config({c})",
        {
            "c": (
                "{'hash_block_size': 16, 'hash_algo': 'sha256', 'none_hash': H32, "
                "'num_lookahead_tokens': 0}",
                "mapping",
            )
        },
    ),
    Entry(
        "hash_request_from_json",
        "hash_request_from_json({d}, share_equal_strings={s})",
        {"d": ("{'prompt_token_ids': [1, 2, 3]}", "mapping"), "s": ("False", "bool")},
    ),
    Entry(
        "events.AuditOptions",
        "events.AuditOptions(seed={seed}, candidate_seeds={cs}, candidate_block_sizes={cbs}, "
        "diagnose={dg})",
        {
            "seed": ("None", "opt_str"),
            "cs": ("('0',)", "seq"),
            "cbs": ("()", "seq"),
            "dg": ("True", "bool"),
        },
    ),
    Entry(
        "events.decode_message",
        "events.decode_message({frames})",
        {"frames": ("[b'kv', (0).to_bytes(8, 'big'), PAYLOAD]", "seq")},
    ),
    Entry(
        "events.EventMessage",
        "events.EventMessage(topic={t}, seq={s}, batch={b})",
        {"t": ("'kv'", "str"), "s": ("0", "index"), "b": ("BATCH", "obj")},
    ),
    Entry(
        "plan_deployment(flags)",
        "plan_deployment(CONFIG, gpu='H100-80GB', gpu_memory_utilization={gmu}, "
        "enforce_eager={ee}, max_num_seqs={mns}, quantization={q})",
        {
            "gmu": ("0.9", "float"),
            "ee": ("False", "bool"),
            "mns": ("256", "count"),
            "q": ("None", "opt_enum"),
        },
        also_good=("mns='3'", "gmu=None", "ee=None", "mns=None"),  # CLI text / default
    ),
    Entry(
        "block_table_width",
        "block_table_width({n}, {layout})",
        {"n": ("4", "count"), "layout": ("BlockTableLayout(block_size=16)", "obj")},
    ),
    Entry(
        "compute_slot_mapping",
        "compute_slot_mapping({rows}, {req}, {pos}, BlockTableLayout(block_size=16))",
        {"rows": ("[[0]]", "seq"), "req": ("[0]", "seq"), "pos": ("[0]", "seq")},
        also_good=("pos=[3]",),  # position 3 of block 0
    ),
)
