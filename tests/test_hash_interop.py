"""The request-file reader: defaults, embeddings forms, string sharing."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pytest

from kvpure.cli import main
from kvpure.errors import InvalidFieldError
from kvpure.hashing import VLLM_0_33, HashScheme, hash_prompt
from kvpure.interop.hashing import hash_case_from_json, hash_request_from_json


def test_defaults_and_null_lora_path() -> None:
    case = hash_case_from_json({"block_size": 2, "prompt_token_ids": [1, 2, 3], "lora_name": "n"})
    assert case.block_size == 2
    assert case.appended_output_tokens == ()
    request = case.request
    assert request.lora_path == ""  # vLLM's LoRARequest default
    assert request.cache_salt is None
    assert request.mm_features == ()
    assert request.prompt_embeds is None
    scheme = HashScheme.from_seed(algorithm="sha256", block_size=2, seed="0", profile=VLLM_0_33)
    first = hashlib.sha256(
        pickle.dumps((scheme.none_hash, (1, 2), (("lora", "n", ""),)), protocol=5)
    ).digest()
    assert hash_prompt(scheme, request)[0] == first


def test_single_token_steps_and_dtype_row_size() -> None:
    case = hash_case_from_json(
        {
            "block_size": 1,
            "prompt_token_ids": None,
            "prompt_embeds": {"dtype": "bfloat16", "shape": [2, 3], "hex": "ab" * 12},
            "appended_output_tokens": [5, [6, 7]],
        }
    )
    assert case.appended_output_tokens == ((5,), (6, 7))
    embeds = case.request.prompt_embeds
    assert embeds is not None
    assert embeds.row_size_bytes == 6
    assert embeds.num_rows == 2


@pytest.mark.parametrize(
    ("embeds", "field"),
    [
        ({"recipe": "torch.randn(4, 2)", "shape": [4, 2]}, "prompt_embeds.recipe"),
        (
            {"recipe": "torch.arange(8, dtype=float32).reshape(4, 2) / 7.0", "shape": [2, 4]},
            "prompt_embeds.recipe",
        ),
        ({"shape": [1, 1]}, "prompt_embeds"),
        ({"dtype": "float32", "shape": [1, 1], "hex": "zz"}, "prompt_embeds.hex"),
        ({"dtype": "float32", "shape": "1", "hex": "00"}, "prompt_embeds.shape"),
    ],
)
def test_bad_embeddings(embeds: object, field: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        hash_request_from_json({"prompt_token_ids": None, "prompt_embeds": embeds})
    assert info.value.field == field


def test_share_equal_strings() -> None:
    data = json.loads('{"prompt_token_ids": [1], "lora_name": "tenant", "cache_salt": "tenant"}')
    distinct = hash_request_from_json(data)
    assert distinct.lora_name == distinct.cache_salt
    assert distinct.lora_name is not distinct.cache_salt
    shared = hash_request_from_json(data, share_equal_strings=True)
    assert shared.lora_name is shared.cache_salt


@pytest.mark.parametrize("share", [False, True])
def test_cli_share_equal_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], share: bool
) -> None:
    path = tmp_path / "r.json"
    path.write_text(
        '{"block_size": 2, "prompt_token_ids": [1, 2], "lora_name": "tenant", '
        '"cache_salt": "tenant"}'
    )
    argv = ["hash", str(path), "--seed", "0", "--vllm", "0.26", "--json"] + (
        ["--share-equal-strings"] if share else []
    )
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)["block_hashes"]
    none_hash = hashlib.sha256(pickle.dumps("0", protocol=5)).digest()
    name = "".join(["ten", "ant"])
    salt = name if share else "".join(["ten", "ant"])
    payload = pickle.dumps((none_hash, (1, 2), (name, salt)), protocol=5)
    assert got == [hashlib.sha256(payload).hexdigest()]
