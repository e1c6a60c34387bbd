"""vLLM 0.34's handshake (``PrefixHashConfig``), the frontend-hash count rule,
``truncate_block_hashes`` and ``kvpure hash --vllm/--lookahead``.

Expected values: vLLM 0.34.0's source (``vllm/v1/engine/__init__.py`` ``PrefixHashConfig``;
``vllm/v1/core/kv_cache_utils.py`` ``frontend_block_hashes``: the count must be
``max(prompt_len - num_lookahead_tokens, 0) // hash_block_size``; ``vllm/v1/request.py``
``Request.truncate_block_hashes``: keep ``max(0, num_tokens - L) // hash_block_size``) and
the goldens of ``tests/data/vllm-0.34.0/hashes_lookahead.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    VLLM_0_34,
    BlockHash,
    HashRequest,
    HashScheme,
    frontend_block_hashes,
    hash_prompt,
    num_frontend_block_hashes,
    router_block_hashes,
    truncate_block_hashes,
)
from tests.conftest import DATA_DIR

LOOKAHEAD: dict[str, Any] = json.loads(
    (DATA_DIR / "vllm-0.34.0" / "hashes_lookahead.json").read_text()
)
PLAIN = next(c for c in LOOKAHEAD["cases"] if c["name"] == "plain_70_tokens_bs16_partial_tail")
SEED_0_SHA256_NONE_HASH = HashScheme.from_seed(
    algorithm="sha256", block_size=16, seed="0"
).none_hash


# --- PrefixHashConfig -----------------------------------------------------------------------


@pytest.mark.parametrize("as_hex", [True, False])
def test_a_scheme_from_the_handshake(as_hex: bool) -> None:
    none_hash = SEED_0_SHA256_NONE_HASH.hex() if as_hex else SEED_0_SHA256_NONE_HASH
    config = {
        "hash_algo": "sha256",
        "hash_block_size": 16,
        "none_hash": none_hash,
        "num_lookahead_tokens": 1,
    }
    scheme = HashScheme.from_prefix_hash_config(config)
    assert scheme == HashScheme.from_seed(
        algorithm="sha256", block_size=16, seed="0", num_hash_lookahead_tokens=1
    )
    assert scheme.profile is VLLM_0_34
    request = HashRequest(prompt_token_ids=tuple(PLAIN["prompt_token_ids"]))
    assert [h.hex() for h in hash_prompt(scheme, request)] == PLAIN["hashes"]["L1/sha256"][
        "block_hashes"
    ]
    older = HashScheme.from_prefix_hash_config(config, profile=VLLM_0_33)
    assert older.profile is VLLM_0_33


def test_the_handshake_lookahead_is_optional() -> None:
    config = {"hash_algo": "xxhash", "hash_block_size": 8, "none_hash": b"\x01" * 16}
    scheme = HashScheme.from_prefix_hash_config(config)
    assert scheme.num_hash_lookahead_tokens == 0
    assert (scheme.algorithm, scheme.block_size, scheme.none_hash) == ("xxhash", 8, b"\x01" * 16)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"hash_algo": "sha256", "hash_block_size": 16, "none_hash": "00", "salt": 1}, "salt"),
        ({"hash_algo": "sha256", "hash_block_size": 16}, "none_hash"),
        ({"hash_block_size": 16, "none_hash": "00"}, "hash_algo"),
        ({"hash_algo": "sha256", "none_hash": "00"}, "hash_block_size"),
        ({"hash_algo": "sha256", "hash_block_size": 16, "none_hash": "zz"}, "none_hash"),
        ({"hash_algo": "sha256", "hash_block_size": 16, "none_hash": 5}, "none_hash"),
        ({"hash_algo": 1, "hash_block_size": 16, "none_hash": "00"}, "hash_algo"),
        ({"hash_algo": "sha256", "hash_block_size": True, "none_hash": "00"}, "hash_block_size"),
        ({"hash_algo": "sha256", "hash_block_size": 0, "none_hash": "00"}, "block_size"),
        ({"hash_algo": "sha256", "hash_block_size": 16, "none_hash": ""}, "none_hash"),
        (
            {
                "hash_algo": "sha256",
                "hash_block_size": 16,
                "none_hash": "00",
                "num_lookahead_tokens": -1,
            },
            "num_hash_lookahead_tokens",
        ),
        (
            {
                "hash_algo": "sha256",
                "hash_block_size": 16,
                "none_hash": "00",
                "num_lookahead_tokens": 1.0,
            },
            "num_lookahead_tokens",
        ),
    ],
)
def test_a_bad_handshake_is_refused_naming_the_key(config: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidFieldError) as caught:
        HashScheme.from_prefix_hash_config(config)
    assert caught.value.field.endswith(field)


def test_the_handshake_refuses_md5_and_lookahead_under_026() -> None:
    with pytest.raises(ValueError, match="md5"):
        HashScheme.from_prefix_hash_config(
            {"hash_algo": "md5", "hash_block_size": 16, "none_hash": "00"}
        )
    config = {
        "hash_algo": "sha256",
        "hash_block_size": 16,
        "none_hash": "00",
        "num_lookahead_tokens": 1,
    }
    with pytest.raises(InvalidFieldError):
        HashScheme.from_prefix_hash_config(config, profile=VLLM_0_26)


# --- the count rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "size", "lookahead", "count"),
    [(64, 16, 0, 4), (64, 16, 1, 3), (65, 16, 1, 4), (70, 16, 3, 4), (2, 16, 3, 0), (0, 1, 0, 0)],
)
def test_the_number_of_hashes_a_router_sends(n: int, size: int, lookahead: int, count: int) -> None:
    assert (
        num_frontend_block_hashes(n, hash_block_size=size, num_lookahead_tokens=lookahead) == count
    )


@given(st.integers(0, 80), st.integers(1, 9), st.integers(0, 4))
def test_the_count_is_the_prompts_hash_count(n: int, size: int, lookahead: int) -> None:
    scheme = HashScheme.from_seed(
        algorithm="sha256", block_size=size, seed="0", num_hash_lookahead_tokens=lookahead
    )
    request = HashRequest(prompt_token_ids=tuple(range(n)))
    hashes = router_block_hashes(scheme, request)
    assert len(hashes) == num_frontend_block_hashes(
        n, hash_block_size=size, num_lookahead_tokens=lookahead
    )
    assert frontend_block_hashes(hashes, n, scheme) == tuple(hashes)
    assert frontend_block_hashes([*hashes, b"x" * 32], n, scheme) is None
    assert frontend_block_hashes(None, n, scheme) is None
    assert frontend_block_hashes(hashes, n, None) is None


def test_truncate_block_hashes_as_vllm_034() -> None:
    hashes = pvector([BlockHash(bytes([i]) * 32) for i in range(5)])
    # 5 hashes of block 4; cut back to 13 tokens: max(0, 13 - L) // 4
    assert truncate_block_hashes(hashes, 13, 4) == hashes[:3]
    assert truncate_block_hashes(hashes, 13, 4, 1) == hashes[:3]
    assert truncate_block_hashes(hashes, 13, 4, 2) == hashes[:2]
    assert truncate_block_hashes(hashes, 2, 4, 3) == pvector()
    assert truncate_block_hashes(hashes, 40, 4) == hashes  # never longer
    assert truncate_block_hashes(list(hashes), 8, 4) == hashes[:2]
    with pytest.raises(InvalidFieldError):
        truncate_block_hashes(hashes, -1, 4)
    with pytest.raises(InvalidFieldError):
        truncate_block_hashes(hashes, 4, 0)


# --- the command ----------------------------------------------------------------------------


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(data))
    return path


def _request_file(tmp_path: Path, **extra: object) -> Path:
    return _write(tmp_path, {"prompt_token_ids": PLAIN["prompt_token_ids"], **extra})


def _run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("lookahead", [1, 3])
@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"])
def test_hash_with_lookahead_gives_vllm_034s_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lookahead: int, algo: str
) -> None:
    path = _request_file(tmp_path)
    argv = ["hash", str(path), "--algo", algo, "--seed", "0", "--vllm", "0.34"]
    out = _run_json(capsys, [*argv, "--lookahead", str(lookahead), "--json"])
    assert out["block_hashes"] == PLAIN["hashes"][f"L{lookahead}/{algo}"]["block_hashes"]
    assert out["vllm_version"] == "0.34"
    assert out["scheme"]["num_hash_lookahead_tokens"] == lookahead
    assert out["scheme"]["profile"] == "vllm-0.34"
    assert out["scheme"]["block_size"] == 16  # the default block size


def test_the_flag_wins_over_the_files_lookahead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _request_file(tmp_path, num_hash_lookahead_tokens=3, block_size=16)
    base = ["hash", str(path), "--seed", "0", "--json"]
    from_file = _run_json(capsys, base)
    assert from_file["block_hashes"] == PLAIN["hashes"]["L3/sha256"]["block_hashes"]
    assert from_file["scheme"]["num_hash_lookahead_tokens"] == 3
    flagged = _run_json(capsys, [*base, "--lookahead", "1"])
    assert flagged["block_hashes"] == PLAIN["hashes"]["L1/sha256"]["block_hashes"]
    plain = _run_json(capsys, [*base, "--lookahead", "0"])
    assert len(plain["block_hashes"]) == 70 // 16


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--vllm", "0.26", "--lookahead", "1"], "num_hash_lookahead_tokens"),
        (["--profile", "vllm-0.26", "--lookahead", "1"], "num_hash_lookahead_tokens"),
        (["--vllm", "0.34", "--profile", "vllm-0.33"], "--profile"),
        (["--vllm", "0.99"], "unknown vLLM version '0.99' (known: 0.26, 0.33, 0.34)"),
        (["--lookahead", "-1"], "--lookahead"),
    ],
)
def test_bad_version_and_lookahead_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    path = _request_file(tmp_path)
    assert main(["hash", str(path), "--seed", "0", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("kvpure: error: ")
    assert words in captured.err


def test_profile_is_an_alias_of_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _request_file(tmp_path)
    base = ["hash", str(path), "--seed", "0", "--json"]
    by_profile = _run_json(capsys, [*base, "--profile", "vllm-0.33"])
    by_flag = _run_json(capsys, [*base, "--vllm", "0.33.0"])
    both = _run_json(capsys, [*base, "--vllm", "0.33", "--profile", "vllm-0.33"])
    assert by_profile == by_flag == both
    assert by_flag["vllm_version"] == "0.33"
    default = _run_json(capsys, base)
    assert default["vllm_version"] == "0.34"


def test_034_refuses_an_id_past_int32_and_033_hashes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, {"block_size": 2, "prompt_token_ids": [1, 2, 3, 2**31]})
    assert main(["hash", str(path), "--seed", "0", "--vllm", "0.34"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "prompt_token_ids[3]" in err
    out = _run_json(capsys, ["hash", str(path), "--seed", "0", "--vllm", "0.33", "--json"])
    assert len(out["block_hashes"]) == 2


def test_the_text_report_names_the_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _request_file(tmp_path)
    assert main(["hash", str(path), "--seed", "0", "--lookahead", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("vLLM 0.34: 4 block hashes")
    assert "lookahead 1" in first


def test_the_files_vllm_version_applies_unless_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _request_file(tmp_path, vllm_version="0.26.0")
    base = ["hash", str(path), "--seed", "0", "--json"]
    assert _run_json(capsys, base)["vllm_version"] == "0.26"
    assert _run_json(capsys, [*base, "--vllm", "0.34"])["vllm_version"] == "0.34"
    assert _run_json(capsys, [*base, "--profile", "vllm-0.33"])["vllm_version"] == "0.33"
    bad = _request_file(tmp_path, vllm_version="0.99")
    assert main(["hash", str(bad), "--seed", "0"]) == 2
    assert "vllm_version: unknown vLLM version '0.99'" in capsys.readouterr().err


def test_help_lists_vllm_and_lookahead(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["hash", "--help"])
    out = capsys.readouterr().out
    assert "--vllm VERSION" in out
    assert "--lookahead L" in out
