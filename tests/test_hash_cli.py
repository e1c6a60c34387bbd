"""``kvpure hash``: in-process through ``kvpure.cli.main`` and one real subprocess."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.interop.hashing import CASE_KEYS
from tests.conftest import GOLDEN_026, GOLDEN_033

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "request.json"
G026 = json.loads((GOLDEN_026 / "hashes.json").read_text())
G033 = json.loads((GOLDEN_033 / "hashes.json").read_text())


def _golden_case(golden: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in golden["cases"] if c["name"] == name)
    return found


def _write(tmp_path: Path, data: object, name: str = "request.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _request_part(case: dict[str, Any]) -> dict[str, Any]:
    """A golden case without its expected outputs: what a request file holds."""
    return {key: value for key, value in case.items() if key in CASE_KEYS}


def _json_hashes(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[str]:
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"block_hashes", "none_hash", "event_block_hashes", "scheme"} <= set(out)
    hashes: list[str] = out["block_hashes"]
    return hashes


@pytest.mark.parametrize(
    "name",
    ["incremental_decode_bs16", "prompt_embeds_with_tokens_and_mm_bs16", "mm_two_images_bs16"],
)
@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"])
@pytest.mark.parametrize(("golden", "profile"), [(G026, "vllm-0.26"), (G033, "vllm-0.33")])
def test_golden_cases_as_request_files(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    algo: str,
    golden: dict[str, Any],
    profile: str,
) -> None:
    case = _golden_case(golden, name)
    path = _write(tmp_path, _request_part(case))
    argv = ["hash", str(path), "--algo", algo, "--seed", "0", "--profile", profile, "--json"]
    assert _json_hashes(capsys, argv) == case["hashes"][algo]["block_hashes"]


def test_example_request_defaults_to_sha256_and_vllm_026(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = _golden_case(G026, "lora_salt_mm_bs16")["hashes"]["sha256"]["block_hashes"]
    argv = ["hash", str(EXAMPLE), "--seed", "0", "--vllm", "0.26", "--json"]
    assert _json_hashes(capsys, argv) == expected
    expected_033 = _golden_case(G033, "lora_salt_mm_bs16")["hashes"]["sha256"]["block_hashes"]
    argv = ["hash", str(EXAMPLE), "--seed", "0", "--profile", "vllm-0.33", "--json"]
    assert _json_hashes(capsys, argv) == expected_033


def test_033_without_seed_uses_the_fixed_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokens = list(range(8))
    path = _write(tmp_path, {"block_size": 8, "prompt_token_ids": tokens})
    hashes = _json_hashes(capsys, ["hash", str(path), "--profile", "vllm-0.33", "--json"])
    none_hash = bytes.fromhex(G033["none_hash_without_seed"]["sha256"])
    payload = pickle.dumps((none_hash, tuple(tokens), None), protocol=pickle.HIGHEST_PROTOCOL)
    assert hashes == [hashlib.sha256(payload).hexdigest()]


def test_readable_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hash", str(EXAMPLE), "--seed", "0", "--vllm", "0.26"]) == 0
    out = capsys.readouterr().out
    expected = _golden_case(G026, "lora_salt_mm_bs16")["hashes"]["sha256"]["block_hashes"]
    assert "4 block hashes" in out
    assert G026["none_hash"]["sha256"] in out
    for block_hash in expected:
        assert block_hash in out


def test_random_none_hash_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hash", str(EXAMPLE), "--vllm", "0.26"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--seed" in err
    assert "--random-none-hash" in err
    argv = ["hash", str(EXAMPLE), "--vllm", "0.26", "--random-none-hash", "--json"]
    first = _json_hashes(capsys, argv)
    second = _json_hashes(capsys, argv)
    assert len(first) == len(second) == 4
    assert first != second


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"block_size": 0, "prompt_token_ids": [1]}, "block_size"),
        ({"block_size": 4, "prompt_token_ids": [1, "x"]}, "prompt_token_ids[1]"),
        ({"block_size": 4, "prompt_token_ids": [1], "lora_name": 3}, "lora_name"),
        (
            {
                "block_size": 4,
                "prompt_token_ids": list(range(10)),
                "mm_features": [
                    {"identifier": "a", "offset": 0, "length": 4},
                    {"identifier": "b", "offset": 2, "length": 1},
                ],
            },
            "mm_features[1].offset",
        ),
        (
            {
                "block_size": 4,
                "prompt_token_ids": [1],
                "mm_features": [{"identifier": "a", "offset": -1, "length": 4}],
            },
            "mm_features[0].offset",
        ),
        (
            {
                "block_size": 4,
                "prompt_token_ids": None,
                "prompt_embeds": {"dtype": "float32", "shape": [2, 2], "hex": "00" * 15},
            },
            "prompt_embeds.hex",
        ),
        (
            {
                "block_size": 4,
                "prompt_token_ids": None,
                "prompt_embeds": {"dtype": "complex7", "shape": [1, 1], "hex": "00"},
            },
            "prompt_embeds.dtype",
        ),
        (
            {"block_size": 4, "prompt_token_ids": [1], "appended_output_tokens": [[1], "x"]},
            "appended_output_tokens[1]",
        ),
        ("just text", "request"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: object, field: str
) -> None:
    path = _write(tmp_path, data)
    assert main(["hash", str(path), "--seed", "0", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert field in captured.err


def test_missing_file_bad_json_and_unknown_algo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hash", str(tmp_path / "nope.json"), "--seed", "0"]) == 2
    assert "nope.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["hash", str(bad), "--seed", "0"]) == 2
    assert "invalid JSON" in capsys.readouterr().err
    assert main(["hash", str(EXAMPLE), "--algo", "md5"]) == 2
    assert "md5" in capsys.readouterr().err


def test_hex_embeddings_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The golden's embeddings, written out as raw little-endian float32 bytes.
    case = dict(_golden_case(G026, "prompt_embeds_only_bs16"))
    data = array("f", (i / 7.0 for i in range(40 * 8))).tobytes()
    case["prompt_embeds"] = {"dtype": "float32", "shape": [40, 8], "hex": data.hex()}
    path = _write(tmp_path, _request_part(case))
    argv = ["hash", str(path), "--seed", "0", "--algo", "sha256_cbor", "--vllm", "0.26", "--json"]
    assert _json_hashes(capsys, argv) == case["hashes"]["sha256_cbor"]["block_hashes"]


def test_python_dash_m_kvpure_hash() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvpure",
            "hash",
            str(EXAMPLE),
            "--seed",
            "0",
            "--vllm",
            "0.26",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    expected = _golden_case(G026, "lora_salt_mm_bs16")["hashes"]["sha256"]["block_hashes"]
    assert json.loads(result.stdout)["block_hashes"] == expected
