"""The fixes the wider attack set of issue 24 called for (tools/attack_cases_*.py).

- weights of a cached Hugging Face snapshot must resolve inside its repository
  folder, as its config.json must;
- ``lipsum``, ``slice`` and a filled ``batch`` are bounded in a chat template, and
  loading a template reads the render's clock (a huge template parses for tens of
  seconds);
- a panic of the tokenizers library prints nothing: the typed error carries it;
- ``cache --plot`` writes no matplotlib font cache under ``$HOME``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kvpure.memory_profile.errors import WeightFileError
from kvpure.memory_profile.safetensors_header import read_model_folder
from kvpure.text import budget
from kvpure.text.chat_template import ChatMessage, ChatTemplate
from kvpure.text.errors import ChatTemplateError, TokenizerError

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
REV = "0123456789abcdef0123456789abcdef01234567"
MESSAGES = (ChatMessage(role="user", texts=("hi",)),)


def _shard() -> bytes:
    raw = json.dumps({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(2)


def _snapshot(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "hub" / "models--org--m"
    snap = repo / "snapshots" / REV
    snap.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "model.safetensors").write_bytes(_shard())
    return repo, snap


def test_a_cached_snapshots_weights_linked_outside_the_cache_are_refused(tmp_path: Path) -> None:
    _, snap = _snapshot(tmp_path)
    (snap / "model.safetensors").symlink_to(tmp_path / "outside" / "model.safetensors")
    with pytest.raises(WeightFileError, match="outside the cached repository folder"):
        read_model_folder(snap)


def test_a_cached_snapshots_index_linked_outside_the_cache_is_refused(tmp_path: Path) -> None:
    _, snap = _snapshot(tmp_path)
    index = {"metadata": {"total_size": 2}, "weight_map": {"a": "model.safetensors"}}
    (tmp_path / "outside" / "index.json").write_text(json.dumps(index))
    (snap / "model.safetensors.index.json").symlink_to(tmp_path / "outside" / "index.json")
    with pytest.raises(WeightFileError, match="outside the cached repository folder"):
        read_model_folder(snap)


def test_a_cached_snapshots_weights_in_blobs_are_read(tmp_path: Path) -> None:
    repo, snap = _snapshot(tmp_path)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "abc").write_bytes(_shard())
    (snap / "model.safetensors").symlink_to("../../blobs/abc")
    assert [t.name for t in read_model_folder(snap)] == ["a"]


def test_a_plain_folders_weights_may_be_links_anywhere(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "w.safetensors").write_bytes(_shard())
    (tmp_path / "m" / "model.safetensors").symlink_to(tmp_path / "w.safetensors")
    assert [t.name for t in read_model_folder(tmp_path / "m")] == ["a"]


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{{ lipsum(10**6) }}", "lipsum"),
        ("{{ lipsum(-1) }}", "lipsum's n"),
        ("{{ messages | slice(10**9) | list | length }}", "filter slice"),
        ("{{ messages | batch(10**9, 'x') | list | length }}", "filter batch"),
        ("{{ messages | batch(linecount=10**9, fill_with='x') | list }}", "filter batch"),
    ],
)
def test_growing_globals_and_filters_are_bounded(source: str, words: str) -> None:
    template = ChatTemplate(source, {}, where="t")
    with pytest.raises(ChatTemplateError, match=words):
        template.render(MESSAGES, where="w")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ lipsum(2, false, 3, 4) | wordcount }}", "6"),
        ("{{ [1, 2, 3, 4] | slice(2) | list }}", "[[1, 2], [3, 4]]"),
        ("{{ [1, 2, 3] | batch(2, 0) | list }}", "[[1, 2], [3, 0]]"),
        ("{{ [1, 2, 3] | batch(2) | list }}", "[[1, 2], [3]]"),
    ],
)
def test_the_bounded_globals_and_filters_still_work(source: str, expected: str) -> None:
    assert ChatTemplate(source, {}, where="t").render(MESSAGES, where="w") == expected


class _SlowClock:
    """A monotonic clock that moves a second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


def test_loading_a_template_reads_the_renders_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "time", _SlowClock())
    source = "{{ [" + "1, " * 2000 + "1] | length }}"  # thousands of tokens: several reads
    with pytest.raises(ChatTemplateError, match="s budget"):
        ChatTemplate(source, {}, where="t")


def test_a_load_past_its_budget_stops_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "time", _SlowClock())
    with pytest.raises(ChatTemplateError, match="s budget"):
        ChatTemplate("{% for m in messages %}{{ m.role }}{% endfor %}" * 200, {}, where="t")
    assert budget.BUDGET.deadline == float("inf")
    monkeypatch.undo()
    template = ChatTemplate("{{ messages | length }}", {}, where="t")  # a real clock again
    assert template.render(MESSAGES, where="w") == "1"


def _panicking_tokenizer(tmp_path: Path) -> Path:
    folder = tmp_path / "tok"
    shutil.copytree(EX / "tiny-chat-tokenizer", folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<zz>", "type_id": 0}}],
        "pair": [],
        "special_tokens": {},
    }
    (folder / "tokenizer.json").write_text(json.dumps(data))
    return folder


def test_a_tokenizers_panic_prints_nothing_in_the_command_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tokenizers")
    from kvpure import process_role
    from kvpure.text.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(_panicking_tokenizer(tmp_path))
    monkeypatch.setattr(process_role, "_command_line", True)
    with pytest.raises(TokenizerError, match="no entry found for key"):
        tokenizer.encode_prompt("aaaa b")
    err = capfd.readouterr().err
    assert "panicked" not in err
    print("stderr still works", file=sys.stderr)
    assert "stderr still works" in capfd.readouterr().err


def test_a_library_caller_keeps_its_standard_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside kvpure's command line the descriptor is left alone (the panic's own print
    is the library's, as in any caller of tokenizers); the error is typed all the same."""
    pytest.importorskip("tokenizers")
    from kvpure import process_role
    from kvpure.text.tokenizer import load_tokenizer

    # a library caller's process (the suite's own may have run the command line before)
    monkeypatch.setattr(process_role, "_command_line", False)
    tokenizer = load_tokenizer(_panicking_tokenizer(tmp_path))
    with pytest.raises(TokenizerError, match="no entry found for key"):
        tokenizer.encode_prompt("aaaa b")
    assert "panicked" in capfd.readouterr().err


def test_the_command_line_marks_its_process() -> None:
    code = (
        "from kvpure import process_role\n"
        "from kvpure.cli import main\n"
        "assert not process_role.is_command_line()\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(process_role.is_command_line())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip().endswith("True")


def test_a_plot_writes_no_font_cache_under_home(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT / "src")}
    for key in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env.pop(key, None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvpure",
            "cache",
            "--model",
            str(EX / "llama3_8b.json"),
            "--sweep-memory",
            "1GiB,2GiB",
            "--plot",
            str(tmp_path / "p.png"),
            str(EX / "eviction_workload.jsonl"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.png").stat().st_size > 0
    assert list(home.iterdir()) == []
    assert list(tmp.iterdir()) == []


# -- streaming: blank runs, leading whitespace, long prompts, tensor counts --------------


def _naive_lines(data: bytes) -> list[tuple[int, str]]:
    return [
        (number, line.decode())
        for number, line in enumerate(data.split(b"\n"), start=1)
        if line.strip(b" \t\r\n")
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"\n" * 1000 + b'{"a": 1}\n',
        b'{"a": 1}\n' + b" \n\r\n\t\n" * 500 + b'  {"b": 2}\n\n\n{"c": 3}',
        b"\n" * 100 + b"   " + b"\n" * 100 + b'   {"d": 4}',
        b'{"a": 1}\n' + b"\n" * 63 + b'{"b": 2}\n' + b"\n" * 64 + b'{"c": 3}\n' + b"\n" * 65,
        b"\n" * (3 << 20) + b'{"e": 5}\n',
    ],
)
def test_json_lines_number_lines_as_a_plain_split_does(data: bytes) -> None:
    import io

    from kvpure.cache.json_stream import json_lines

    got = [
        (int(where.rsplit(" ", 1)[1]), text.rstrip("\n"))
        for where, text in json_lines(io.BytesIO(data), "w")
    ]
    assert got == _naive_lines(data)


def test_a_hundred_megabytes_of_newlines_are_skipped_a_chunk_at_a_time() -> None:
    import io

    from kvpure.cache.json_stream import json_lines

    class Counting(io.BytesIO):
        calls = 0

        def readline(self, size: int | None = -1, /) -> bytes:
            Counting.calls += 1
            return super().readline(size)

    data = Counting(b"\n" * (100 << 20) + b'{"a": 1}\n')
    assert [w for w, _ in json_lines(data, "w")] == [f"w line {(100 << 20) + 1}"]
    assert Counting.calls < 1000


def test_leading_whitespace_is_read_once() -> None:
    import io

    from kvpure.cli.workload_files import _first_byte

    seen, first = _first_byte(io.BytesIO(b"\xef\xbb\xbf" + b" " * (8 << 20) + b"["))
    assert first == ord("[")
    assert len(seen) == 3 + (8 << 20) + 1
    assert _first_byte(io.BytesIO(b" \n" * 1000)) == (b" \n" * 1000, -1)
    assert _first_byte(io.BytesIO(b"\xef\xbb\xbf{"))[1] == ord("{")


def test_an_array_after_megabytes_of_whitespace_is_read() -> None:
    import io

    from kvpure.cache.json_stream import json_array_items

    data = b"[" + b" " * (8 << 20) + b"1," + b"\n" * (4 << 20) + b"2 ]" + b" " * 1000
    assert [v for _, v in json_array_items(io.BytesIO(data), "w")] == [1, 2]


def test_a_prompt_longer_than_any_context_is_refused_before_it_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvpure.cache import workload_input
    from kvpure.errors import InvalidFieldError

    monkeypatch.setattr(workload_input, "MAX_PROMPT_TOKENS", 4)
    line = {"prompt_token_ids": [1, 2, 3, 4, "not even an int"]}
    with pytest.raises(InvalidFieldError, match="at most 4 token ids"):
        workload_input.parse_request(line, "w line 1")
    assert workload_input.parse_request({"prompt_token_ids": [1, 2, 3, 4]}, "w").prompt_token_ids


def test_a_header_of_too_many_tensors_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvpure.memory_profile import safetensors_header

    monkeypatch.setattr(safetensors_header, "MAX_FILE_TENSORS", 3)

    def not_parsed(*args: object, **kwargs: object) -> object:
        raise AssertionError("the header was parsed")

    raw = json.dumps(
        {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(4)}
    ).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(4))
    monkeypatch.setattr(json, "loads", not_parsed)
    with pytest.raises(WeightFileError, match="over 3 tensors"):
        safetensors_header.read_safetensors_header(tmp_path / "model.safetensors")


def test_a_folder_whose_headers_list_no_tensor_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    with pytest.raises(WeightFileError, match="list no tensor"):
        read_model_folder(tmp_path)
