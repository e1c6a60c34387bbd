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

Bounded (:mod:`kvpure.text.budget`): the source's size and literals, the
time loading and a render take and the size of every text it builds, each ending in
:class:`~kvpure.text.errors.ChatTemplateError`, as does any error raised while
the template loads.

Not modelled: tools, tool calls, reasoning fields, multimodal parts,
``continue_final_message`` and request-level template arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvpure.runtime_types import typed_init
from kvpure.text.budget import (
    BUDGET,
    MAX_TEMPLATE_CHARS,
    MAX_TEXT_CHARS,
    BudgetExceeded,
    check_literals,
)
from kvpure.text.errors import ChatTemplateError
from kvpure.text.sandbox import environment as _environment
from kvpure.text.sandbox import jinja_modules as _jinja

if TYPE_CHECKING:
    pass

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


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One text message of a conversation."""

    role: str
    texts: tuple[str, ...]
    """The text parts (a string content is one part; a null content none)."""
    name: str | None = None


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
        if len(source) > MAX_TEMPLATE_CHARS:
            raise ChatTemplateError(
                where=where,
                reason=f"the chat template has {len(source):,} characters "
                f"(at most {MAX_TEMPLATE_CHARS:,})",
            )
        BUDGET.start()  # loading gets the render's time budget
        try:
            tree = env.parse(source)
            check_literals(tree)
            try:
                self.content_format: ContentFormat = _detect_content_format(tree)
            except _Undetectable:
                self.content_format = "string"
            undeclared = jinja2.meta.find_undeclared_variables(tree)
            self._template = env.from_string(tree)  # compiling folds constants in the tree
        except jinja2.TemplateSyntaxError as err:
            raise ChatTemplateError(
                where=where, reason=f"the chat template does not parse: {err}"
            ) from None
        except BudgetExceeded as err:
            raise ChatTemplateError(where=where, reason=str(err)) from None
        except (Exception, RecursionError) as err:  # a template is code: any failure is the input's
            raise ChatTemplateError(
                where=where,
                reason=f"the chat template does not load: {type(err).__name__}: {err}",
            ) from None
        finally:
            BUDGET.stop()
        self.source = source
        self.special_tokens = dict(special_tokens)
        self.names_developer = "'developer'" in source or '"developer"' in source
        self._reads_reasoning_effort = "reasoning_effort" in undeclared

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
        chunks: list[str] = []
        total = 0
        BUDGET.start()
        try:
            for chunk in self._template.generate(
                messages=self.conversation(messages),
                tools=None,
                documents=None,
                add_generation_prompt=True,
                **variables,
            ):
                total += len(chunk)
                if total > MAX_TEXT_CHARS:
                    raise BudgetExceeded(
                        f"the chat template renders over {MAX_TEXT_CHARS:,} characters"
                    )
                BUDGET.tick()
                chunks.append(chunk)
        except BudgetExceeded as err:
            raise ChatTemplateError(where=where, reason=str(err)) from None
        except Exception as err:  # a template is code: any failure is the input's
            raise ChatTemplateError(
                where=where, reason=f"the chat template failed: {err}"
            ) from None
        finally:
            BUDGET.stop()
        return "".join(chunks)
