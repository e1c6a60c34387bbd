"""The jinja2 sandbox a chat template renders in: transformers' setup plus kvpure's bounds.

transformers renders chat templates in jinja2's ``ImmutableSandboxedEnvironment``
with ``trim_blocks``/``lstrip_blocks``, loop controls, the ``{% generation %}``
tag and a few globals (``raise_exception``, ``strftime_now``, a ``tojson`` that
keeps non-ASCII text, a ``namespace`` refusing underscore names). kvpure's
environment is that one, with the clock and size checks of
:mod:`kvpure.text.budget` wired into the sandbox's hooks: intercepted
operators, calls, attribute and item reads, ``~`` joins (through a code
generator that routes them to :func:`~kvpure.text.budget.checked_join`),
``range`` and the width-taking filters; loading (the parser's tokens, the code
generator's nodes) reads the same clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from kvpure.text.budget import (
    BUDGET,
    MAX_TEXT_CHARS,
    BudgetExceeded,
    budgeted_filters,
    budgeted_range,
    check_size,
    checked_binop,
    checked_join,
)
from kvpure.text.call_budget import check_call_arguments
from kvpure.text.errors import MissingExtraError

if TYPE_CHECKING:
    import jinja2

__all__ = ["environment", "jinja_modules"]


def jinja_modules() -> Any:
    """The jinja2 package with the submodules used here, or the missing-extra error."""
    try:
        import jinja2
        import jinja2.ext
        import jinja2.meta
        import jinja2.sandbox
    except ImportError:
        raise MissingExtraError(feature="chat messages", package="jinja2", extra="text") from None
    return jinja2


def _raise_from_template(message: object) -> None:
    raise jinja_modules().exceptions.TemplateError(str(message))


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


_LIPSUM_MAX_WORDS = MAX_TEXT_CHARS // 16
"""The most words ``lipsum`` may write (``n`` paragraphs of at most ``max`` words each)."""


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """jinja2's ``lipsum`` global, refused past :data:`_LIPSUM_MAX_WORDS` words (jinja2
    builds every paragraph, word by word, before returning)."""
    from jinja2.utils import generate_lorem_ipsum

    for name, value in (("n", n), ("min", min), ("max", max)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise jinja_modules().exceptions.TemplateError(
                f"lipsum's {name} must be an int >= 0 (got {value!r})"
            )
    if n * max > _LIPSUM_MAX_WORDS:
        raise BudgetExceeded(
            f"the chat template asks lipsum for {n:,} x {max:,} words "
            f"(at most {_LIPSUM_MAX_WORDS:,})"
        )
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


@cache
def environment() -> jinja2.Environment:
    """The sandbox transformers renders chat templates in."""
    jinja_modules()  # the missing-extra error, before the imports below
    import jinja2
    import jinja2.compiler
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
    import jinja2.utils

    class BudgetedCodeGenerator(jinja2.compiler.CodeGenerator):
        """jinja2's code generator with every ``~`` join through :func:`checked_join`."""

        def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            BUDGET.tick()  # loading is timed as rendering is (a huge template compiles slowly)
            return super().visit(node, *args, **kwargs)

        @jinja2.compiler.optimizeconst
        def visit_Concat(self, node: Any, frame: Any) -> None:
            if frame.eval_ctx.volatile:
                join = "(markup_join if context.eval_ctx.volatile else str_join)"
            elif frame.eval_ctx.autoescape:
                join = "markup_join"
            else:
                join = "str_join"
            self.write("environment.kvpure_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write(f"), {join})")

    class BudgetedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
        """The sandbox with the clock and size checks of :mod:`kvpure.text.budget`."""

        intercepted_binops = frozenset({"*", "**", "+", "%"})
        code_generator_class = BudgetedCodeGenerator

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            return checked_binop(operator, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            check_call_arguments(__obj, args, kwargs)
            return check_size(super().call(__context, __obj, *args, **kwargs), "a call's result")

        def getattr(self, obj: Any, attribute: str) -> Any:
            BUDGET.tick()
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            BUDGET.tick()
            return super().getitem(obj, argument)

        @staticmethod
        def kvpure_join(parts: tuple[object, ...], join: Callable[[Any], str]) -> str:
            return checked_join(parts, join)

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

    class TimedLoad(jinja2.ext.Extension):
        """Reads the clock every 256 tokens the parser takes (a template of a million
        tokens takes tens of seconds to parse)."""

        def filter_stream(self, stream: Any) -> Any:
            for count, token in enumerate(stream):
                if not count & 255:
                    BUDGET.tick()
                yield token

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

    env = BudgetedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols, TimedLoad],
    )
    env.filters = budgeted_filters(dict(env.filters))
    env.filters["tojson"] = _tojson
    env.globals["range"] = budgeted_range
    env.globals["raise_exception"] = _raise_from_template
    env.globals["strftime_now"] = _strftime_now
    env.globals["namespace"] = GuardedNamespace
    env.globals["lipsum"] = _lipsum
    return env
