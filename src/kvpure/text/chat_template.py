"""A model's chat template rendered as vLLM 0.26's chat completions path renders it.

vLLM (``vllm/renderers/hf.py``, ``safe_apply_chat_template``, and
``vllm/entrypoints/chat_utils.py``, ``parse_chat_messages``) turns request
messages into a conversation and hands it to transformers'
``apply_chat_template``, which renders the Jinja template in a sandbox. This
module does the same steps, written anew, for text-only messages:

- **content format**: vLLM looks at the template's syntax tree; a template
  that loops over ``message['content']`` (or over a variable named
  ``content``) gets each message's content as a list of
  ``{"type": "text", "text": ...}`` parts ("openai"), any other gets the text
  parts joined with newlines ("string");
- **developer role**: when the template never names ``'developer'``,
  developer messages become system messages and every system message is
  merged into one at the front, contents joined by a blank line;
- **rendering**: an immutable sandbox with ``trim_blocks`` and
  ``lstrip_blocks``, loop controls, the ``{% generation %}`` tag, and
  transformers' globals: ``raise_exception``, ``strftime_now``, a ``tojson``
  that keeps non-ASCII text, and a ``namespace`` refusing underscore names.
  The template sees ``messages``, ``tools`` and ``documents`` (both None),
  ``add_generation_prompt=True``, the special tokens of tokenizer_config.json
  (``bos_token``, ``eos_token``, ...) and, where the template reads it,
  ``reasoning_effort`` (None), as vLLM passes it;
- keys whose value is None are dropped from each message (transformers).

Not modelled: tools, tool calls, reasoning fields, multimodal parts,
``continue_final_message`` and request-level template arguments.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from kvpure.text.errors import ChatTemplateError, MissingExtraError

if TYPE_CHECKING:
    import jinja2
    import jinja2.nodes

__all__ = ["SPECIAL_TOKEN_NAMES", "ChatMessage", "ChatTemplate", "ContentFormat"]

ContentFormat = Literal["string", "openai"]

SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
"""The named special tokens transformers hands every template (``special_tokens_map``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One text message of a conversation."""

    role: str
    texts: tuple[str, ...]
    """The text parts (a string content is one part; a null content none)."""
    name: str | None = None


def _jinja() -> Any:
    try:
        import jinja2
        import jinja2.ext
        import jinja2.meta
        import jinja2.sandbox
    except ImportError:
        raise MissingExtraError(feature="chat messages", package="jinja2", extra="text") from None
    return jinja2


def _raise_from_template(message: object) -> None:
    raise _jinja().exceptions.TemplateError(str(message))


def _tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@cache
def _environment() -> jinja2.Environment:
    """The sandbox transformers renders chat templates in."""
    _jinja()  # the missing-extra error, before the imports below
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
    import jinja2.utils

    class GenerationTag(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: renders its body unchanged."""

        tags = {"generation"}  # noqa: RUF012  (jinja2 declares it a set)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    class GuardedNamespace(jinja2.utils.Namespace):
        """jinja2's namespace refusing underscore-prefixed attributes (transformers)."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            for key in dict(*rest, **kwargs):
                GuardedNamespace.check(key)
            jinja2.utils.Namespace.__init__(self, *rest, **kwargs)

        def __setitem__(self, key: str, value: Any) -> None:
            GuardedNamespace.check(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

        @staticmethod
        def check(key: object) -> None:
            if isinstance(key, str) and key.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"a chat template namespace cannot hold {key!r}"
                )

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_from_template
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = GuardedNamespace
    return env


# -- content format: vLLM's syntax-tree test, written anew ---------------------


class _Undetectable(Exception):
    """vLLM gives up on the tree (an alias or loop target that is not a plain name)."""


def _unwrapped(node: Any) -> Any:
    """The value under filters, tests and slices (``x|length``, ``x is string``, ``x[1:]``)."""
    nodes = _jinja().nodes
    while True:
        if isinstance(node, nodes.Filter | nodes.Test):
            if node.node is None:
                return None
            node = node.node
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
            node = node.node
        else:
            return node


def _reads(node: Any, name: str, key: str | None = None) -> bool:
    """Whether ``node`` reads variable ``name`` (or its item ``key``)."""
    nodes = _jinja().nodes
    node = _unwrapped(node)

    def loads(n: Any) -> bool:
        return isinstance(n, nodes.Name) and n.ctx == "load" and n.name == name

    if key is None:
        return loads(node)
    if isinstance(node, nodes.Getitem):
        return loads(node.node) and isinstance(node.arg, nodes.Const) and node.arg.value == key
    if isinstance(node, nodes.Getattr):
        return loads(node.node) and bool(node.attr == key)
    return False


def _target_name(node: Any) -> str:
    if not isinstance(node, _jinja().nodes.Name):
        raise _Undetectable
    name: str = node.name
    return name


def _aliases(tree: Any, name: str) -> list[str]:
    """``name`` and every variable assigned from it, transitively."""
    found, queue = [name], deque([name])
    while queue:
        current = queue.popleft()
        for assign in tree.find_all(_jinja().nodes.Assign):
            if _reads(assign.node, current):
                alias = _target_name(assign.target)
                if alias not in found:
                    found.append(alias)
                    queue.append(alias)
    return found


def _detect_content_format(tree: Any) -> ContentFormat:
    loops = list(tree.find_all(_jinja().nodes.For))
    message_vars = []
    for loop in loops:
        if any(_reads(loop.iter, alias) for alias in _aliases(tree, "messages")):
            message_vars.append(_target_name(loop.target))
    for loop in loops:
        if any(_reads(loop.iter, var, "content") for var in message_vars):
            _target_name(loop.target)
            return "openai"
        if isinstance(loop.iter, _jinja().nodes.Name) and loop.iter.name == "content":
            _target_name(loop.target)
            return "openai"
    return "string"


# -- the template ---------------------------------------------------------------


def _merge_system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """All system messages as one at the front (when one is not already alone there)."""
    contents: list[str] = []
    others: list[dict[str, Any]] = []
    merge = False
    for i, message in enumerate(messages):
        if message["role"] != "system":
            others.append(message)
            continue
        merge = merge or i > 0 or bool(contents)
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(part["text"] for part in content)
        if content:
            contents.append(content)
    if not merge:
        return messages
    return [{"role": "system", "content": "\n\n".join(contents)}, *others]


class ChatTemplate:
    """A compiled chat template with the special tokens it renders with."""

    def __init__(self, source: str, special_tokens: Mapping[str, str], *, where: str) -> None:
        jinja2 = _jinja()
        env = _environment()
        try:
            tree = env.parse(source)
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as err:
            raise ChatTemplateError(
                where=where, reason=f"the chat template does not parse: {err}"
            ) from None
        try:
            self.content_format: ContentFormat = _detect_content_format(tree)
        except _Undetectable:
            self.content_format = "string"
        self.source = source
        self.special_tokens = dict(special_tokens)
        self.names_developer = "'developer'" in source or '"developer"' in source
        self._reads_reasoning_effort = "reasoning_effort" in jinja2.meta.find_undeclared_variables(
            tree
        )

    def conversation(self, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        """The messages as the template receives them."""
        out: list[dict[str, Any]] = []
        for message in messages:
            content: str | list[dict[str, str]]
            if self.content_format == "openai":
                content = [{"type": "text", "text": text} for text in message.texts]
                if message.role == "tool":
                    content = "\n".join(message.texts)
            else:
                content = "\n".join(message.texts)
            item: dict[str, Any] = {"role": message.role, "content": content}
            if message.name is not None:
                item["name"] = message.name
            out.append(item)
        if not self.names_developer and any(m["role"] == "developer" for m in out):
            out = [{**m, "role": "system"} if m["role"] == "developer" else m for m in out]
            out = _merge_system_messages(out)
        return out

    def render(self, messages: Sequence[ChatMessage], *, where: str) -> str:
        """The prompt text (``add_generation_prompt=True``)."""
        variables: dict[str, Any] = {**self.special_tokens}
        if self._reads_reasoning_effort:
            variables["reasoning_effort"] = None
        try:
            text: str = self._template.render(
                messages=self.conversation(messages),
                tools=None,
                documents=None,
                add_generation_prompt=True,
                **variables,
            )
        except Exception as err:  # a template is code: any failure is the input's
            raise ChatTemplateError(
                where=where, reason=f"the chat template failed: {err}"
            ) from None
        return text
