"""The wider attack set, data: safetensors headers and shard indexes, workload files,
absurd sizes (items 4, 5 and 7)."""

from __future__ import annotations

import json

from attack_builders import _IDS, LLAMA, MEM, Attack
from attack_builders_more import header, index, lines, request_with, tensor, trace_with

GPU = ("plan", "{d}/m", "--gpu", "H100-80GB")
CACHE = ("cache", *LLAMA, "{d}/w.jsonl")


def _headers() -> list[Attack]:
    t = tensor
    many = 10**6
    cases: dict[str, tuple[object, ...]] = {
        "length 2**63": (b"{}", 0, 2**63),
        "length 2**64-1": (b"{}", 0, 2**64 - 1),
        "length 0": (b"", 0, 0),
        "length past the file": (b"{}", 0, 10**6),
        "nested 10**5 deep": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000,),
        "a list nested 10**5 deep in __metadata__": (
            b'{"__metadata__": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ),
        "10**6 tensors": (
            lambda: (
                b"{"
                + b",".join(
                    b'"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (i, i, i + 1)
                    for i in range(many)
                )
                + b"}"
            ),
            many,
        ),
        "10**6 keys of no tensor": (
            lambda: b"{" + b",".join(b'"k%d":0' % i for i in range(many)) + b"}",
        ),
        "one dim of 10**12": ({"a": t(shape=(10**12,), offsets=(0, 2 * 10**12))}, 2),
        "dims whose product overflows": ({"a": t(shape=(2**47, 2**47, 2**47))}, 2),
        "dims of 10**30": ({"a": t(shape=(10**30,))}, 2),
        "a dim of 10**5 digits": (
            lambda: (
                b'{"a":{"dtype":"BF16","shape":[' + b"9" * 100_000 + b'],"data_offsets":[0,2]}}'
            ),
            2,
        ),
        "negative offsets": ({"a": t(offsets=(-2, 0))}, 2),
        "offsets reversed": ({"a": t(offsets=(2, 0))}, 2),
        "offsets past the file": ({"a": t(offsets=(10**15, 10**15 + 2))}, 2),
        "offsets of 2**70": ({"a": t(offsets=(2**70, 2**70 + 2))}, 2),
        "offsets as floats": ({"a": t(offsets=(0.0, 2.0))}, 2),
        "offsets NaN": (b'{"a":{"dtype":"BF16","shape":[1],"data_offsets":[NaN,2]}}', 2),
        "offsets of three numbers": ({"a": t(offsets=(0, 1, 2))}, 2),
        "one tensor inside another": (
            {"a": t(shape=(4,), offsets=(0, 8)), "b": t(shape=(1,), offsets=(2, 4))},
            8,
        ),
        "two tensors on the same bytes": ({"a": t(), "b": t()}, 2),
        "dtype unknown": ({"a": t(dtype="F4")}, 2),
        "dtype lower case": ({"a": t(dtype="bf16")}, 2),
        "dtype a number": ({"a": t(dtype=16)}, 2),
        "shape a string": ({"a": t(shape="1")}, 2),
        "shape null": ({"a": t(shape=None)}, 2),
        "shape of bools": ({"a": t(shape=[True])}, 2),
        "entry a list": ({"a": [1, 2]}, 2),
        "__metadata__ a string (valid)": ({"__metadata__": "x", "a": t()}, 2),
        "header with a BOM": (b"\xef\xbb\xbf" + json.dumps({"a": t()}).encode(), 2),
        "header not UTF-8": (b'{"\xff": 1}',),
        "header null": (b"null",),
        "header empty object": (b"{}",),
        "header with a lone surrogate name": (b'{"\\ud800":' + json.dumps(t()).encode() + b"}", 2),
        "a NUL in a tensor name": (b'{"a\\u0000b":' + json.dumps(t()).encode() + b"}", 2),
    }
    heavy = {"10**6 tensors", "10**6 keys of no tensor"}
    clean = {
        "__metadata__ a string (valid)",
        "header with a lone surrogate name",
        "a NUL in a tensor name",
        "header with a BOM",
    }
    return [
        Attack(
            f"safetensors header: {what}",
            4,
            GPU,
            make=header(*args),  # type: ignore[arg-type]
            heavy=what in heavy,
            expect="clean" if what in clean else "refused",
        )
        for what, args in cases.items()
    ]


def _indexes() -> list[Attack]:
    good = {"s.safetensors": {"a": tensor()}}
    cases = {
        "shard '../x'": ({"a": "../x"},),
        "shard './s.safetensors'": ({"a": "./s.safetensors"},),
        "shard 's.safetensors/.'": ({"a": "s.safetensors/."},),
        "shard '..'": ({"a": ".."},),
        "shard '.'": ({"a": "."},),
        "shard empty": ({"a": ""},),
        "shard '%2e%2e/x'": ({"a": "%2e%2e/x"},),
        "shard with a backslash": ({"a": "..\\..\\x"},),
        "shard missing": ({"a": "nope.safetensors"},),
        "the same shard 1000 times": (lambda: {f"t{i}": "s.safetensors" for i in range(1000)},),
        "5000 shards": (lambda: {f"t{i}": f"s{i}.safetensors" for i in range(5000)},),
        "weight_map of 10**6 names": (lambda: {f"t{i}": "s.safetensors" for i in range(10**6)},),
        "weight_map empty": ({},),
        "weight_map values numbers": ({"a": 1},),
        "total_size negative": ({"a": "s.safetensors"}, -1),
        "total_size a string": ({"a": "s.safetensors"}, "2"),
        "total_size 1e400": ({"a": "s.safetensors"}, 1e400),
        "total_size 2**200": ({"a": "s.safetensors"}, 2**200),
    }
    a = [
        Attack(
            f"shards index: {what}",
            4,
            GPU,
            make=index(*args, shards=good),  # type: ignore[arg-type]
            expect="clean"
            if what
            in ("the same shard 1000 times", "total_size 2**200", "weight_map of 10**6 names")
            else "refused",
        )
        for what, args in cases.items()
    ]
    a.append(
        Attack(
            "shards index: nested 10**5 deep",
            4,
            GPU,
            make=lambda d: (
                (
                    index({"a": "s.safetensors"}, shards=good)(d),
                    (d / "m" / "model.safetensors.index.json").write_text(
                        "[" * 100_000 + "]" * 100_000
                    ),
                )
                and None
            ),
        )
    )
    return a


def _workloads() -> list[Attack]:
    req = '{"prompt_token_ids": [1, 2, 3]}\n'
    a = [
        Attack(
            "workload: a 100 MB line", 4, CACHE, make=lines(lambda: "1," * (50 << 20)), heavy=True
        ),
        Attack("workload: 100 MB of newlines", 4, CACHE, make=lines("\n", 100 << 20), heavy=True),
        Attack(
            "workload: 20 MB of spaces then a request",
            4,
            CACHE,
            make=lines(lambda: " " * (20 << 20) + req),
            expect="clean",
        ),
        Attack(
            "workload: '[' then 20 MB of spaces",
            4,
            CACHE,
            make=lines(lambda: "[" + " " * (20 << 20)),
        ),
        Attack(
            "workload: 10**6 blank lines then a bad one",
            4,
            CACHE,
            make=lines(lambda: "\n" * 10**6 + "{bad\n"),
        ),
        Attack(
            "workload: 10**7 lines, a bad 2nd",
            4,
            CACHE,
            make=lines(req + "{bad\n" + req * 8, 10**6),
        ),
        Attack(
            "workload: 10**4 valid lines",
            4,
            CACHE,
            make=lines(req, 10**4),
            expect="clean",
            heavy=True,
        ),
        Attack(
            "workload: U+2028 between values",
            7,
            CACHE,
            make=lines('{"prompt_token_ids":\u2028[1]}\n'),
        ),
        Attack(
            "workload: U+2028 and U+2029 in a salt",
            7,
            CACHE,
            make=lines('{"prompt_token_ids": [1, 2], "cache_salt": "a\u2028\u2029b"}\n'),
            expect="works",
        ),
        Attack(
            "workload: a CR-only file of two requests",
            7,
            CACHE,
            make=lines(req.strip() + "\r" + req),
        ),
        Attack(
            "workload: CRLF lines (control)",
            7,
            CACHE,
            make=lines(req.replace("\n", "\r\n"), 3),
            expect="works",
        ),
        Attack(
            "workload: invalid UTF-8 on line 2",
            4,
            CACHE,
            make=lines(req.encode() + b'{"cache_salt": "\xff"}\n'),
        ),
        Attack(
            "workload: a BOM (control)",
            7,
            CACHE,
            make=lines(b"\xef\xbb\xbf" + req.encode()),
            expect="works",
        ),
        Attack("workload: a BOM on line 2", 7, CACHE, make=lines(req + "\ufeff" + req)),
        Attack("workload: UTF-16", 4, CACHE, make=lines(req.encode("utf-16"))),
        Attack("workload: a NUL byte", 4, CACHE, make=lines(b'{"prompt_token_ids": [1]}\0\n')),
        Attack(
            "workload: objects nested 10**5 deep",
            4,
            CACHE,
            make=lines(lambda: '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n"),
        ),
        Attack(
            "workload: a ShareGPT array nested 10**5 deep",
            4,
            CACHE,
            make=lines(lambda: "[" * 100_000 + "]" * 100_000),
        ),
        Attack(
            "workload: ShareGPT of 10**6 empty objects",
            4,
            CACHE,
            make=lines(lambda: "[" + "{}," * 10**6 + "{}]"),
        ),
        Attack(
            "workload: 10**6 ids of 40 digits",
            4,
            CACHE,
            make=lines(lambda: '{"prompt_token_ids": [' + ("9" * 40 + ",") * 10**6 + "1]}\n"),
        ),
        Attack(
            "workload: token id 2**63", 4, CACHE, make=lines('{"prompt_token_ids": [%d]}\n' % 2**63)
        ),
        Attack("workload: token id -1", 4, CACHE, make=lines('{"prompt_token_ids": [-1]}\n')),
        Attack("workload: token id true", 4, CACHE, make=lines('{"prompt_token_ids": [true]}\n')),
        Attack("workload: token id 1.5", 4, CACHE, make=lines('{"prompt_token_ids": [1.5]}\n')),
        Attack(
            "workload: output_len 10**18",
            4,
            CACHE,
            make=lines('{"prompt_token_ids": [1], "output_len": 1000000000000000000}\n'),
        ),
        Attack(
            "workload: output_len 10**9",
            4,
            CACHE,
            make=lines('{"prompt_token_ids": [1], "output_len": 1000000000}\n'),
            expect="clean",
        ),
        Attack(
            "workload: arrival_time NaN",
            4,
            CACHE,
            make=lines('{"prompt_token_ids": [1], "arrival_time": NaN}\n'),
        ),
        Attack(
            "workload: arrival_time 1e309",
            4,
            CACHE,
            make=lines('{"prompt_token_ids": [1], "arrival_time": 1e309}\n'),
        ),
        Attack(
            "workload: cache_salt of 10 MB",
            4,
            CACHE,
            make=lines(
                lambda: '{"prompt_token_ids": [1], "cache_salt": "' + "s" * (10 << 20) + '"}\n'
            ),
            expect="clean",
        ),
        Attack(
            "workload: 10**4 LoRA names",
            4,
            CACHE,
            make=lambda d: (d / "w.jsonl").write_text(
                "".join(
                    json.dumps({"prompt_token_ids": [1, 2], "lora_name": f"l{i}"}) + "\n"
                    for i in range(10_000)
                )
            ),
            expect="clean",
            heavy=True,
        ),
        Attack(
            "workload: hash ids x 2**20-token blocks",
            4,
            ("cache", *LLAMA, "--trace-block-size", str(2**20), "{d}/w.jsonl"),
            make=lines(
                json.dumps(
                    {
                        "timestamp": 0,
                        "input_length": 2**20 * 1000,
                        "output_length": 1,
                        "hash_ids": list(range(1000)),
                    }
                )
                + "\n"
            ),
            expect="clean",
        ),
        Attack(
            "workload: hash ids input_length 10**15",
            4,
            CACHE,
            make=lines(
                json.dumps(
                    {"timestamp": 0, "input_length": 10**15, "output_length": 1, "hash_ids": [1]}
                )
                + "\n"
            ),
        ),
        Attack(
            "workload: hash ids 10**6 ids",
            4,
            CACHE,
            make=lines(
                lambda: (
                    json.dumps(
                        {
                            "timestamp": 0,
                            "input_length": 512 * 10**6,
                            "output_length": 1,
                            "hash_ids": list(range(10**6)),
                        }
                    )
                    + "\n"
                )
            ),
            expect="clean",
        ),
    ]
    return a


def _sizes() -> list[Attack]:
    plan = ("plan", "{ex}/llama3_8b.json")
    a = [
        Attack(
            "plan --num-gpu-blocks-override 2**63",
            4,
            (*plan, *MEM, "--num-gpu-blocks-override", str(2**63)),
            expect="clean",
        ),
        Attack(
            "plan --num-gpu-blocks-override 2**64",
            4,
            (*plan, *MEM, "--num-gpu-blocks-override", str(2**64)),
            expect="clean",
        ),
        Attack(
            "plan --num-gpu-blocks-override -1", 4, (*plan, *MEM, "--num-gpu-blocks-override", "-1")
        ),
        Attack("plan --max-model-len 2**63", 4, (*plan, *MEM, "--max-model-len", str(2**63))),
        Attack(
            "plan --max-model-len 10**18 with 10**12 blocks",
            4,
            (*plan, *MEM, "--max-model-len", str(10**18), "--num-gpu-blocks-override", str(10**12)),
            expect="clean",
        ),
        Attack("plan --block-size 2**40", 4, (*plan, *MEM, "--block-size", str(2**40))),
        Attack("plan --kv-cache-memory 1e400GiB", 4, (*plan, "--kv-cache-memory", "1e400GiB")),
        Attack("plan --kv-cache-memory nanGiB", 4, (*plan, "--kv-cache-memory", "nanGiB")),
        Attack("plan --kv-cache-memory 2**200", 4, (*plan, "--kv-cache-memory", str(2**200))),
        Attack(
            "plan --kv-cache-memory of 10**4 GPUs",
            4,
            (*plan, "--kv-cache-memory", ",".join(["1GiB"] * 10_000)),
            expect="clean",
        ),
        Attack("plan -tp 10**9", 4, (*plan, *MEM, "-tp", str(10**9))),
        Attack("plan -pp 10**9", 4, (*plan, *MEM, "-pp", str(10**9))),
        Attack(
            "plan --max-num-seqs 10**12",
            4,
            (*plan, *MEM, "--max-num-seqs", str(10**12)),
            expect="clean",
        ),
        Attack(
            "plan --max-num-batched-tokens 10**18",
            4,
            (*plan, *MEM, "--max-num-batched-tokens", str(10**18)),
            expect="clean",
        ),
        Attack(
            "plan --gpu-memory 10**30 bytes",
            4,
            (*plan, "--gpu", "H100-80GB", "--gpu-memory", "1" + "0" * 30),
        ),
        Attack(
            "plan --gpu-memory-utilization 1e-300",
            4,
            (*plan, "--gpu", "H100-80GB", "--gpu-memory-utilization", "1e-300"),
        ),
        Attack(
            "plan --sweep of 1000 lengths",
            4,
            (
                *plan,
                *MEM,
                "--sweep",
                "max_model_len=" + ",".join(str(1024 + i) for i in range(1000)),
            ),
            expect="clean",
        ),
        Attack(
            "plan --sweep tp of 10**9",
            4,
            (*plan, *MEM, "--sweep", "tensor_parallel_size=1," + str(10**9)),
            expect="clean",
        ),
        Attack(
            "cache --num-gpu-blocks-override 2**63",
            4,
            ("cache", *LLAMA, "--num-gpu-blocks-override", str(2**63), _IDS),
        ),
        Attack(
            "cache --max-num-seqs 10**12",
            4,
            ("cache", *LLAMA, "--max-num-seqs", str(10**12), _IDS),
            expect="clean",
        ),
        Attack(
            "cache --jobs 10**6",
            4,
            ("cache", *LLAMA, "--jobs", str(10**6), "--sweep-memory", "1GiB,2GiB", _IDS),
        ),
        Attack("cache --instances 10**6", 4, ("cache", *LLAMA, "--instances", str(10**6), _IDS)),
        Attack(
            "cache --sweep-memory of 10**4 sizes",
            4,
            (
                "cache",
                "--model",
                "{ex}/llama3_8b.json",
                "--sweep-memory",
                ",".join(f"{i + 1}GiB" for i in range(10_000)),
                _IDS,
            ),
        ),
        Attack(
            "cache --trace-block-size 2**63",
            4,
            ("cache", *LLAMA, "--trace-block-size", str(2**63), _IDS),
        ),
        Attack(
            "cache-replay: 2**63 blocks",
            4,
            ("cache-replay", "{d}/t.json"),
            make=trace_with(blocks=2**63),
        ),
        Attack(
            "cache-replay --json: 2**63 blocks",
            4,
            ("cache-replay", "--json", "{d}/t.json"),
            make=trace_with(blocks=2**63),
        ),
        Attack(
            "cache-replay: 10**6 ops",
            4,
            ("cache-replay", "{d}/t.json"),
            make=trace_with(
                ops=[{"op": "arrive", "request_id": "r", "prompt_token_ids": [1]}] * 10**6
            ),
            heavy=True,
        ),
        Attack(
            "cache-replay: a prompt of 10**7 tokens",
            4,
            ("cache-replay", "{d}/t.json"),
            make=trace_with(
                ops=[{"op": "arrive", "request_id": "r", "prompt_token_ids": [1] * 10**7}]
            ),
            heavy=True,
        ),
        Attack(
            "cache-replay: ops a string",
            4,
            ("cache-replay", "{d}/t.json"),
            make=trace_with(ops="X"),
        ),
        Attack(
            "hash --block-size 2**63",
            4,
            ("hash", "--seed", "0", "--block-size", str(2**63), "{d}/r.json"),
            make=request_with(block_size=None),
        ),
        Attack(
            "hash --block-size 0",
            4,
            ("hash", "--seed", "0", "--block-size", "0", "{d}/r.json"),
            make=request_with(block_size=None),
        ),
        Attack(
            "hash --lookahead 2**63",
            4,
            ("hash", "--seed", "0", "--lookahead", str(2**63), "{ex}/request.json"),
        ),
        Attack(
            "hash: a request of 10**6 tokens",
            4,
            ("hash", "--seed", "0", "{d}/r.json"),
            make=request_with(prompt_token_ids=[1] * 10**6, mm_features=[]),
            expect="clean",
            max_stdout=16 << 20,
            heavy=True,
        ),
        Attack(
            "hash: mm offset 2**63",
            4,
            ("hash", "--seed", "0", "{d}/r.json"),
            make=request_with(mm_features=[{"identifier": "a", "offset": 2**63, "length": 1}]),
        ),
        Attack(
            "hash: mm length 10**12",
            4,
            ("hash", "--seed", "0", "{d}/r.json"),
            make=request_with(mm_features=[{"identifier": "a", "offset": 0, "length": 10**12}]),
        ),
        Attack(
            "kvpure_gpu: 10**12 blocks on the CPU",
            4,
            code="from kvpure.specs import FullAttentionSpec, KVDtype\n"
            "from kvpure.specs.kv_cache_config import KVCacheConfig, KVCacheGroupSpec, KVCacheTensor\n"
            "from kvpure_gpu import allocate_kv_cache_buffers\n"
            "s = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype=KVDtype.BFLOAT16)\n"
            "n = 10**12\n"
            "c = KVCacheConfig(num_blocks=n, kv_cache_tensors=(KVCacheTensor(size=n * s.page_size_bytes, shared_by=('a',)),),"
            " kv_cache_groups=(KVCacheGroupSpec(layer_names=('a',), kv_cache_spec=s),))\n"
            "allocate_kv_cache_buffers(c, 'cpu')\n",
            heavy=True,
        ),
        Attack(
            "kvpure_gpu: a block table 2**40 blocks wide",
            4,
            code="from kvpure.block_table import BlockTableLayout\n"
            "from kvpure_gpu import block_table_tensor\n"
            "block_table_tensor([[0]], BlockTableLayout(block_size=16), max_num_blocks_per_req=2**40)\n",
            heavy=True,
        ),
        Attack(
            "BlockPool of 10**12 blocks, API",
            4,
            code="from kvpure.cache.block_pool import BlockPool\n"
            "BlockPool(num_gpu_blocks=10**12, enable_caching=True, hash_block_size=16)\n",
        ),
    ]
    return a


def data_cases() -> list[Attack]:
    return [*_headers(), *_indexes(), *_workloads(), *_sizes()]
