"""The release as a value: names, full forms, precedence, and the error line."""

from __future__ import annotations

import pickle

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.versions import (
    DEFAULT_VLLM_VERSION,
    KNOWN_VLLM_VERSIONS,
    UnknownVllmVersionError,
    normalize_vllm_version,
    resolve_vllm_version,
    version_at_least,
)


def test_known_versions_and_default_is_newest() -> None:
    assert KNOWN_VLLM_VERSIONS == ("0.26", "0.33", "0.34")
    assert DEFAULT_VLLM_VERSION == "0.34"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.26", "0.26"),
        ("0.26.0", "0.26"),
        ("0.33.0", "0.33"),
        ("0.34", "0.34"),
        ("0.34.0", "0.34"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize_vllm_version(text) == expected


@pytest.mark.parametrize("bad", ["0.99", "0.34.1", "", "v0.34", 0.34, None, True])
def test_unknown_version_is_one_line_listing_known(bad: object) -> None:
    with pytest.raises(UnknownVllmVersionError) as info:
        normalize_vllm_version(bad, field="--vllm")
    assert isinstance(info.value, InvalidFieldError)
    assert isinstance(info.value, ValueError)
    text = str(info.value)
    assert text.startswith("--vllm: unknown vLLM version")
    assert text.endswith("(known: 0.26, 0.33, 0.34)")
    assert "\n" not in text
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == text


def test_precedence_flag_then_file_then_default() -> None:
    assert resolve_vllm_version("0.26", "0.33") == "0.26"
    assert resolve_vllm_version(None, "0.33.0") == "0.33"
    assert resolve_vllm_version(None, None) == "0.34"
    with pytest.raises(UnknownVllmVersionError, match=r"^vllm_version: "):
        resolve_vllm_version(None, "0.1")


def test_version_at_least() -> None:
    assert version_at_least("0.34", "0.33")
    assert version_at_least("0.33.0", "0.33")
    assert not version_at_least("0.26", "0.33")


def test_the_error_names_its_field_and_keeps_the_known_versions() -> None:
    with pytest.raises(UnknownVllmVersionError) as info:
        normalize_vllm_version("1.0")
    assert info.value.field == "vllm_version"
    assert info.value.known == KNOWN_VLLM_VERSIONS
    with pytest.raises(UnknownVllmVersionError) as flag:
        resolve_vllm_version("1.0", "0.26")
    assert flag.value.field == "--vllm"
    with pytest.raises(UnknownVllmVersionError) as in_file:
        resolve_vllm_version(None, "1.0", file_field="trace.vllm_version")
    assert in_file.value.field == "trace.vllm_version"
