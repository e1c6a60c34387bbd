"""Deployment options: the value and the parsers of command-line text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvpure.cli.option_values import (
    parse_bool,
    parse_max_model_len,
    parse_memory_bytes,
    parse_positive_int,
)
from kvpure.errors import InvalidFieldError
from kvpure.models.deployment import AttentionBackend, Deployment


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GiB", 24 * 2**30),
        ("24 GiB", 24 * 2**30),
        ("24gib", 24 * 2**30),
        ("16GB", 16 * 10**9),
        ("512MiB", 512 * 2**20),
        ("0.5GiB", 2**29),
        ("1.25 GiB", 5 * 2**28),
        ("17179869184B", 17179869184),
        ("2G", 2 * 2**30),
        ("1TiB", 2**40),
    ],
)
def test_memory_sizes(text: str, expected: int) -> None:
    assert parse_memory_bytes(text) == expected


@pytest.mark.parametrize("text", ["foo", "", "GiB", "-1GiB", "12 parsecs", "1.2.3GiB"])
def test_bad_memory_sizes_name_the_option(text: str) -> None:
    """Each bad size names the flag and the text given."""
    with pytest.raises(InvalidFieldError) as info:
        parse_memory_bytes(text)
    assert info.value.field == "--kv-cache-memory"
    assert info.value.value == text


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["GiB", "MiB", "KiB", "B"]))
def test_whole_binary_sizes_are_exact(number: int, unit: str) -> None:
    scale = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}[unit]
    assert parse_memory_bytes(f"{number}{unit}") == number * scale


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8192", 8192),
        ("32k", 32000),
        ("32K", 32768),
        ("128K", 131072),
        ("25.6k", 25600),
        ("1M", 2**20),
        ("auto", None),
        ("AUTO", None),
        ("-1", None),
    ],
)
def test_max_model_len_as_vllm_reads_it(text: str, expected: int | None) -> None:
    assert parse_max_model_len(text) == expected


@pytest.mark.parametrize("text", ["0", "-5", "lots", "1.5", "0.0001k", ""])
def test_bad_max_model_len(text: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        parse_max_model_len(text)
    assert info.value.field == "--max-model-len"


@given(st.integers(min_value=1, max_value=2**40))
def test_any_positive_length_round_trips(length: int) -> None:
    assert parse_max_model_len(str(length)) == length


def test_positive_ints_and_bools() -> None:
    assert parse_positive_int("16", field="--block-size") == 16
    for bad in ("0", "-2", "x", "1.5"):
        with pytest.raises(InvalidFieldError, match="--block-size"):
            parse_positive_int(bad, field="--block-size")
    assert parse_bool("on", field="--x") is True
    assert parse_bool("False", field="--x") is False
    with pytest.raises(InvalidFieldError, match="on or off"):
        parse_bool("maybe", field="--x")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("block_size", 0),
        ("tensor_parallel_size", 0),
        ("pipeline_parallel_size", -1),
        ("kv_cache_memory_bytes", -1),
        ("max_model_len", 0),
        ("num_gpu_blocks_override", 0),
        ("max_num_batched_tokens", 0),
        ("kv_cache_dtype", "int3"),
        ("dtype", "float64"),
        ("mamba_cache_mode", "sometimes"),
    ],
)
def test_deployment_refuses_bad_values_naming_the_field(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"kv_cache_memory_bytes": 2**30, field: value}
    with pytest.raises(InvalidFieldError) as info:
        Deployment(**kwargs)  # type: ignore[arg-type]  # fields given by name on purpose
    assert info.value.field == field


def test_backend_facts() -> None:
    assert AttentionBackend.FLASH_ATTN.indexes_kv_by_block_stride
    assert AttentionBackend.FLASHINFER.indexes_kv_by_block_stride
    assert AttentionBackend.TRITON_ATTN.indexes_kv_by_block_stride
    for mla in (
        AttentionBackend.FLASHMLA,
        AttentionBackend.TRITON_MLA,
        AttentionBackend.CUTLASS_MLA,
    ):
        assert mla.is_mla
        assert not mla.indexes_kv_by_block_stride
    assert AttentionBackend.FLASHMLA.default_block_size == 64
    assert AttentionBackend.CUTLASS_MLA.default_block_size == 128
    assert AttentionBackend.FLASH_ATTN.default_block_size == 16
    assert AttentionBackend.FLASH_ATTN.kernel_block_alignment == 16


@pytest.mark.parametrize("text", ["24", "17179869184", " 8 "])
def test_a_size_without_a_unit_is_refused_naming_the_units(text: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        parse_memory_bytes(text)
    assert "needs a unit" in str(info.value)
    assert "GiB" in str(info.value)
    assert "GB" in str(info.value)


@pytest.mark.parametrize("text", ["9" * 5000, "1" * 41 + "GiB", "2000000PiB", "2EiB"])
def test_huge_or_endless_sizes_are_refused(text: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        parse_memory_bytes(text)
    assert info.value.field == "--kv-cache-memory"


def test_the_largest_size_is_one_exbibyte() -> None:
    assert parse_memory_bytes("1048576TiB") == 2**60
    with pytest.raises(InvalidFieldError):
        parse_memory_bytes("1048577TiB")


@pytest.mark.parametrize("text", ["9" * 5000, "1" * 41])
def test_endless_counts_are_refused(text: str) -> None:
    with pytest.raises(InvalidFieldError):
        parse_positive_int(text, field="--block-size")
    with pytest.raises(InvalidFieldError):
        parse_max_model_len(text)
