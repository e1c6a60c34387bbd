"""The capacity report's numbers are the planner's (and the goldens'); its waste adds up.

Expected values are read from the golden cases (vLLM's own output) or
reasoned out by hand from the model's shapes, never from the report itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvpure.cli.plan_options import deployment_from_options as _from_options
from kvpure.cli.plan_output import config_report_output
from kvpure.interop.planning import parse_planning_input
from kvpure.models.architectures import model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.deployment import Deployment
from kvpure.planning.planner import get_kv_cache_configs
from kvpure.report.capacity import build_capacity_report
from kvpure.report.model_plan import capacity_report
from kvpure.report.text import describe_layers, format_bytes, render_report, report_to_json
from kvpure.specs import cdiv
from tests.test_models_golden import CASES, derive, example, golden

GIB = 2**30


def deployment_from_options(options: dict[str, str]) -> Deployment:
    """The deployment of the goldens: vLLM 0.26, async scheduling off (as their inputs say)."""
    return _from_options(options, vllm_version="0.26", async_scheduling=False)


@pytest.mark.parametrize(("case", "config", "options"), CASES, ids=[c[0] for c in CASES])
def test_report_numbers_are_the_goldens(
    case: str, config: dict[str, Any], options: dict[str, str]
) -> None:
    data = golden(case)
    memory = tuple(data["input"]["available_memory"])
    derived = derive(config, options)
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, memory)
    report = build_capacity_report(plan, memory)
    facts = data["derived"]["per_worker"][0]
    output = data["output"][0]
    assert report.num_workers == len(data["output"])
    assert report.num_blocks == output["num_blocks"]
    assert report.usable_blocks == output["num_blocks"] - 1
    assert report.kv_cache_capacity_tokens == facts["kv_cache_capacity_tokens"]
    assert report.max_concurrency == facts["max_concurrency"]
    assert report.max_model_len == data["final_max_model_len"]
    assert [report.scheduler_block_size, report.hash_block_size] == facts[
        "resolve_kv_cache_block_sizes"
    ]
    assert report.auto_fitted == (
        data["input"]["vllm_config"]["model_config"]["original_max_model_len"] == -1
    )
    # Each group lists its layers on every worker (pipeline stages in order).
    for index, group in enumerate(report.groups):
        names: list[str] = []
        for worker in data["output"]:
            names += [n for n in worker["kv_cache_groups"][index]["layer_names"] if n not in names]
        assert sorted(group.layer_names) == sorted(names)
    worker_groups = output["kv_cache_groups"]
    for group, theirs, max_mem in zip(
        report.groups, worker_groups, facts["group_max_memory_usage_bytes"], strict=True
    ):
        page = theirs["kv_cache_spec"]["_derived"]["page_size_bytes"]
        assert group.page_size_bytes == page
        assert group.block_size == theirs["kv_cache_spec"]["block_size"]
        assert group.spec_type == theirs["kv_cache_spec"]["type"]
        assert group.max_memory_usage_bytes == max_mem
        assert group.blocks_per_request == cdiv(max_mem, page)
    assert sum(g.memory_share for g in report.groups) == pytest.approx(1.0)
    used = sum(t["size"] for t in output["kv_cache_tensors"])
    assert report.waste.used_bytes == used
    assert report.block_bytes == used // output["num_blocks"]
    assert report.waste.null_block_bytes == used // output["num_blocks"]
    assert report.waste.unallocated_bytes == memory[0] - used
    logged = [f"{line['level']} {line['msg']}" for line in data["logs"]]
    assert list(report.vllm_log) == list(dict.fromkeys(logged))


def test_gemma3_groups_give_the_full_layers_their_share() -> None:
    derived = derive(
        example("gemma3_12b.json"), {"kv_cache_memory": "20GiB", "max_model_len": "32768"}
    )
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, derived.available_memory)
    report = build_capacity_report(plan, derived.available_memory)
    # Sliding window 1024 with 8192 tokens in flight, block 16: cdiv(1023 + 8192, 16) + 1 = 577.
    # Full attention over 32768 tokens: 2048 blocks.
    assert [g.blocks_per_request for g in report.groups] == [577] * 5 + [2048]
    assert report.groups[5].memory_share == pytest.approx(2048 / (5 * 577 + 2048))
    assert [g.window_tokens for g in report.groups] == [1024] * 5 + [None]
    assert report.waste.padding_layers_bytes == 0
    assert report.waste.padded_pages_bytes == 0


def test_mamba_hybrid_waste_counts_the_padded_mamba_pages() -> None:
    data = golden("mamba_hybrid_4attn_28mamba.json")
    config, options = CASES[-1][1], CASES[-1][2]
    derived = derive(config, options)
    plan = get_kv_cache_configs(derived.settings, derived.kv_cache_specs, derived.available_memory)
    report = build_capacity_report(plan, derived.available_memory)
    # 7 Mamba groups of 4 layers hold 1 block per request; the attention group
    # cdiv(65536, 528) = 125. A block spans the 4 shared tensors of 2162688-byte
    # pages; each Mamba layer page holds 2158592 bytes of state, 4096 padding.
    state = 10240 * 3 * 2 + 128 * 64 * 128 * 2
    assert state == 2158592
    page = 2162688
    num_blocks = data["output"][0]["num_blocks"]
    used = 4 * page * num_blocks
    fraction = 7 * (1 / 132) * (4 * (page - state)) / (4 * page)
    assert report.waste.padded_pages_bytes == int(fraction * (used - 4 * page))
    assert [g.blocks_per_request for g in report.groups] == [1] * 7 + [125]
    assert report.groups[0].unpadded_page_size_bytes == state


def test_a_uniform_type_group_reports_its_summed_page() -> None:
    data = golden("variable_gqa_uniform_type.json")
    parsed = parse_planning_input(data["input"], vllm_version="0.26")
    plan = get_kv_cache_configs(parsed.settings, parsed.kv_cache_specs, parsed.available_memory)
    report = build_capacity_report(plan, parsed.available_memory)
    (group,) = report.groups
    assert group.spec_type == "UniformTypeKVCacheSpecs"
    # KV heads 8,8,4,4,2,2,1,1,8,4,2,1 x 16 tokens x 256 values x 2 bytes = 360 KiB per block.
    assert group.page_size_bytes == 45 * 8192 == 368640
    assert group.blocks_per_request == 32768 // 16
    assert report.block_bytes == 368640


def test_padding_layers_are_counted_for_an_uneven_split() -> None:
    data = golden("t_one_worker_3full_7sw.json")
    parsed = parse_planning_input(data["input"], vllm_version="0.26")
    plan = get_kv_cache_configs(parsed.settings, parsed.kv_cache_specs, parsed.available_memory)
    report = build_capacity_report(plan, parsed.available_memory)
    assert [g.num_layers for g in report.groups] == [3, 3, 2, 2]
    assert [g.num_padding_layers for g in report.groups] == [0, 0, 1, 1]
    facts = data["derived"]["per_worker"][0]
    pages = [
        g["kv_cache_spec"]["_derived"]["page_size_bytes"]
        for g in data["output"][0]["kv_cache_groups"]
    ]
    blocks = [cdiv(m, p) for m, p in zip(facts["group_max_memory_usage_bytes"], pages, strict=True)]
    shares = [b / sum(blocks) for b in blocks]
    num_blocks = data["output"][0]["num_blocks"]
    used = sum(t["size"] for t in data["output"][0]["kv_cache_tensors"])
    block = used // num_blocks
    missing = [0, 0, 1, 1]
    expected = sum(s * m * pages[0] / block for s, m in zip(shares, missing, strict=True))
    assert report.waste.padding_layers_bytes == int(expected * (used - block))
    assert report.waste.padding_layers_bytes > 0


def test_the_suggestion_is_an_exact_fp8_replan() -> None:
    layout = model_layout(parse_model_config(example("llama3_8b.json")))
    report = capacity_report(layout, deployment_from_options({"kv_cache_memory": "16GiB"}))
    # bf16: 32 layers x 64 KiB per block -> 8192 blocks; fp8 halves the page -> 16384
    # blocks of 16 tokens = 262,144 tokens, 32 requests of 8192.
    assert report.kv_cache_capacity_tokens == 131072
    assert "--kv-cache-dtype fp8" in report.suggestion
    assert "262,144 tokens" in report.suggestion
    assert "32.00x" in report.suggestion


def test_with_fp8_already_the_suggestion_is_the_gain_per_gib() -> None:
    layout = model_layout(parse_model_config(example("llama3_8b.json")))
    deployment = deployment_from_options({"kv_cache_memory": "16GiB", "kv_cache_dtype": "fp8"})
    report = capacity_report(layout, deployment)
    # fp8: 32 KiB per layer-page x 32 layers = 1 MiB per 16-token block; 1 GiB = 1024 blocks.
    assert "16,384 tokens" in report.suggestion


def test_text_report_shows_the_facts() -> None:
    layout = model_layout(parse_model_config(example("gpt_oss_20b.json")))
    report = capacity_report(layout, deployment_from_options({"kv_cache_memory": "40GiB"}))
    text = render_report(report)
    for fact in (
        "GptOssForCausalLM",
        "1,643,116 tokens",
        "12.54x requests of 131,072 tokens",
        "109,226",
        "scheduler 16, hash 16 tokens",
        "sliding_window (128)",
        "full_attention",
        "model.layers.[0,2,..,22].self_attn.attn",
        "null block",
        "padding layers",
        "padded pages",
        "To fit more:",
    ):
        assert fact in text, fact


def test_json_report_is_the_same_facts() -> None:
    layout = model_layout(parse_model_config(example("gemma3_12b.json")))
    report = capacity_report(
        layout, deployment_from_options({"kv_cache_memory": "20GiB", "max_model_len": "32768"})
    )
    data = json.loads(json.dumps(report_to_json(report)))
    assert data["num_blocks"] == report.num_blocks == 20480
    assert data["kv_cache_capacity_tokens"] == 136040
    assert data["max_concurrency"] == report.max_concurrency
    assert [g["layer_names"] for g in data["groups"]] == [
        list(g.layer_names) for g in report.groups
    ]
    assert data["waste"]["total_bytes"] == report.waste.total_bytes
    assert data["model"]["architecture"] == "Gemma3ForCausalLM"
    assert data["suggestion"] == report.suggestion


def test_sweep_gives_one_row_per_value_and_rows_for_what_does_not_fit() -> None:
    text, code = config_report_output(
        example("llama3_8b.json"),
        {"kv_cache_memory": "4GiB"},
        sweep_text="max_model_len=1024,4096,8192,16384",
        as_json=False,
    )
    assert code == 0
    release, *lines = text.splitlines()
    assert release.startswith("vLLM release: 0.34")
    assert len(lines) == 5
    # 4 GiB / 2 MiB per block = 2048 blocks of 16 tokens = 32768 tokens.
    assert "32,768" in lines[1]
    assert "32.00x" in lines[1]
    assert "8.00x" in lines[2]
    assert "4.00x" in lines[3]
    assert "does not fit" in lines[4]
    data = json.loads(
        config_report_output(
            example("llama3_8b.json"),
            {"max_model_len": "8192", "vllm": "0.26"},  # 0.26's error for 1 MiB
            sweep_text="kv_cache_memory=16GiB,24GiB,1MiB",
            as_json=True,
        )[0]
    )
    assert [row["value"] for row in data["rows"]] == ["16GiB", "24GiB", "1MiB"]
    assert data["rows"][0]["report"]["num_blocks"] == 8192
    assert data["rows"][1]["report"]["num_blocks"] == 12288
    assert data["rows"][2]["report"] is None
    assert "KV cache" in data["rows"][2]["error"]


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=2, max_value=64 * 1024))
def test_llama3_blocks_are_memory_over_two_mib(mib: int) -> None:
    memory = mib * 2**20
    layout = model_layout(parse_model_config(example("llama3_8b.json")))
    deployment = deployment_from_options({"kv_cache_memory": f"{memory}B", "max_model_len": "16"})
    report = capacity_report(layout, deployment, with_suggestion=False)
    # 32 layers x (16 tokens x 8 heads x 256 values x 2 bytes) = 2 MiB per block.
    assert report.num_blocks == memory // (2 * 2**20)
    assert report.waste.unallocated_bytes == memory % (2 * 2**20)
    assert report.waste.total_bytes <= memory
    assert report.kv_cache_capacity_tokens == report.num_blocks * 16


def test_layer_names_are_summarised() -> None:
    assert describe_layers(["model.layers.3.mixer"]) == "model.layers.3.mixer"
    assert describe_layers([f"m.l.{i}.a" for i in range(4)]) == "m.l.[0-3].a"
    assert describe_layers([f"m.l.{i}.a" for i in (1, 2, 5)]) == "m.l.[1-2,5].a"
    assert describe_layers([f"m.l.{i}.a" for i in range(0, 30, 6)]) == "m.l.[0,6,..,24].a"
    assert describe_layers(["a", "b", "c"]) == "a .. c"


def test_bytes_are_formatted_in_binary_units() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(2 * 2**20) == "2.00 MiB"
    assert format_bytes(24 * GIB) == "24.00 GiB"


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=20, max_value=400), st.integers(min_value=1, max_value=64))
def test_more_memory_never_holds_fewer_tokens(gib_tenths: int, extra_tenths: int) -> None:
    layout = model_layout(parse_model_config(example("gemma3_12b.json")))

    def tokens(tenths: int) -> int:
        deployment = deployment_from_options(
            {"kv_cache_memory": f"{tenths / 10}GiB", "max_model_len": "4096"}
        )
        return capacity_report(layout, deployment, with_suggestion=False).kv_cache_capacity_tokens

    assert tokens(gib_tenths + extra_tenths) >= tokens(gib_tenths)
