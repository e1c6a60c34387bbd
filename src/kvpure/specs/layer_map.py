"""An ordered, immutable map from layer name to a value (usually a KV cache spec).

vLLM's grouping depends on layer order (first-seen buckets, the last layer
as the EAGLE layer) and a plain PMap has no order, so :class:`LayerMap`
keeps the names in order beside a PMap for lookup. Equality and hashing
ignore order, as for the dicts vLLM compares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pyrsistent import PMap, pmap

from kvpure.errors import FieldTypeError, InvalidFieldError

V = TypeVar("V", covariant=True)
W = TypeVar("W")


@dataclass(frozen=True, slots=True, eq=False)
class LayerMap(Mapping[str, V], Generic[V]):
    """Layer names in model order, each mapped to a value; immutable and hashable."""

    names: tuple[str, ...]
    by_name: PMap[str, V]
    _values: tuple[V, ...] = field(init=False, repr=False)
    _lookup: dict[str, V] = field(init=False, repr=False)
    """``by_name`` as a plain dict (never handed out, never changed): a dict look-up is
    many times quicker than a PMap's, and the planner looks layers up often."""
    _kinds: tuple[frozenset[type], frozenset[type]] | None = field(
        default=None, init=False, repr=False
    )
    """The classes of the names and of the values, worked out on first use (the map never
    changes, so a boundary check reads them once per map, not once per call)."""

    def __post_init__(self) -> None:
        if len(self.names) != len(self.by_name):
            raise InvalidFieldError(
                field="names",
                value=self.names,
                reason="layer names must be unique and match the lookup map",
            )
        lookup = dict(self.by_name.items())
        object.__setattr__(self, "_lookup", lookup)
        object.__setattr__(self, "_values", tuple(lookup[n] for n in self.names))

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, W]]) -> LayerMap[W]:
        """Build from ``(name, value)`` pairs in order; a repeated name is an error."""
        names: list[str] = []
        lookup: dict[str, W] = {}
        for name, value in pairs:
            if name in lookup:
                raise InvalidFieldError(field=name, value=name, reason="layer name repeated")
            names.append(name)
            lookup[name] = value
        return LayerMap(names=tuple(names), by_name=pmap(lookup))

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, W]) -> LayerMap[W]:
        """Build from any mapping, keeping its iteration order."""
        if isinstance(mapping, LayerMap):
            return mapping
        if not isinstance(mapping, Mapping):
            raise FieldTypeError(
                field="mapping", value=mapping, reason="must map layer names (str) to values"
            )
        for name in mapping:
            if not isinstance(name, str):
                raise FieldTypeError(field="mapping", value=name, reason="a layer name is a str")
        return LayerMap(names=tuple(mapping), by_name=pmap(dict(mapping)))

    @classmethod
    def empty(cls) -> LayerMap[W]:
        """The map with no layers."""
        return LayerMap(names=(), by_name=pmap())

    def __getitem__(self, name: str) -> V:
        return self._lookup[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._lookup

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LayerMap):
            return self.by_name == other.by_name
        if isinstance(other, Mapping):
            return dict(self.by_name) == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.by_name)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: {v!r}" for n, v in zip(self.names, self._values, strict=True))
        return f"LayerMap({{{inner}}})"

    def kinds(self) -> tuple[frozenset[type], frozenset[type]]:
        """``(classes of the names, classes of the values)``, computed once per map."""
        kinds = self._kinds
        if kinds is None:
            kinds = (
                frozenset(type(name) for name in self.names),
                frozenset(type(value) for value in self._values),
            )
            object.__setattr__(self, "_kinds", kinds)
        return kinds

    def ordered_values(self) -> tuple[V, ...]:
        """The values in layer order."""
        return self._values

    def ordered_items(self) -> tuple[tuple[str, V], ...]:
        """``(name, value)`` pairs in layer order."""
        return tuple(zip(self.names, self._values, strict=True))

    def subset(self, names: Iterable[str]) -> LayerMap[V]:
        """The map restricted to ``names``, in the order given."""
        lookup = self._lookup
        return LayerMap.from_pairs((n, lookup[n]) for n in names)

    def replace_values(self, updates: Mapping[str, W]) -> LayerMap[V | W]:
        """A new map with some values replaced (names and order unchanged)."""
        if not updates:
            return self
        for name in updates:
            if name not in self._lookup:
                raise InvalidFieldError(field=name, value=name, reason="no such layer")
        return LayerMap(names=self.names, by_name=self.by_name.update(updates))

    def map_values(self, fn: Callable[[V], W]) -> LayerMap[W]:
        """A new map with ``fn`` applied to every value."""
        return LayerMap.from_pairs((n, fn(v)) for n, v in self.ordered_items())
