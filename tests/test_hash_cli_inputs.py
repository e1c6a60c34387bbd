"""``kvpure hash``: typos refused, --block-size, a bare list of token ids, standard
input, and the JSON a router needs; expected values from vLLM 0.26's hash golden."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.interop.hashing import hash_case_from_json

GOLDEN = json.loads(
    (Path(__file__).parent / "data" / "vllm-0.26.0" / "hashes.json").read_text(encoding="utf-8")
)
PLAIN = next(case for case in GOLDEN["cases"] if case["name"] == "plain_64_tokens_bs16")
ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")


def _hash_json(stdin: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "kvpure", "hash", "-", "--seed", "0", "--json", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


@pytest.mark.parametrize("algo", ALGOS)
def test_a_bare_list_on_stdin_with_block_size_gives_vllms_hashes(algo: str) -> None:
    out = _hash_json(
        json.dumps(PLAIN["prompt_token_ids"]),
        "--block-size",
        "16",
        "--algo",
        algo,
        "--vllm",
        "0.26",
    )
    assert out["block_hashes"] == PLAIN["hashes"][algo]["block_hashes"]
    assert out["none_hash"] == GOLDEN["none_hash"][algo]
    assert out["vllm_version"] == "0.26"
    assert out["scheme"] == {
        "algorithm": algo,
        "block_size": 16,
        "profile": "vllm-0.26",
        "num_hash_lookahead_tokens": 0,
        "seed": "0",
    }
    events = out["event_block_hashes"]
    assert isinstance(events, list)
    assert len(events) == len(PLAIN["hashes"][algo]["block_hashes"])


def test_event_ints_are_vllms() -> None:
    out = _hash_json(json.dumps(PLAIN["prompt_token_ids"]), "--block-size", "16", "--algo",
                     "sha256_cbor")  # fmt: skip
    events = out["event_block_hashes"]
    assert isinstance(events, list)
    assert events[0] == PLAIN["int_block_hash_first_block"]


@pytest.mark.parametrize(
    ("key", "closest"),
    [("lora_nme", "lora_name"), ("cache_slat", "cache_salt"), ("mm_feature", "mm_features")],
)
def test_a_misspelt_key_is_refused_naming_the_closest(key: str, closest: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        hash_case_from_json({"block_size": 2, "prompt_token_ids": [1, 2], key: "x"})
    assert info.value.field == key
    assert f"did you mean {closest!r}" in str(info.value)


def test_the_command_refuses_a_typo_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"block_size": 2, "prompt_token_ids": [1, 2], "lora_nme": "a"}))
    assert main(["hash", str(path), "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvpure: error: lora_nme: unknown key; did you mean 'lora_name'?")
    assert len(err.strip().splitlines()) == 1


def test_block_size_is_required_somewhere_and_must_agree() -> None:
    with pytest.raises(InvalidFieldError, match="--block-size"):
        hash_case_from_json([1, 2, 3])
    with pytest.raises(InvalidFieldError, match="disagrees"):
        hash_case_from_json({"block_size": 16, "prompt_token_ids": [1]}, block_size=8)
    assert hash_case_from_json([1, 2, 3], block_size=2).block_size == 2


def test_a_non_string_seed_is_a_typed_error_in_a_users_process() -> None:
    # a subprocess: what users get, without the test suite's beartype hook
    code = (
        "from kvpure import HashScheme\n"
        "from kvpure.errors import InvalidFieldError\n"
        "try:\n"
        "    HashScheme.from_seed(algorithm='sha256', block_size=16, seed=0)\n"
        "except InvalidFieldError as err:\n"
        "    print(err.field, 'PYTHONHASHSEED is a string' in str(err))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "seed True"
