"""Mutants of one Python source file: small AST-located edits, each one a candidate bug.

Each mutant replaces the source text of one node (located by the AST's line and
column offsets) with the text of a changed copy of that node, so the rest of the
file keeps its bytes. The operators are those of mutmut and the literature:

- comparisons: ``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``is``/``is not``,
  ``in``/``not in``;
- arithmetic: ``+``/``-``, ``*``/``//`` (and ``/``), ``//``/``*``, ``%``/``*``,
  the same in augmented assignments;
- ``and``/``or``; ``not x`` -> ``x``; ``-x`` -> ``x``;
- an ``if``/``while``/conditional-expression test ``t`` -> ``not t``;
- integer literal ``n`` -> ``n + 1`` (and ``1`` -> ``0``); ``True``/``False``;
- a string literal -> ``"XX" + s + "XX"`` (docstrings and strings inside
  ``raise`` statements excepted: messages are checked by the error tests);
- a keyword argument dropped from a call;
- inside a function, an assignment or expression statement becomes ``pass``, and
  ``return x`` becomes ``return None``;
- ``break``/``continue`` swapped.

Docstrings, annotations, type aliases, decorators, imports, ``raise`` statements,
f-strings, ``__all__`` and ``if TYPE_CHECKING`` blocks are not mutated. A mutant that does
not parse, or parses to the same AST as the original, is dropped.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """One edit: bytes ``[start, end)`` of the file become ``replacement``."""

    index: int
    line: int
    start: int
    end: int
    replacement: str
    original: str
    operator: str

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]

    def describe(self) -> str:
        before = " ".join(self.original.split())
        after = " ".join(self.replacement.split())
        return f"line {self.line}: {self.operator}: {before!r} -> {after!r}"


_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BINOP_SWAP: dict[type[ast.operator], tuple[type[ast.operator], ...]] = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.FloorDiv,),
    ast.FloorDiv: (ast.Mult, ast.Div),
    ast.Div: (ast.Mult,),
    ast.Mod: (ast.Mult,),
    ast.BitOr: (ast.BitAnd,),
    ast.BitAnd: (ast.BitOr,),
    ast.LShift: (ast.RShift,),
    ast.RShift: (ast.LShift,),
}


def _edits(node: ast.AST, in_function: bool) -> Iterator[tuple[str, ast.AST | str]]:
    """(operator name, changed node or replacement text) for one node."""
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            swapped = _COMPARE_SWAP.get(type(op))
            if swapped is not None:
                changed = copy.deepcopy(node)
                changed.ops[position] = swapped()
                yield "compare", changed
    elif isinstance(node, ast.BinOp):
        for swapped_op in _BINOP_SWAP.get(type(node.op), ()):
            changed_bin = copy.deepcopy(node)
            changed_bin.op = swapped_op()
            yield "arith", changed_bin
    elif isinstance(node, ast.AugAssign):
        for swapped_op in _BINOP_SWAP.get(type(node.op), ()):
            changed_aug = copy.deepcopy(node)
            changed_aug.op = swapped_op()
            yield "augassign", changed_aug
    elif isinstance(node, ast.BoolOp):
        changed_bool = copy.deepcopy(node)
        changed_bool.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", changed_bool
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        yield "unary", f"({ast.unparse(node.operand)})"
    elif isinstance(node, ast.Constant):
        yield from _constant_edits(node)
    elif isinstance(node, ast.Call):
        for position in range(len(node.keywords)):
            if node.keywords[position].arg is None:
                continue
            changed_call = copy.deepcopy(node)
            del changed_call.keywords[position]
            yield f"drop-keyword {node.keywords[position].arg}", changed_call
    elif isinstance(node, ast.Break):
        yield "break", "continue"
    elif isinstance(node, ast.Continue):
        yield "continue", "break"
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield "return-none", "return None"
    if in_function and isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr):
        yield "statement", "pass"


def _constant_edits(node: ast.Constant) -> Iterator[tuple[str, ast.AST | str]]:
    value = node.value
    if isinstance(value, bool):
        yield "bool", "False" if value else "True"
    elif isinstance(value, int):
        yield "number", repr(value + 1)
        if value == 1:
            yield "number", "0"
    elif isinstance(value, str):
        yield "string", repr("XX" + value + "XX")


def _test_edits(node: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    """The conditions of ``if``/``while``/``x if c else y``/``assert``, to negate."""
    if isinstance(node, ast.If | ast.While | ast.IfExp):
        yield node.test, "negate-test"


def _skipped_subtrees(tree: ast.Module) -> set[int]:
    """ids of nodes whose subtrees are not mutated (annotations, docstrings, ...)."""
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(child) for child in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip(body[0])
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip(node)  # attribute docstrings
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            skip(node.returns)
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                skip(arg.annotation)
            for arg in (node.args.vararg, node.args.kwarg):
                if arg is not None:
                    skip(arg.annotation)
            skip_decorators = node.decorator_list
            for decorator in skip_decorators:
                skip(decorator)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
            if node.value is None:
                skip(node)
        elif (
            isinstance(node, ast.Import | ast.ImportFrom | ast.Raise | ast.JoinedStr)
            or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
            or (
                isinstance(node, ast.Assign)
                and any(
                    isinstance(t, ast.Name) and t.id in {"__all__", "__slots__"}
                    for t in node.targets
                )
            )
            or (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Subscript | ast.BinOp)
                and all(isinstance(t, ast.Name) and t.id[:1].isupper() for t in node.targets)
                and _looks_like_type_alias(node.value)
            )
        ):
            skip(node)
        elif isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                skip(decorator)
    return skipped


def _looks_like_type_alias(value: ast.expr) -> bool:
    text = ast.unparse(value)
    return "|" in text or ("[" in text and "(" not in text)


def _line_starts(source: bytes) -> list[int]:
    starts = [0]
    for offset, byte in enumerate(source):
        if byte == 0x0A:
            starts.append(offset + 1)
    return starts


def generate(source: bytes) -> list[Mutant]:
    """Every mutant of ``source`` that compiles and changes the AST, in file order."""
    tree = ast.parse(source)
    original_dump = ast.dump(tree)
    skipped = _skipped_subtrees(tree)
    starts = _line_starts(source)
    found: list[Mutant] = []
    seen: set[tuple[int, int, str]] = set()

    in_function: set[int] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function.update(id(child) for child in ast.walk(function) if child is not function)

    def span(node: ast.AST) -> tuple[int, int]:
        line, col = getattr(node, "lineno"), getattr(node, "col_offset")  # noqa: B009
        end_line, end_col = getattr(node, "end_lineno"), getattr(node, "end_col_offset")  # noqa: B009
        return starts[line - 1] + col, starts[end_line - 1] + end_col

    def add(node: ast.AST, operator: str, replacement: str) -> None:
        start, end = span(node)
        key = (start, end, replacement)
        if key in seen:
            return
        original = source[start:end].decode()
        line = getattr(node, "lineno")  # noqa: B009
        mutant = Mutant(0, line, start, end, replacement, original, operator)
        mutated = mutant.apply(source)
        try:
            mutated_dump = ast.dump(ast.parse(mutated))
        except SyntaxError:
            return
        if mutated_dump == original_dump:
            return
        seen.add(key)
        found.append(mutant)

    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "lineno"):
            continue
        for operator, changed in _edits(node, id(node) in in_function):
            text = changed if isinstance(changed, str) else ast.unparse(changed)
            if isinstance(node, ast.BoolOp | ast.BinOp | ast.Compare) and not isinstance(
                changed, str
            ):
                text = f"({text})"
            add(node, operator, text)
        for test, operator in _test_edits(node):
            negated_not = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            if id(test) not in skipped and not negated_not:
                add(test, operator, f"not ({ast.unparse(test)})")
    found.sort(key=lambda m: (m.start, m.end, m.replacement))
    return [
        Mutant(i, m.line, m.start, m.end, m.replacement, m.original, m.operator)
        for i, m in enumerate(found, start=1)
    ]
