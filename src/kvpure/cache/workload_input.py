"""One line of a workload: a request as token ids, a text prompt or chat messages.

A line is a JSON object with exactly one of

- ``prompt_token_ids``: the prompt's token ids;
- ``prompt``: a text, encoded by the local tokenizer with special tokens added
  (vLLM's completions path);
- ``messages``: ``[{"role": ..., "content": ...}, ...]``, rendered through the
  model's chat template and encoded without added special tokens (vLLM's
  chat path). A content is a string, null, or a list of text parts (a string
  or ``{"type": "text", "text": ...}``); a message may carry a ``name``;

and optionally ``output_len``, ``lora_name``, ``cache_salt`` and
``arrival_time`` (seconds, a number >= 0: requests are then admitted in
arrival order, see :mod:`kvpure.cli.workload_files`). The text
forms need a tokenizer (``--tokenizer``); see :mod:`kvpure.text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from kvpure.errors import InvalidFieldError
from kvpure.field_checks import check_optional_seconds
from kvpure.text.chat_template import ChatMessage

__all__ = [
    "MAX_MESSAGES",
    "MAX_PROMPT_TOKENS",
    "PromptEncoder",
    "WorkloadRequest",
    "parse_messages",
    "parse_request",
]

MAX_MESSAGES = 4096
"""Most messages one request may hold."""
MAX_PROMPT_TOKENS = 2**24
"""Most token ids one prompt may give (16,777,216: more than any model's context), refused
as the line is read, before the ids are checked, spooled and replayed (a 48 MiB line of
25 million ids otherwise costs tens of seconds before max_model_len refuses it)."""

_PROMPT_KEYS = ("prompt_token_ids", "prompt", "messages")
_KNOWN_KEYS = frozenset({*_PROMPT_KEYS, "output_len", "lora_name", "cache_salt", "arrival_time"})
_MESSAGE_KEYS = frozenset({"role", "content", "name"})


@runtime_checkable
class PromptEncoder(Protocol):
    """What turns text into token ids (:class:`kvpure.text.LocalTokenizer`)."""

    def encode_prompt(self, text: str) -> tuple[int, ...]: ...

    def encode_chat(self, messages: tuple[ChatMessage, ...], *, where: str) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadRequest:
    """One line of the workload."""

    prompt_token_ids: tuple[int, ...]
    output_len: int = 0
    lora_name: str | None = None
    cache_salt: str | None = None
    arrival_time: float | None = None
    """Seconds from the workload's start; orders admission where given."""
    source: str = ""
    """Where the request was read (``"FILE line N"``), named in errors."""

    @property
    def num_prompt_tokens(self) -> int:
        """Tokens in the prompt."""
        return len(self.prompt_token_ids)

    def head_token_ids(self, count: int) -> tuple[int, ...]:
        """The prompt's first ``count`` tokens."""
        return self.prompt_token_ids[:count]


def _field(where: str, value: object, reason: str) -> InvalidFieldError:
    return InvalidFieldError(field=where, value=value, reason=reason)


def _optional_str(obj: dict[str, object], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _field(f"{where}.{key}", value, "must be a string or null")
    return value


def _texts(content: object, where: str) -> tuple[str, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (content,)
    if not isinstance(content, list):
        raise _field(where, type(content).__name__, "must be a string, null or a list of parts")
    texts: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict) or part.get("type") != "text":
            shown = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise _field(
                f"{where}[{i}]", shown, 'must be a string or {"type": "text", "text": ...}'
            )
        text = part.get("text")
        if text is None:
            continue  # vLLM skips a text part without text
        if not isinstance(text, str):
            raise _field(f"{where}[{i}].text", text, "must be a string")
        texts.append(text)
    return tuple(texts)


def parse_messages(data: object, where: str) -> tuple[ChatMessage, ...]:
    """A ``messages`` list as chat messages; ``where`` names it in errors."""
    if not isinstance(data, list) or not data:
        raise _field(where, data, "must be a non-empty list of messages")
    if len(data) > MAX_MESSAGES:
        raise _field(where, f"{len(data)} messages", f"must hold at most {MAX_MESSAGES}")
    messages: list[ChatMessage] = []
    for i, item in enumerate(data):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise _field(at, type(item).__name__, "must be an object with role and content")
        unknown = sorted(set(item) - _MESSAGE_KEYS)
        if unknown:
            raise _field(
                f"{at}.{unknown[0]}",
                item[unknown[0]],
                "unknown key (known: role, content, name; tools and tool calls are not modelled)",
            )
        role = item.get("role")
        if not isinstance(role, str) or not role:
            raise _field(f"{at}.role", role, "must be a non-empty string")
        messages.append(
            ChatMessage(
                role=role,
                texts=_texts(item.get("content"), f"{at}.content"),
                name=_optional_str(item, "name", at),
            )
        )
    return tuple(messages)


def _token_ids(data: object, where: str) -> tuple[int, ...]:
    if not isinstance(data, list) or not data:
        raise _field(where, data, "must be a non-empty list of token ids")
    if len(data) > MAX_PROMPT_TOKENS:
        raise _field(
            where,
            f"{len(data):,} token ids",
            f"is longer than any model's context (at most {MAX_PROMPT_TOKENS:,} token ids)",
        )
    if set(map(type, data)) == {int} and min(cast("list[int]", data)) >= 0:  # in C
        return tuple(data)
    for i, token in enumerate(data):
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise _field(f"{where}[{i}]", token, "must be an int >= 0")
    return tuple(data)


def _required(encoder: PromptEncoder | None, where: str, key: str) -> PromptEncoder:
    if encoder is None:
        raise _field(
            f"{where}.{key}",
            "text",
            "needs a tokenizer: give --tokenizer PATH (a tokenizer.json or its model folder)",
        )
    return encoder


def _prompt_ids(
    data: dict[str, object], where: str, encoder: PromptEncoder | None
) -> tuple[int, ...]:
    given = [key for key in _PROMPT_KEYS if key in data]
    if len(given) != 1:
        raise _field(
            f"{where}.{given[1]}" if given else f"{where}.prompt_token_ids",
            given,
            "give exactly one of prompt_token_ids, prompt, messages",
        )
    key = given[0]
    if key == "prompt_token_ids":
        return _token_ids(data[key], f"{where}.{key}")
    if key == "prompt":
        text = data[key]
        if not isinstance(text, str) or not text:
            raise _field(f"{where}.prompt", text, "must be a non-empty string")
        ids = _required(encoder, where, key).encode_prompt(text)
    else:
        messages = parse_messages(data[key], f"{where}.messages")
        ids = _required(encoder, where, key).encode_chat(messages, where=where)
    if not ids:
        raise _field(f"{where}.{key}", "no tokens", "must encode to at least one token")
    return ids


def parse_request(
    data: object, where: str, encoder: PromptEncoder | None = None
) -> WorkloadRequest:
    """One workload line's parsed JSON as a request; ``where`` names the line in errors.

    ``encoder`` turns a ``prompt`` or ``messages`` line into token ids; without
    one such a line is an error naming ``--tokenizer``.
    """
    if not isinstance(data, dict):
        raise _field(where, type(data).__name__, "must be a JSON object")
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise _field(
            f"{where}.{unknown[0]}",
            data[unknown[0]],
            "unknown key (known: prompt_token_ids or prompt or messages, output_len, "
            "lora_name, cache_salt, arrival_time)",
        )
    output_len = data.get("output_len", 0)
    if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 0:
        raise _field(f"{where}.output_len", output_len, "must be an int >= 0")
    lora_name = _optional_str(data, "lora_name", where)
    cache_salt = _optional_str(data, "cache_salt", where)
    arrival = data.get("arrival_time")
    check_optional_seconds(
        f"{where}.arrival_time", arrival, reason="must be a number of seconds >= 0"
    )
    return WorkloadRequest(
        prompt_token_ids=_prompt_ids(data, where, encoder),
        output_len=output_len,
        lora_name=lora_name,
        cache_salt=cache_salt,
        arrival_time=None if arrival is None else float(arrival),
        source=where,
    )
