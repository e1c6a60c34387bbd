"""Models named by hub id read from a fake local Hugging Face cache, and --architecture-as.

The cache layout is huggingface_hub's (``models--org--name/refs/main`` holds
the snapshot's revision; ``snapshots/<rev>/config.json``) and the folder is
chosen as huggingface_hub chooses it (HF_HUB_CACHE, else HF_HOME/hub, else
XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvpure.cli import main
from kvpure.models.architectures import SUPPORTED_ARCHITECTURES, model_layout
from kvpure.models.config import parse_model_config
from kvpure.models.errors import ModelNotCachedError, UnknownArchitectureError
from kvpure.models.hf_cache import (
    config_argument,
    hub_cache_dir,
    is_model_id,
    resolve_model_config,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "model_configs"
REV = "0123456789abcdef0123456789abcdef01234567"
_ENV_KEYS = ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def cache_model(
    hub: Path, repo: str, config: dict[str, Any], rev: str = REV, ref: bool = True
) -> Path:
    org, name = repo.split("/")
    folder = hub / f"models--{org}--{name}"
    snapshot = folder / "snapshots" / rev
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    if ref:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(rev)
    return snapshot / "config.json"


def config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / name).read_text())
    return data


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in _ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_the_cache_folder_follows_huggingface_hub(tmp_path: Path) -> None:
    assert hub_cache_dir({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert hub_cache_dir({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}) == Path("/b/hub")
    assert hub_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert hub_cache_dir({}) == Path("~/.cache/huggingface/hub").expanduser()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Qwen/Qwen3-8B", True),
        ("meta-llama/Llama-3.1-8B-Instruct@main", True),
        ("config.json", False),
        ("examples/llama3_8b.json", False),
        ("a/b/c", False),
        ("../x", False),
        ("/abs/path", False),
        ("-", False),
    ],
)
def test_what_counts_as_a_hub_id(text: str, expected: bool) -> None:
    assert is_model_id(text) is expected


def test_refs_main_names_the_snapshot(hub: Path) -> None:
    path = cache_model(hub, "Qwen/Qwen3-30B-A3B", config("qwen3_30b_a3b.json"))
    cache_model(hub, "Qwen/Qwen3-30B-A3B", {"architectures": ["Other"]}, rev="f" * 40, ref=False)
    assert resolve_model_config("Qwen/Qwen3-30B-A3B") == path
    assert resolve_model_config("Qwen/Qwen3-30B-A3B@" + "f" * 40).parent.name == "f" * 40


def test_home_cache_when_no_variable_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in _ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = cache_model(tmp_path / ".cache" / "huggingface" / "hub", "org/m", {"architectures": []})
    assert resolve_model_config("org/m") == path
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    other = cache_model(tmp_path / "hf" / "hub", "org/m", {"architectures": []})
    assert resolve_model_config("org/m") == other


def test_a_single_snapshot_without_refs_is_used_and_several_are_refused(hub: Path) -> None:
    cache_model(hub, "org/m", {"architectures": []}, ref=False)
    assert resolve_model_config("org/m").parent.name == REV
    cache_model(hub, "org/m", {"architectures": []}, rev="b" * 40, ref=False)
    with pytest.raises(ModelNotCachedError, match="several snapshots") as info:
        resolve_model_config("org/m")
    assert f"org/m@{'b' * 40}" in str(info.value)


def test_a_missing_model_names_every_path_looked_at(hub: Path) -> None:
    with pytest.raises(ModelNotCachedError) as info:
        resolve_model_config("org/absent")
    message = str(info.value)
    assert str(hub / "models--org--absent" / "refs" / "main") in message
    assert "never downloads" in message
    assert "\n" not in message
    assert info.value.looked[0].endswith("refs/main")


def test_a_corrupt_ref_is_not_followed(hub: Path) -> None:
    cache_model(hub, "org/m", {"architectures": []})
    (hub / "models--org--m" / "refs" / "main").write_text("../../../etc\n" * 50)
    # The ref is ignored; the one snapshot is still found by listing.
    assert resolve_model_config("org/m").parent.name == REV


def test_local_paths_win_over_hub_ids(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "m").mkdir(parents=True)
    assert config_argument("org/m") == "org/m"
    assert config_argument("-") == "-"
    assert config_argument("nothing.json") == "nothing.json"


def test_plan_reads_a_cached_model(hub: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_model(hub, "Qwen/Qwen3-Next-80B-A3B-Instruct", config("qwen3_next_80b_a3b.json"))
    code = main(
        ["plan", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--kv-cache-memory", "40GiB", "--json"]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["architecture"] == "Qwen3NextForCausalLM"


def test_plan_of_a_missing_model_is_one_line_and_exit_2(
    hub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "org/absent", "--kv-cache-memory", "8GiB"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "models--org--absent" in err
    assert "never downloads" in err


def test_gemma3_in_hugging_faces_shape_gets_transformers_defaults(
    hub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # google/gemma-3-4b-it: text_config gives only its shape; Gemma3TextConfig's
    # defaults (configuration_gemma3.py): 8 heads, 4 KV heads, head_dim 256,
    # 131072 positions.
    data = config("gemma3_4b_hf.json")
    assert "num_key_value_heads" not in data["text_config"]
    cache_model(hub, "google/gemma-3-4b-it", data)
    assert main(["plan", "google/gemma-3-4b-it", "--kv-cache-memory", "8GiB", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["architecture"] == "Gemma3ForConditionalGeneration"
    layout = model_layout(parse_model_config(data))
    first = layout.attention_layers[0]
    assert (first.num_kv_heads, first.head_size, first.sliding_window) == (4, 256, 1024)
    assert layout.num_attention_heads == 8
    assert layout.derived_max_model_len == 131072
    # With no text_config at all every field comes from the defaults (26 layers).
    bare = model_layout(parse_model_config({"architectures": ["Gemma3ForConditionalGeneration"]}))
    assert bare.num_hidden_layers == 26
    assert bare.attention_layers[0].sliding_window == 4096


RELATIVE = {**config("llama3_1_8b.json"), "architectures": ["MyLlamaForCausalLM"]}


def test_an_unknown_architecture_suggests_architecture_as(tmp_path: Path) -> None:
    with pytest.raises(UnknownArchitectureError) as info:
        model_layout(parse_model_config(RELATIVE))
    message = str(info.value)
    assert "--architecture-as" in message
    assert all(arch in message for arch in SUPPORTED_ARCHITECTURES)


def test_architecture_as_plans_by_the_named_rule() -> None:
    layout = model_layout(parse_model_config(RELATIVE), architecture_as="LlamaForCausalLM")
    assert layout.planned_as == "LlamaForCausalLM"
    assert layout.architecture == "MyLlamaForCausalLM"
    assert len(layout.attention_layers) == 32
    # The rule is the named one's: as Qwen2 the window would be dropped, as Llama kept.
    windowed = {**RELATIVE, "sliding_window": 4096}
    as_llama = model_layout(parse_model_config(windowed), architecture_as="LlamaForCausalLM")
    as_qwen = model_layout(parse_model_config(windowed), architecture_as="Qwen2ForCausalLM")
    assert as_llama.attention_layers[0].sliding_window == 4096
    assert as_qwen.attention_layers[0].sliding_window is None
    with pytest.raises(UnknownArchitectureError) as info:
        model_layout(parse_model_config(RELATIVE), architecture_as="NoSuchForCausalLM")
    assert info.value.field == "--architecture-as"


def test_architecture_as_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RELATIVE))
    assert main(["plan", str(path), "--kv-cache-memory", "8GiB"]) == 2
    assert "--architecture-as" in capsys.readouterr().err
    args = [
        "plan",
        str(path),
        "--kv-cache-memory",
        "24GiB",
        "--architecture-as",
        "LlamaForCausalLM",
    ]
    assert main(args) == 0
    assert "planned by the rule of LlamaForCausalLM" in capsys.readouterr().out.splitlines()[0]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["planned_as"] == {
        "architecture": "MyLlamaForCausalLM",
        "rule_of": "LlamaForCausalLM",
    }
    assert main([*args[:-1], "Bogus"]) == 2
    assert "--architecture-as: unknown architecture 'Bogus'" in capsys.readouterr().err


def test_architecture_as_does_not_apply_to_planning_cases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = ROOT / "tests" / "data" / "vllm-0.26.0" / "llama3_8b.json"
    assert main(["plan", str(case), "--architecture-as", "LlamaForCausalLM"]) == 2
    assert "--architecture-as" in capsys.readouterr().err


def test_a_cached_repository_folder_is_read_at_refs_main(
    hub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cache_model(hub, "Qwen/Qwen3-30B-A3B", config("qwen3_30b_a3b.json"))
    folder = hub / "models--Qwen--Qwen3-30B-A3B"
    assert config_argument(str(folder)) == str(path)
    assert main(["plan", str(folder), "--kv-cache-memory", "24GiB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["architecture"] == "Qwen3MoeForCausalLM"
    # A snapshot folder is a plain model folder (its own config.json).
    assert config_argument(str(path.parent)) == str(path.parent)
    (folder / "refs" / "main").unlink()
    (folder / "snapshots" / REV / "config.json").unlink()
    with pytest.raises(ModelNotCachedError):
        config_argument(str(folder))
