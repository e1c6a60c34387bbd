"""JSON bounds checked after a C parse (no per-number Python hook): depth and digits."""

from __future__ import annotations

import json
import sys

import pytest

from kvpure.cache.json_stream import parse_json_value
from kvpure.cli.input_files import parse_json_text
from kvpure.errors import InvalidFieldError
from kvpure.json_bounds import check_bounds, int_hook_needed


def _check(data: object) -> str | None:
    return check_bounds(data, max_depth=3, max_int_digits=4)


@pytest.mark.parametrize(
    ("data", "wrong"),
    [
        ([1, 2, 9999], None),
        ([1, 2, 10000], "an integer of 5 digits (at most 4)"),
        ([1, -10000], "an integer of 5 digits (at most 4)"),
        ({"a": [1, "x", 12345, None]}, "an integer of 5 digits (at most 4)"),
        ({"a": {"b": 123456}}, "an integer of 6 digits (at most 4)"),
        (99999, "an integer of 5 digits (at most 4)"),
        ([True, 1.5e300, "9" * 50, None], None),
        ([[[1]]], None),
        ([[[[1]]]], "nesting"),
        ({"a": {"b": {"c": {}}}}, "nesting"),
        ([[], [[]]], None),
        ([[], [[[]]]], "nesting"),
        ("x", None),
    ],
)
def test_bounds(data: object, wrong: str | None) -> None:
    assert _check(data) == wrong


def test_forty_digits_pass_and_forty_one_do_not() -> None:
    assert parse_json_value('{"a": [' + "9" * 40 + "]}", "w") == {"a": [10**40 - 1]}
    with pytest.raises(InvalidFieldError, match="41 digits"):
        parse_json_value('{"a": [' + "9" * 41 + "]}", "w")
    with pytest.raises(InvalidFieldError, match="41 digits"):
        parse_json_text("c.json", '{"a": {"b": -' + "9" * 41 + "}}")


def test_thousands_of_digits_are_refused_by_the_parser() -> None:
    with pytest.raises(InvalidFieldError, match="digits"):
        parse_json_value("[" + "9" * 5000 + "]", "w")
    with pytest.raises(InvalidFieldError, match="digits"):
        parse_json_text("c.json", "[" + "9" * 5000 + "]")


def test_without_an_interpreter_digit_limit_the_hook_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 0)
    assert int_hook_needed()
    with pytest.raises(InvalidFieldError, match="digits"):
        parse_json_value("[" + "9" * 5000 + "]", "w")
    assert parse_json_text("c.json", json.dumps([1, [2]])) == [1, [2]]


def test_a_long_flat_token_list_is_parsed_unchanged() -> None:
    ids = list(range(200_000))
    assert parse_json_value(json.dumps({"prompt_token_ids": ids}), "w") == {"prompt_token_ids": ids}
