"""A Sentence Transformers ``modules.json`` in the model folder makes vLLM run the pooling runner.

Expected values: each release's own ``get_pooling_config``
(vllm/transformers_utils/config.py), which ``ModelConfig._get_default_runner_type``
asks before the architecture, run on folders made from the same ``modules.json``
cases (tests/data/vllm-X-oracle/st_pooling.json, written by
tools/vllm_oracle/st_pooling_vllm.py); and vLLM's ``VllmConfig.__post_init__``:
a pooling runner turns async scheduling off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli.plan_api import plan_deployment
from kvpure.errors import InvalidFieldError
from kvpure.models.sentence_transformers import MAX_MODULES, read_module_types
from kvpure.serve.rules import is_pooling_runner, serve_rules

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
RELEASES = ("0.26", "0.33", "0.34")
QWEN3 = ROOT / "examples" / "qwen3_8b.json"


def _oracle(release: str) -> dict[str, dict[str, Any]]:
    path = DATA / f"vllm-{release}.0-oracle" / "st_pooling.json"
    cases: dict[str, dict[str, Any]] = json.loads(path.read_text())["cases"]
    return cases


def _folder(root: Path, modules: Any, pooling: Any = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(QWEN3.read_text())
    if modules is not None:
        (root / "modules.json").write_text(json.dumps(modules))
    if pooling is not None:
        (root / "1_Pooling").mkdir()
        (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return root


@pytest.mark.parametrize("release", RELEASES)
def test_the_pooling_runner_follows_vllms_get_pooling_config(release: str, tmp_path: Path) -> None:
    cases = _oracle(release)
    assert len(cases) == 8
    for index, (name, case) in enumerate(cases.items()):
        folder = _folder(tmp_path / str(index), case["modules"], case["pooling_config"])
        types = read_module_types(folder)
        got = is_pooling_runner(serve_rules(release), "Qwen3ForCausalLM", types)
        assert got is case["pooling_runner"], name


def test_the_releases_differ_on_sentence_transformers_5_types() -> None:
    name = "v5 pooling type"
    assert [_oracle(release)[name]["pooling_runner"] for release in RELEASES] == [
        False,
        True,
        True,
    ]


@pytest.mark.parametrize("release", RELEASES)
def test_a_plan_of_an_embedding_folder_turns_async_scheduling_off(
    release: str, tmp_path: Path
) -> None:
    case = _oracle(release)["Qwen3-Embedding (v2 types, last token, normalize)"]
    folder = _folder(tmp_path / "emb", case["modules"], case["pooling_config"])
    plain = _folder(tmp_path / "plain", None)
    embedding = plan_deployment(folder, vllm=release, kv_cache_memory="24GiB")
    generative = plan_deployment(plain, vllm=release, kv_cache_memory="24GiB")
    assert embedding.serve is not None
    assert generative.serve is not None
    assert embedding.serve["async_scheduling"].value is False
    assert embedding.serve["async_scheduling"].note == "pooling model"
    assert generative.serve["async_scheduling"].value is True
    # the config.json path names the same folder
    by_file = plan_deployment(folder / "config.json", vllm=release, kv_cache_memory="24GiB")
    assert by_file.serve is not None
    assert by_file.serve["async_scheduling"].value is False


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("{not json", "modules.json"),
        ('{"type": "x"}', "modules.json"),
        ('[{"path": ""}]', "modules.json[0].type"),
        ("[1]", "modules.json[0].type"),
        ('[{"type": 5}]', "modules.json[0].type"),
        (json.dumps([{"type": "t"}] * (MAX_MODULES + 1)), "modules.json"),
        ("[" * 100_000, "modules.json"),
    ],
)
def test_a_bad_modules_json_is_a_typed_error(content: str, field: str, tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(content)
    with pytest.raises(InvalidFieldError) as info:
        read_module_types(tmp_path)
    assert info.value.field == field


def test_a_huge_modules_json_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_bytes(b" " * (2**20 + 1))
    with pytest.raises(InvalidFieldError, match="too large"):
        read_module_types(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_named_modules_json_is_refused_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "modules.json")
    with pytest.raises(InvalidFieldError, match="not a regular file"):
        read_module_types(tmp_path)


def test_the_cli_prints_one_line_and_exits_2_on_a_bad_modules_json(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "m", None)
    (folder / "modules.json").write_text('[{"path": ""}]')
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-m", "kvpure", "plan", str(folder), "--kv-cache-memory", "24GiB"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1
    assert "modules.json[0].type" in run.stderr


def test_the_bounds_themselves_are_read(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(json.dumps([{"type": "t"}] * MAX_MODULES))
    assert read_module_types(tmp_path) == ("t",) * MAX_MODULES
    (tmp_path / "modules.json").write_text("[]".ljust(2**20))
    assert read_module_types(tmp_path) == ()
    assert read_module_types(tmp_path / "missing") == ()
