"""The CLI cases of :mod:`api_fuzz`: each subcommand's options with bad values."""

from __future__ import annotations

HUGE = "9" * 40
INT_BAD = ("", "-1", "0", "nan", "abc", "1.5", HUGE, "true")
SIZE_BAD = ("", "-1", "nan", "inf", "abc", "1e400", HUGE + "GiB", "0x10", "-5GiB")
ENUM_BAD = ("", "nope", "1")
SWITCH_BAD = ("", "nope", "maybe")  # on|off (vLLM's parser also takes 1/0, true/false)
LOOKAHEAD_BAD = tuple(v for v in INT_BAD if v != "0")  # 0 is no lookahead
FRACTION_BAD = ("nan", "inf", "-0.1", "1.5", "abc", "")
JSON_BAD = ("{", "[]", "3", "null", '{"kv_connector": 3}')
PATH_BAD = ("no/such/file.json", "", "examples", "/dev/null", "README.md")

PLAN = ("plan", "examples/llama3_8b.json", "--kv-cache-memory", "24GiB")
PLAN_GPU = ("plan", "examples/llama3_8b.json", "--gpu", "H100-80GB")
CACHE = (
    "cache",
    "examples/eviction_workload.jsonl",
    "--model",
    "examples/llama3_8b.json",
    "--kv-cache-memory",
    "256MiB",
    "--max-model-len",
    "1024",
)


def _options(base: tuple[str, ...], options: dict[str, tuple[str, ...]]) -> list[list[str]]:
    return [[*base, option, value] for option, values in options.items() for value in values]


CLI_CASES: list[list[str]] = [
    ["nosuchcommand"],  # (a bare ``kvpure`` prints the help and exits 2, by design)
    # -- plan: the model and each option
    *[["plan", p, "--kv-cache-memory", "24GiB"] for p in PATH_BAD],
    *[["plan", "examples/llama3_8b.json", "--kv-cache-memory", v] for v in SIZE_BAD],
    *_options(
        PLAN,
        {
            "--max-model-len": ("", "0", "nan", "abc", "1.5", HUGE, "-2", "1e400"),
            "--block-size": INT_BAD,
            "--tensor-parallel-size": INT_BAD,
            "--pipeline-parallel-size": INT_BAD,
            "--num-gpu-blocks-override": INT_BAD,
            "--max-num-batched-tokens": INT_BAD,
            "--kv-cache-dtype": ENUM_BAD,
            "--dtype": ENUM_BAD,
            "--mamba-ssm-cache-dtype": ENUM_BAD,
            "--attention-backend": ENUM_BAD,
            "--mamba-cache-mode": ENUM_BAD,
            "--prefix-caching": SWITCH_BAD,
            "--hybrid-kv-cache-manager": SWITCH_BAD,
            "--vllm": ("", "0.99", "abc", "1"),
            "--architecture-as": ("", "NoSuchForCausalLM"),
            "--sweep": (
                "",
                "nope=1",
                "max_model_len=",
                "max_model_len=abc",
                "=",
                "max_model_len=-1,0",
            ),
            "--max-num-seqs": INT_BAD,
            "--data-parallel-size": INT_BAD,
            "--kv-transfer-config": JSON_BAD,
            "--speculative-config": JSON_BAD,
        },
    ),
    *_options(
        PLAN_GPU,
        {
            "--gpu": ENUM_BAD,
            "--gpu-memory-utilization": FRACTION_BAD,
            "--usage-context": ENUM_BAD,
            "--quantization": ENUM_BAD,
            "--memory-profile-version": ("", "0.99", "abc"),
            "--enforce-eager": ("maybe", "2"),
            "--flashinfer-sampler": ("maybe", "2"),
        },
    ),
    *_options(
        ("plan", "examples/llama3_8b.json", "--gpu-memory", "80GiB"),
        {
            "--gpu-capability": ("", "abc", "-1.0", "nan", "1.2.3"),  # "9" is 9.0
            "--gpu-vendor": ENUM_BAD,
        },
    ),
    *[["plan", "examples/llama3_8b.json", "--gpu-memory", v] for v in SIZE_BAD],
    # -- hash
    *[["hash", p] for p in PATH_BAD],
    *_options(
        ("hash", "examples/request.json"),
        {
            "--algo": ENUM_BAD,
            "--vllm": ("", "0.99"),  # (--seed '' is PYTHONHASHSEED='', a seed string)
            "--profile": ENUM_BAD,
            "--lookahead": LOOKAHEAD_BAD,
            "--block-size": INT_BAD,
        },
    ),
    # -- events
    ["events"],
    ["events", "nope"],
    *[["events", "decode", p] for p in PATH_BAD],
    *_options(("events", "decode", "examples/kv_events.capture"), {"--profile": ENUM_BAD}),
    *_options(
        ("events", "audit", "examples/kv_events.capture", "--algo", "sha256"),
        {
            "--block-size": INT_BAD,
            "--profile": ENUM_BAD,
            "--lora-path": ("", "nopath", "=x"),
            "--hashes": ENUM_BAD,
            "--lookahead": LOOKAHEAD_BAD,
        },
    ),
    *_options(
        ("events", "listen", "tcp://127.0.0.1:1", "--timeout", "0.1"),
        {
            "--count": INT_BAD,
            "--max-frame-bytes": INT_BAD,
            "--profile": ENUM_BAD,
        },
    ),
    *_options(
        ("events", "listen", "tcp://127.0.0.1:1"),
        {"--timeout": ("nan", "inf", "-1", "abc", "")},
    ),
    ["events", "listen", "not-an-endpoint", "--timeout", "0.1"],
    # -- cache-replay
    *[["cache-replay", p] for p in PATH_BAD],
    *_options(("cache-replay", "examples/cache_replay_trace.json"), {"--vllm": ("", "0.99")}),
    # -- cache
    *[
        ["cache", p, "--model", "examples/llama3_8b.json", "--kv-cache-memory", "1GiB"]
        for p in PATH_BAD
    ],
    *_options(
        CACHE,
        {
            "--model": ("", "no/such.json", "README.md"),
            "--block-size": INT_BAD,
            "--tensor-parallel-size": INT_BAD,
            "--num-gpu-blocks-override": INT_BAD,
            "--max-num-seqs": INT_BAD,
            "--sweep-memory": ("", "abc", "1GiB,nan", ",", "-1GiB"),
            "--jobs": INT_BAD,
            "--trace-block-size": INT_BAD,
            "--instances": INT_BAD,
            "--routing": ("", "nope", "round_robin,"),
            "--vllm": ("", "0.99"),
            "--kv-cache-dtype": ENUM_BAD,
            "--prefix-caching": SWITCH_BAD,
            "--tokenizer": ("no/such/dir", ""),
        },
    ),
    *[[*CACHE[:4], "--kv-cache-memory", v] for v in SIZE_BAD],
    # -- demo
    ["demo", "extra"],
    ["demo", "--nope"],
]
