"""Runtime type checks at the public boundary, in users' own processes.

The public constructors (specs, plan values, settings, hash requests and
schemes, deployments) are checked against their annotations; a wrong type,
a missing argument or an unknown keyword raises
:class:`~kvpure.errors.KVPureTypeError` (a ``TypeError`` under kvpure's root)
naming the parameter, what it expected and what it got.

The checks cost nothing at import: :func:`typed_init` only marks the class.
The first construction reads the annotations once (``typing.get_type_hints``)
and compiles one ``__init__`` for the class with the same signature, a few
``isinstance`` tests and a call to the dataclass's own ``__init__``; every
later construction runs that compiled function. No third-party checker is
imported in a user's process (the test suite additionally runs beartype's
import hook over the whole package).

What a check covers, per annotation:

- a class (``int``, an enum, a spec class, ``None``): ``isinstance``; ``int``
  accepts ``bool`` here, as Python does; the fields' own value checks refuse
  ``True`` where a count is meant (:mod:`kvpure.field_checks`);
- ``X | Y``: either;
- ``tuple[X, ...]`` and ``frozenset[X]``: the container type, then every item
  of a container up to :data:`ITEMS_CHECKED_IN_FULL` items and, beyond that,
  the first, middle and last items (so a check stays O(1) for long token
  lists, as beartype's one sampled item did);
- ``tuple[X, Y]``: the length and each item;
- a generic class (``LayerMap[KVCacheSpec]``, ``PMap[str, object]``): its
  origin class;
- ``NewType`` values: their base type; ``Literal``: membership;
  ``object``/``Any`` and whatever else: not checked.

Hot inner paths (the chain loop, the queue's per-block links) are not
decorated: they check what they must explicitly. The planning core builds its
result values with :func:`unchecked` constructors: its inputs were checked once
at the public boundary, and what it builds from them has the declared types by
construction (mypy checks those calls statically); the values' own field checks
(``__post_init__``) still run.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Sized
from typing import TYPE_CHECKING, Any, TypeVar

from kvpure.errors import KVPureTypeError

__all__ = ["ITEMS_CHECKED_IN_FULL", "typed", "typed_init", "unchecked"]

ITEMS_CHECKED_IN_FULL = 64
"""Containers up to this length have every item checked; longer ones a sample of three."""

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., object])

Check = Callable[[object], bool]

_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a huge input never floods a message)."""
    try:
        text = object.__repr__(value) if isinstance(value, type) else repr(value)
    except Exception:  # a broken __repr__ must not hide the type error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(hint: object) -> str:
    if isinstance(hint, type):
        return "None" if hint is type(None) else hint.__qualname__
    return str(hint).replace("typing.", "")


def _sample(items: Sized) -> Iterable[object]:
    if len(items) <= ITEMS_CHECKED_IN_FULL:
        return items  # type: ignore[return-value]  # tuples and frozensets are iterable
    if isinstance(items, tuple):
        return (items[0], items[len(items) // 2], items[-1])
    return (item for _, item in zip(range(3), items, strict=False))  # type: ignore[call-overload]  # a set


def _items_check(container: type, item: Check) -> Check:
    def check(value: object) -> bool:
        return isinstance(value, container) and all(item(x) for x in _sample(value))  # type: ignore[arg-type]  # sized after isinstance

    return check


def _instance_check(cls: type) -> Check:
    def check(value: object) -> bool:
        return isinstance(value, cls)

    return check


def _union_check(checks: tuple[Check, ...]) -> Check:
    def check(value: object) -> bool:
        return any(one(value) for one in checks)

    return check


def _fixed_tuple_check(checks: tuple[Check, ...]) -> Check:
    def check(value: object) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) == len(checks)
            and all(one(x) for one, x in zip(checks, value, strict=True))
        )

    return check


def _anything(value: object) -> bool:
    return True


def _check_for(hint: object) -> Check | None:
    """A predicate for values of ``hint``; ``None`` where nothing is checked."""
    if hint is Any or hint is object:
        return None
    if hint is None or hint is type(None):
        return _instance_check(type(None))
    supertype = getattr(hint, "__supertype__", None)  # a NewType
    if supertype is not None:
        return _check_for(supertype)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is None:
        return _instance_check(hint) if isinstance(hint, type) else None
    if origin is typing.Union or origin is types.UnionType:
        parts = tuple(_check_for(arg) for arg in args)
        if any(part is None for part in parts):
            return None
        return _union_check(tuple(p for p in parts if p is not None))
    if origin is typing.Literal:
        allowed = args

        def literal(value: object) -> bool:
            return any(type(value) is type(a) and value == a for a in allowed)

        return literal
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _check_for(args[0])
            return _items_check(tuple, item) if item is not None else _instance_check(tuple)
        if args == ((),):
            return _fixed_tuple_check(())
        return _fixed_tuple_check(tuple(_check_for(arg) or _anything for arg in args))
    if origin in (frozenset, set, list):
        item = _check_for(args[0]) if args else None
        return _items_check(origin, item) if item is not None else _instance_check(origin)
    if isinstance(origin, type):
        return _instance_check(origin)
    return None


def _compile_init(cls: type, original: Callable[..., None]) -> Callable[..., None]:
    """One ``__init__`` with ``original``'s signature that checks, then calls ``original``."""
    signature = inspect.signature(original)
    hints = typing.get_type_hints(original)
    params = list(signature.parameters.values())[1:]  # past self
    names: dict[str, Any] = {
        "_orig": original,
        "_MISSING": _MISSING,
        "_bad": functools.partial(_refuse, cls.__qualname__),
        "_missing": functools.partial(_missing, cls.__qualname__),
        "_extra": functools.partial(
            _unexpected,
            cls.__qualname__,
            sum(
                p.kind is not inspect.Parameter.KEYWORD_ONLY
                for p in list(signature.parameters.values())[1:]
            ),
        ),
    }
    head: list[str] = []
    body: list[str] = []
    call: list[str] = []
    keyword_only = False
    for index, param in enumerate(params):
        name = param.name
        if param.kind is inspect.Parameter.KEYWORD_ONLY and not keyword_only:
            head.append("*_args")
            keyword_only = True
        default = param.default
        names[f"_d{index}"] = _MISSING if default is inspect.Parameter.empty else default
        head.append(f"{name}=_d{index}")
        if default is inspect.Parameter.empty:
            body.append(f"    if {name} is _MISSING: _missing({name!r})")
        check = _check_for(hints[name]) if name in hints else None
        if check is not None:
            names[f"_k{index}"] = check
            names[f"_h{index}"] = hints[name]
            guard = "" if default is inspect.Parameter.empty else f"{name} is not _d{index} and "
            body.append(f"    if {guard}not _k{index}({name}): _bad({name!r}, _h{index}, {name})")
        call.append(f"{name}={name}" if keyword_only else name)
    if not keyword_only:
        head.append("*_args")
    head.append("**_kw")
    source = (
        f"def __init__(self, {', '.join(head)}):\n"
        "    if _args or _kw: _extra(_args, _kw)\n"
        + "".join(line + "\n" for line in body)
        + f"    _orig(self, {', '.join(call)})\n"
    )
    exec(source, names)  # generated from the class's own signature, as dataclasses does
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = original.__doc__
    init.__signature__ = signature  # type: ignore[attr-defined]  # introspection shows the real one
    init.__kvpure_checked__ = original  # type: ignore[attr-defined]  # the unchecked one
    return init


def _refuse(owner: str, name: str, hint: object, value: object) -> None:
    raise KVPureTypeError(
        f"{owner}: {name} must be {_type_name(hint)} (got {type(value).__name__} {_short(value)})"
    )


def _missing(owner: str, name: str) -> None:
    raise KVPureTypeError(f"{owner}: missing required argument {name!r}")


def _unexpected(
    owner: str, positional: int, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    if kwargs:
        raise KVPureTypeError(
            f"{owner}: unexpected keyword argument {next(iter(kwargs))!r} (see its fields)"
        )
    if positional == 0:
        raise KVPureTypeError(f"{owner}: takes keyword arguments only (got {len(args)} positional)")
    raise KVPureTypeError(
        f"{owner}: takes at most {positional} positional arguments (got {positional + len(args)})"
    )


_ORIGINAL_INITS: dict[type, Callable[..., None]] = {}
"""Each :func:`typed_init` class's own (unchecked) ``__init__``."""


def _unchecked(cls: type) -> Callable[..., object]:
    original = _ORIGINAL_INITS.get(cls)
    if original is None:  # not a @typed_init class (a user's subclass): the class itself
        return cls
    new = object.__new__

    def construct(*args: object, **kwargs: object) -> object:
        made: object = new(cls)
        original(made, *args, **kwargs)
        return made

    construct.__qualname__ = f"unchecked({cls.__qualname__})"
    return construct


if TYPE_CHECKING:

    def unchecked(cls: C) -> C:
        """A constructor of ``cls`` that skips :func:`typed_init`'s type check."""

else:

    def unchecked(cls):
        """A constructor of ``cls`` that skips :func:`typed_init`'s type check, for code
        that builds values from values already checked (the planning core).

        For mypy the result is ``cls`` itself, so that every call's arguments are checked
        against the class's fields; at run time it is a plain function that allocates the
        object and runs the class's own ``__init__`` (its ``__post_init__`` field checks
        included). Use it to construct only: it is not the class (``isinstance`` needs
        ``cls``). (Defined without annotations here so that no run-time checker holds the
        function to the static type.)
        """
        return _unchecked(cls)


def typed_init(cls: C) -> C:
    """``cls`` with its ``__init__`` checked (apply above ``@dataclass``).

    Costs nothing at import: the checked ``__init__`` is compiled on the
    first construction and replaces this placeholder on the class.
    """
    original = vars(cls).get("__init__") or getattr(cls, "__init__")  # noqa: B009  # mypy refuses cls.__init__
    _ORIGINAL_INITS[cls] = original

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        checked: Callable[..., None] = vars(cls)["__init__"]
        if checked is __init__:  # the first construction: compile once
            checked = _compile_init(cls, original)
            type.__setattr__(cls, "__init__", checked)
        checked(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = original.__doc__
    __init__.__wrapped__ = original  # type: ignore[attr-defined]  # inspect.signature follows it
    cls.__init__ = __init__  # type: ignore[misc]  # replacing a method on purpose
    return cls


def typed(function: F) -> F:
    """``function`` with its arguments checked against its annotations (compiled on first call)."""
    compiled: list[Callable[..., object]] = []

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        if not compiled:
            compiled.append(_compile_function(function))
        return compiled[0](*args, **kwargs)

    return typing.cast(F, wrapper)


def _hints(function: Callable[..., object]) -> dict[str, object]:
    """The resolved annotations; those that do not resolve (a name imported only for type
    checking) are left unchecked rather than failing the call."""
    try:
        return typing.get_type_hints(function)
    except Exception:  # an unresolvable name: check what resolves one by one
        found: dict[str, object] = {}
        namespace = getattr(function, "__globals__", {})
        for name, hint in getattr(function, "__annotations__", {}).items():
            try:
                found[name] = eval(hint, namespace) if isinstance(hint, str) else hint
            except Exception:  # unresolvable: not checked
                continue
        return found


def _compile_function(function: Callable[..., object]) -> Callable[..., object]:
    signature = inspect.signature(function)
    hints = _hints(function)
    owner = function.__qualname__
    checks = {
        name: (check, hints[name])
        for name in signature.parameters
        if name in hints and (check := _check_for(hints[name])) is not None
    }

    def checked(*args: object, **kwargs: object) -> object:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise KVPureTypeError(f"{owner}: {err}") from None
        for name, value in bound.arguments.items():
            entry = checks.get(name)
            if entry is not None and not entry[0](value):
                _refuse(owner, name, entry[1], value)
        return function(*args, **kwargs)

    return checked
