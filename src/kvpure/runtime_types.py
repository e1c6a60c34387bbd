"""Runtime type checks at the public boundary, in users' own processes.

The public constructors (specs, plan values, settings, hash requests and
schemes, deployments) and the main entry points are checked by beartype
against their annotations; a wrong type raises
:class:`~kvpure.errors.KVPureTypeError` (a ``TypeError`` under kvpure's root).
Hot inner paths (the chain loop, the queue's per-block links) are not
decorated: they check what they must explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from beartype import BeartypeConf, beartype

from kvpure.errors import KVPureTypeError

__all__ = ["typed", "typed_init"]

_CHECK = beartype(conf=BeartypeConf(violation_type=KVPureTypeError))

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., object])


def typed(function: F) -> F:
    """``function`` with its arguments checked against its annotations."""
    return _CHECK(function)


def typed_init(cls: C) -> C:
    """``cls`` with its ``__init__`` checked (apply above ``@dataclass``)."""
    cls.__init__ = _CHECK(cls.__init__)  # type: ignore[misc]  # replacing a method on purpose
    return cls
