"""The audit's values: the router's settings, options, verdicts, explanations.

:mod:`kvpure.events.audit` computes them; this module holds what callers build
and read (``RouterSettings``, ``AuditOptions``, ``EventAudit``, ``AuditReport``,
``SettingChange``), each checked where it is built.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass

from kvpure.errors import InvalidFieldError
from kvpure.events.audit_check import AuditStatus, ParentSource, has_lookahead_hashes
from kvpure.events.errors import KVEventArgumentTypeError
from kvpure.field_checks import check_int
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.scheme import DEFAULT_HASH_PROFILE, HashScheme, VllmHashProfile

DEFAULT_CANDIDATE_SEEDS: tuple[str, ...] = ("0", "42")


class HashForm(enum.Enum):
    """How a router compares hashes with the events'."""

    INT = "int"
    """The low 64 bits, big-endian (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``)."""
    BYTES = "bytes"
    """The full digest (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``)."""


SettingValue = str | int | None
"""A setting's value as data: a seed (None: PYTHONHASHSEED unset), an algorithm,
profile or hash-form name, a block size or L."""


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One setting in which the server differs from the router, as data."""

    setting: str
    """``seed``, ``algorithm``, ``block_size``, ``profile``, ``num_hash_lookahead_tokens``
    or ``hash_form``."""
    yours: SettingValue
    server: SettingValue
    yours_none_hash: str | None = None
    """The router's NONE_HASH in hex when its seed is not known (``yours`` is None then)."""

    def value_text(self, value: SettingValue, *, yours: bool = False) -> str:
        """A value as the text report writes it (``'0'``, ``unset``, ``16``)."""
        if self.setting == "seed":
            if yours and self.yours_none_hash is not None:
                return f"unknown (NONE_HASH {self.yours_none_hash[:16]}...)"
            return "unset" if value is None else repr(value)
        return str(value)

    def as_json(self) -> dict[str, SettingValue]:
        """``{"setting", "yours", "server"}`` (and ``yours_none_hash`` when set)."""
        data: dict[str, SettingValue] = {
            "setting": self.setting,
            "yours": self.yours,
            "server": self.server,
        }
        if self.yours_none_hash is not None:
            data["yours_none_hash"] = self.yours_none_hash
        return data


Explanation = tuple[SettingChange, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EventAudit:
    """The verdict on one BlockStored event."""

    batch_index: int
    event_index: int
    status: AuditStatus
    parent: ParentSource
    reason: str
    num_hashes: int
    explanations: tuple[Explanation, ...] = ()
    """Sets of changes to the router's settings under which the event agrees (the
    fewest changes found; several when the event cannot tell them apart)."""


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Every BlockStored event's verdict, in stream order."""

    events: tuple[EventAudit, ...]
    num_other_events: int
    """BlockRemoved and AllBlocksCleared events (nothing to recompute)."""

    @property
    def all_agree(self) -> bool:
        return all(audit.status is AuditStatus.AGREES for audit in self.events)

    def count(self, status: AuditStatus) -> int:
        return sum(1 for audit in self.events if audit.status is status)

    def likely_explanation(self) -> Explanation | None:
        """The explanation shared by the most events that did not agree."""
        counts = Counter(e for audit in self.events for e in audit.explanations[:1])
        return counts.most_common(1)[0][0] if counts else None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditOptions:
    """How far the audit and its diagnosis look."""

    seed: str | None = None
    """The PYTHONHASHSEED the scheme's NONE_HASH came from, when known (else it is
    looked for among the candidate seeds; it lets the diagnosis keep the seed while
    trying another algorithm)."""
    seed_unset: bool = False
    """The router's PYTHONHASHSEED is unset: its NONE_HASH follows the profile's rule,
    and where that is random, root blocks are unverifiable rather than disagreeing."""
    candidate_seeds: tuple[str, ...] = DEFAULT_CANDIDATE_SEEDS
    candidate_block_sizes: tuple[int, ...] = ()
    lora_paths: tuple[tuple[str, str], ...] = ()
    """(LoRA name, path) pairs: vLLM 0.33 hashes the path, events carry only the name."""
    hash_form: HashForm | None = None
    """The form the router compares; None accepts whatever the events carry."""
    diagnose: bool = True

    def __post_init__(self) -> None:
        _check_type("AuditOptions.seed", self.seed, (str, type(None)), "a str or None")
        for name in ("seed_unset", "diagnose"):
            _check_type(f"AuditOptions.{name}", getattr(self, name), (bool,), "True or False")
        _check_items("AuditOptions.candidate_seeds", self.candidate_seeds, str, "str")
        _check_items("AuditOptions.candidate_block_sizes", self.candidate_block_sizes, int, "int")
        for index, size in enumerate(self.candidate_block_sizes):
            check_int(f"AuditOptions.candidate_block_sizes[{index}]", size, minimum=1)
        _check_items("AuditOptions.lora_paths", self.lora_paths, tuple, "(name, path) pairs")
        for index, pair in enumerate(self.lora_paths):
            if len(pair) != 2 or not all(isinstance(part, str) for part in pair):
                raise KVEventArgumentTypeError(
                    argument=f"AuditOptions.lora_paths[{index}]",
                    expected="a (name, path) pair of str",
                    value=pair,
                )
        _check_type("AuditOptions.hash_form", self.hash_form, (HashForm, type(None)), "HashForm")


def _check_type(name: str, value: object, kinds: tuple[type, ...], expected: str) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise KVEventArgumentTypeError(argument=name, expected=expected, value=value)


def _check_items(name: str, value: object, kind: type, expected: str) -> None:
    if not isinstance(value, tuple):
        raise KVEventArgumentTypeError(
            argument=name, expected=f"a tuple of {expected}", value=value
        )
    for index, item in enumerate(value):
        _check_type(f"{name}[{index}]", item, (kind,), expected)


@dataclass(frozen=True, slots=True, kw_only=True)
class RouterSettings:
    """A router's hash settings, each given once: what :func:`audit_batches` checks.

    The seed is the router's PYTHONHASHSEED (None: unset, the profile's rule), so the
    audit knows both the NONE_HASH and the seed it came from.
    """

    algorithm: str
    block_size: int
    seed: str | None
    profile: VllmHashProfile = DEFAULT_HASH_PROFILE
    num_hash_lookahead_tokens: int = 0

    def __post_init__(self) -> None:
        _check_type("RouterSettings.algorithm", self.algorithm, (str,), "an algorithm name")
        if self.algorithm not in HASH_ALGORITHM_NAMES:
            raise InvalidFieldError(
                field="algorithm",
                value=self.algorithm,
                reason=f"must be one of {', '.join(HASH_ALGORITHM_NAMES)}",
            )
        _check_type("RouterSettings.seed", self.seed, (str, type(None)), "a str or None")
        _check_type("RouterSettings.profile", self.profile, (VllmHashProfile,), "VllmHashProfile")
        check_int("block_size", self.block_size, minimum=1, maximum=2**32)
        check_int("num_hash_lookahead_tokens", self.num_hash_lookahead_tokens, minimum=0)
        if self.num_hash_lookahead_tokens and not has_lookahead_hashes(self.profile):
            raise InvalidFieldError(
                field="num_hash_lookahead_tokens",
                value=self.num_hash_lookahead_tokens,
                reason=f"{self.profile.name} has no lookahead hashes (vLLM 0.33 added them)",
            )

    def scheme(self) -> HashScheme:
        """The router's :class:`HashScheme` (a random NONE_HASH when the seed is unset
        and the profile's NONE_HASH is random then)."""
        return router_scheme(self)


def router_scheme(router: RouterSettings, *, with_lookahead: bool = True) -> HashScheme:
    lookahead: dict[str, int] = {}
    if with_lookahead and router.num_hash_lookahead_tokens:  # HashScheme's L (vLLM 0.33+)
        lookahead["num_hash_lookahead_tokens"] = router.num_hash_lookahead_tokens
    return HashScheme.from_seed(
        algorithm=router.algorithm,
        block_size=router.block_size,
        seed=router.seed,
        profile=router.profile,
        random_none_hash=True,
        **lookahead,
    )
