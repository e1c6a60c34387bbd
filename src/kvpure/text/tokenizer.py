"""A local Hugging Face tokenizer: text and chat messages to the token ids vLLM 0.26 would see.

:func:`load_tokenizer` reads a ``tokenizer.json`` file, or a model folder
holding ``tokenizer.json`` and ``tokenizer_config.json`` (and, where present,
``chat_template.jinja``, which wins over the config's ``chat_template`` as in
transformers 5), with the ``tokenizers`` library; nothing is downloaded.

- a text prompt is encoded with ``add_special_tokens=True``, the default of
  vLLM's completions API (``CompletionRequest.add_special_tokens``): the
  tokenizer's post-processor adds the BOS token where the model has one;
- chat messages are rendered through the model's chat template
  (:mod:`kvpure.text.chat_template`) and the text is encoded with
  ``add_special_tokens=False``, the default of vLLM's chat API
  (``ChatCompletionRequest.add_special_tokens``) and what transformers'
  ``apply_chat_template`` does: the template writes the special tokens itself.

Bounded: a prompt or rendered chat of more than
:data:`~kvpure.text.budget.MAX_TEXT_CHARS` characters (4 Mi) is refused
before it is tokenized (:class:`~kvpure.text.errors.PromptTooLongError`);
files are read only when regular (:mod:`kvpure.user_files`); an error, or a
panic, of the ``tokenizers`` library becomes
:class:`~kvpure.text.errors.TokenizerError`. In kvpure's command line (only: a
library does not touch its caller's descriptors, :mod:`kvpure.process_role`), the
panic's own print to file descriptor 2 is dropped while the library runs, so the
refusal stays one line; the error carries the message.

Not read: ``special_tokens_map.json`` (the legacy file), the
``additional_chat_templates/`` folder, tokenizers that are not a
``tokenizer.json`` (sentencepiece or tiktoken files), and lower-casing or
truncation options of the request.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.process_role import is_command_line
from kvpure.text.budget import MAX_TEXT_CHARS
from kvpure.text.chat_template import SPECIAL_TOKEN_NAMES, ChatMessage, ChatTemplate
from kvpure.text.errors import (
    ChatTemplateError,
    MissingExtraError,
    PromptTooLongError,
    TokenizerError,
)
from kvpure.user_files import read_regular_text

T = TypeVar("T")

__all__ = ["LocalTokenizer", "load_tokenizer"]

_MAX_FILE_BYTES = 256 * 1024 * 1024


def _read_text(path: Path, field: str) -> str:
    return read_regular_text(path, _MAX_FILE_BYTES, field)


@contextmanager
def _panic_output_dropped() -> Iterator[None]:
    """File descriptor 2 pointed at the null device while the tokenizers library runs.

    A Rust panic prints its message (and, under ``RUST_BACKTRACE``, a backtrace)
    straight to descriptor 2 before it is raised as an exception; the typed
    error carries the message instead, so a refusal stays one line.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no standard error to protect
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _guarded(where: str, what: str, call: Callable[[], T]) -> T:
    """``call()``, with any error or panic of the tokenizers library typed.

    A Rust panic surfaces as ``pyo3_runtime.PanicException``, a
    ``BaseException``: everything but an interrupt or an exit is caught.
    """
    try:
        if not is_command_line():  # a caller's process: its standard error is its own
            return call()
        with _panic_output_dropped():
            return call()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as err:  # the library's panics are BaseExceptions
        message = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise TokenizerError(where=where, reason=f"{what} failed: {message}") from None


def _bounded(text: str, where: str) -> str:
    if len(text) > MAX_TEXT_CHARS:
        raise PromptTooLongError(where=where, length=len(text), limit=MAX_TEXT_CHARS)
    return text


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it (a string or an AddedToken dict)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        content: str = value["content"]
        return content
    return None


def _config_template(config: dict[str, Any], field: str) -> str | None:
    template = config.get("chat_template")
    if template is None or isinstance(template, str):
        return template
    if isinstance(template, list):  # named templates: the default one, as transformers picks
        for item in template:
            if isinstance(item, dict) and item.get("name") == "default":
                source = item.get("template")
                if isinstance(source, str):
                    return source
        raise InvalidFieldError(
            field=f"{field}.chat_template",
            value=[item.get("name") for item in template if isinstance(item, dict)],
            reason="names no 'default' template",
        )
    raise InvalidFieldError(
        field=f"{field}.chat_template", value=type(template).__name__, reason="must be a string"
    )


class LocalTokenizer:
    """A ``tokenizers`` tokenizer and, where the model has one, its chat template."""

    def __init__(self, backend: Any, template: ChatTemplate | None, *, where: str) -> None:
        self._backend = backend
        self.chat_template = template
        self.where = where

    def encode_prompt(self, text: str) -> tuple[int, ...]:
        """A text prompt's ids, special tokens added (vLLM's completions path)."""
        _bounded(text, "prompt")
        return _guarded(
            self.where,
            "encoding a prompt",
            lambda: tuple(self._backend.encode(text, add_special_tokens=True).ids),
        )

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens kept (for showing a prefix)."""
        return _guarded(
            self.where,
            "decoding token ids",
            lambda: str(self._backend.decode(list(ids), skip_special_tokens=False)),
        )

    def render_chat(self, messages: Sequence[ChatMessage], *, where: str) -> str:
        """The chat template applied to ``messages`` with an assistant turn opened."""
        if self.chat_template is None:
            raise ChatTemplateError(
                where=where,
                reason=f"the tokenizer at {self.where} has no chat template "
                "(tokenizer_config.json chat_template or chat_template.jinja); "
                "give the request as a prompt instead",
            )
        return self.chat_template.render(messages, where=where)

    def encode_chat(self, messages: Sequence[ChatMessage], *, where: str) -> tuple[int, ...]:
        """The rendered chat's ids, no special tokens added (vLLM's chat path)."""
        text = _bounded(self.render_chat(messages, where=where), where)
        return _guarded(
            self.where,
            "encoding a rendered chat",
            lambda: tuple(self._backend.encode(text, add_special_tokens=False).ids),
        )


def load_tokenizer(path: str | Path) -> LocalTokenizer:
    """The tokenizer at ``path``: a tokenizer.json file or a folder holding one."""
    if not isinstance(path, str | os.PathLike):
        raise FieldTypeError(
            field="path", value=path, reason="must be a path (a str or os.PathLike)"
        )
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingExtraError(feature="--tokenizer", package="tokenizers", extra="text") from None
    where = str(path)
    root = Path(path)
    if root.is_dir():
        tokenizer_file = root / "tokenizer.json"
        config_file: Path | None = root / "tokenizer_config.json"
    elif root.exists():
        tokenizer_file, config_file = root, root.parent / "tokenizer_config.json"
    else:
        raise InvalidFieldError(
            field="--tokenizer", value=where, reason="does not exist (a tokenizer.json or a folder)"
        )
    if not tokenizer_file.is_file():
        raise InvalidFieldError(field="--tokenizer", value=where, reason="holds no tokenizer.json")
    source_text = _read_text(tokenizer_file, str(tokenizer_file))
    backend = _guarded(
        str(tokenizer_file), "loading tokenizer.json", lambda: Tokenizer.from_str(source_text)
    )
    config: dict[str, Any] = {}
    if config_file is not None and config_file.exists():
        try:
            loaded = json.loads(_read_text(config_file, str(config_file)))
        except (ValueError, RecursionError) as err:
            raise InvalidFieldError(
                field=str(config_file), value="tokenizer_config.json", reason=f"invalid JSON: {err}"
            ) from None
        if not isinstance(loaded, dict):
            raise InvalidFieldError(
                field=str(config_file), value=type(loaded).__name__, reason="must be a JSON object"
            )
        config = loaded
    source = _config_template(config, str(config_file))
    jinja_file = tokenizer_file.parent / "chat_template.jinja"
    if jinja_file.exists():
        source = _read_text(jinja_file, str(jinja_file))
    template = None
    if source is not None:
        special = {
            name: text
            for name in SPECIAL_TOKEN_NAMES
            if (text := _token_text(config.get(name))) is not None
        }
        template = ChatTemplate(source, special, where=where)
    return LocalTokenizer(backend, template, where=where)
