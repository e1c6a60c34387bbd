"""Audit a server's BlockStored events against the hash settings a router uses.

A router that computes the block hashes of incoming prompts must use the
server's algorithm, NONE_HASH seed, hash block size and vLLM hashing rules,
and compare in the form the events carry (64-bit ints or digest bytes);
otherwise it never matches and nothing says why. :func:`audit_batches`
recomputes every ``BlockStored`` with kvpure's hasher
(:mod:`kvpure.events.audit_check` says exactly what can be recomputed) and,
where the router's settings do not reproduce an event, looks for the
settings that do: other seeds (from ``candidate_seeds``, and PYTHONHASHSEED
unset), the other algorithms, the event's own block size (and
``candidate_block_sizes``), the other vLLM profile. The explanation names
every setting that differs, fewest changes first.

The seed only reaches root blocks (parent None): a chained block with a
published (bytes) parent checks everything but the seed. With int hashes a
chained block needs its parent's full hash, which only an earlier event
recomputed by this audit gives; a child of a block that disagreed disagrees
too (the router cannot reproduce its prefix), a child of a block never seen
is unverifiable.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from kvpure.errors import InvalidFieldError
from kvpure.events.audit_check import (
    AuditStatus,
    Outcome,
    ParentSource,
    Settings,
    check_event,
    event_lookahead,
    has_lookahead_hashes,
    low_64_bits,
)
from kvpure.events.errors import KVEventArgumentTypeError
from kvpure.events.types import BlockStored, KVEventBatch
from kvpure.field_checks import check_int
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.scheme import (
    DEFAULT_HASH_PROFILE,
    HASH_PROFILES,
    HashScheme,
    VllmHashProfile,
    none_hash_from_seed,
)

DEFAULT_CANDIDATE_SEEDS: tuple[str, ...] = ("0", "42")
MAX_CHANGES = 2
"""The diagnosis tries settings differing from the router's in at most this many ways."""


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
        check_int("block_size", self.block_size, minimum=1)
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
        return _scheme(self)


@dataclass(frozen=True, slots=True)
class _Seed:
    label: str
    value: str | None
    known: bool
    """False for the router's own NONE_HASH when its seed is unknown."""
    none_hash_hex: str | None = None


@dataclass(frozen=True, slots=True)
class _Guess:
    seed: _Seed
    algorithm: str
    block_size: int
    profile: VllmHashProfile
    lookahead: int = 0

    def settings(self, yours: _Guess, your_none_hash: bytes) -> Settings:
        """Settings to compute with (NONE_HASH None where this guess cannot know it)."""
        none_hash: bytes | None
        if not self.seed.known:
            none_hash = your_none_hash if self.algorithm == yours.algorithm else None
        elif self.seed.value is not None:
            none_hash = none_hash_from_seed(self.algorithm, self.seed.value)
        else:
            unseeded = self.profile.unseeded_none_hash_seed(self.algorithm)
            none_hash = None if unseeded is None else none_hash_from_seed(self.algorithm, unseeded)
        return Settings(self.algorithm, none_hash, self.block_size, self.profile, self.lookahead)

    def changes(self, yours: _Guess) -> Explanation:
        found: list[SettingChange] = []
        if yours.seed.label != self.seed.label:
            found.append(
                SettingChange("seed", yours.seed.value, self.seed.value, yours.seed.none_hash_hex)
            )
        pairs: tuple[tuple[str, SettingValue, SettingValue], ...] = (
            ("algorithm", yours.algorithm, self.algorithm),
            ("block_size", yours.block_size, self.block_size),
            ("profile", yours.profile.name, self.profile.name),
            ("num_hash_lookahead_tokens", yours.lookahead, self.lookahead),
        )
        found += (SettingChange(name, a, b) for name, a, b in pairs if a != b)
        return tuple(found)


def _scheme(router: RouterSettings, *, with_lookahead: bool = True) -> HashScheme:
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


def _hash_rules(profile: VllmHashProfile) -> VllmHashProfile:
    """What of a profile changes hash values: 0.34 = 0.33 + int32 token ids, a range
    check (a server's events never carry other ids), so both hash alike."""
    return replace(profile, name="", vllm_version="", int32_token_ids=False)


def _distinct_rules(yours: VllmHashProfile) -> tuple[VllmHashProfile, ...]:
    """The router's profile, then each other profile whose hashes can differ from those
    listed before it (so the diagnosis names 0.33 or 0.34, not both)."""
    found = [yours]
    for profile in HASH_PROFILES.values():
        if all(_hash_rules(profile) != _hash_rules(known) for known in found):
            found.append(profile)
    return tuple(found)


def _divisors(number: int) -> list[int]:
    """The divisors of ``number``, largest first (none for ``number < 1``)."""
    small = [n for n in range(1, math.isqrt(max(number, 0)) + 1) if number % n == 0]
    return sorted({*small, *(number // n for n in small)}, reverse=True)


def _seed_label(seed: str | None) -> str:
    return "unset" if seed is None else repr(seed)


def _your_seed(scheme: HashScheme, options: AuditOptions) -> _Seed:
    if options.seed_unset:
        return _Seed("unset", None, True)
    if options.seed is not None:
        if none_hash_from_seed(scheme.algorithm, options.seed) != scheme.none_hash:
            raise InvalidFieldError(
                field="seed",
                value=options.seed,
                reason=f"does not give the scheme's NONE_HASH under {scheme.algorithm}",
            )
        return _Seed(_seed_label(options.seed), options.seed, True)
    for seed in (*options.candidate_seeds, None):
        if seed is None:
            unseeded = scheme.profile.unseeded_none_hash_seed(scheme.algorithm)
            if (
                unseeded is not None
                and none_hash_from_seed(scheme.algorithm, unseeded) == scheme.none_hash
            ):
                return _Seed("unset", None, True)
        elif none_hash_from_seed(scheme.algorithm, seed) == scheme.none_hash:
            return _Seed(_seed_label(seed), seed, True)
    none_hash = scheme.none_hash.hex()
    return _Seed(f"unknown (NONE_HASH {none_hash[:16]}...)", None, False, none_hash)


class _Auditor:
    """The audit's state across a stream: full hashes recomputed per guess."""

    def __init__(
        self, scheme: HashScheme, options: AuditOptions, seed: _Seed | None, lookahead: int
    ) -> None:
        self.none_hash = scheme.none_hash
        self.yours = _Guess(
            seed or _your_seed(scheme, options),
            scheme.algorithm,
            scheme.block_size,
            scheme.profile,
            lookahead,
        )
        self.settings = self.yours.settings(self.yours, scheme.none_hash)
        self.options = options
        self.lora_paths: Mapping[str, str] = dict(options.lora_paths)
        self.known: dict[_Guess, dict[int, tuple[bytes, ...]]] = {}
        self.origin: dict[int | bytes, AuditStatus] = {}
        seeds = [self.yours.seed]
        for value in (*options.candidate_seeds, None):
            seed = _Seed(_seed_label(value), value, True)
            if seed.label not in {s.label for s in seeds}:
                seeds.append(seed)
        self.seeds = tuple(seeds)
        self.profiles = _distinct_rules(scheme.profile)

    def _check(self, event: BlockStored, guess: _Guess, settings: Settings) -> Outcome:
        known = self.known.setdefault(guess, {})
        outcome = check_event(event, settings, known, self.lora_paths)
        if outcome.status is AuditStatus.AGREES and isinstance(event.block_hashes[0], int):
            for digest in outcome.digests:
                key = low_64_bits(digest)
                if digest not in known.get(key, ()):
                    known[key] = (*known.get(key, ()), digest)
        return outcome

    def _guesses(self, event: BlockStored) -> Iterator[_Guess]:
        # the seed reaches a block through its chain's root: a published parent cuts it off
        published = isinstance(event.parent_block_hash, bytes)
        seeds = (self.yours.seed,) if published else self.seeds
        # the hash block size divides the event's block size (equal unless groups differ)
        sizes = dict.fromkeys(
            (
                self.yours.block_size,
                *_divisors(event.block_size),
                *self.options.candidate_block_sizes,
            )
        )
        try:  # L: the router's, and the one the event shows
            lookaheads = dict.fromkeys((self.yours.lookahead, event_lookahead(event)))
        except ValueError:
            lookaheads = {self.yours.lookahead: None}
        guesses = [
            _Guess(seed, algorithm, size, profile, lookahead)
            for seed, algorithm, size, profile, lookahead in itertools.product(
                seeds, HASH_ALGORITHM_NAMES, sizes, self.profiles, lookaheads
            )
            if not lookahead or has_lookahead_hashes(profile)
        ]
        by_changes = sorted(guesses, key=lambda g: len(g.changes(self.yours)))
        return (g for g in by_changes if 0 < len(g.changes(self.yours)) <= MAX_CHANGES)

    def _diagnose(self, event: BlockStored) -> tuple[Explanation, ...]:
        found: list[Explanation] = []
        fewest: int | None = None
        for guess in self._guesses(event):
            changes = guess.changes(self.yours)
            if fewest is not None and len(changes) > fewest:
                break
            outcome = self._check(event, guess, guess.settings(self.yours, self.none_hash))
            if outcome.status is AuditStatus.AGREES:
                found.append(changes)
                fewest = len(changes)
        return tuple(found)

    def _form_change(self, event: BlockStored) -> SettingChange | None:
        form = self.options.hash_form
        carried = HashForm.INT if isinstance(event.block_hashes[0], int) else HashForm.BYTES
        if form is None or form is carried:
            return None
        return SettingChange("hash_form", form.value, carried.value)

    def audit(self, event: BlockStored, batch_index: int, event_index: int) -> EventAudit:
        outcome = self._check(event, self.yours, self.settings)
        status, reason = outcome.status, outcome.reason
        parent = event.parent_block_hash
        if outcome.parent is ParentSource.UNKNOWN and parent is not None:
            if self.origin.get(parent) is AuditStatus.DISAGREES:
                status = AuditStatus.DISAGREES
                reason = "its parent block is one that disagreed"
            elif parent in self.origin:
                reason += "; the event that stored it could not be checked either"
            else:
                reason += " and no earlier event gave it (the capture began later?)"
        explanations: tuple[Explanation, ...] = ()
        if status is not AuditStatus.AGREES and self.options.diagnose:
            explanations = self._diagnose(event)
        if outcome.assumed_keys and explanations:
            # another setting reproduces it with the same assumption: the router's is wrong
            status = AuditStatus.DISAGREES
            reason = "the recomputed hashes differ (another setting reproduces them)"
        form = self._form_change(event) if event.block_hashes else None
        if form is not None:
            if status is AuditStatus.AGREES:
                status, reason, explanations = AuditStatus.DISAGREES, "", ((),)
            reason = "; ".join(
                r
                for r in (
                    reason,
                    f"the events carry {form.server} hashes, the router compares {form.yours}",
                )
                if r
            )
            explanations = tuple((*e, form) for e in explanations)
        for block_hash in event.block_hashes:
            if self.origin.get(block_hash) is not AuditStatus.AGREES:
                self.origin[block_hash] = status
        return EventAudit(
            batch_index=batch_index,
            event_index=event_index,
            status=status,
            parent=outcome.parent,
            reason=reason,
            num_hashes=len(event.block_hashes),
            explanations=explanations,
        )


def _auditor(router: HashScheme | RouterSettings, options: AuditOptions | None) -> _Auditor:
    if options is None:
        options = AuditOptions()
    elif not isinstance(options, AuditOptions):
        raise KVEventArgumentTypeError(argument="options", expected="AuditOptions", value=options)
    if isinstance(router, RouterSettings):
        if options.seed is not None or options.seed_unset:
            raise InvalidFieldError(
                field="options.seed",
                value=options.seed,
                reason="the seed is given once: RouterSettings.seed holds it; leave "
                "AuditOptions.seed and seed_unset out",
            )
        seed = _Seed(_seed_label(router.seed), router.seed, True)
        # the audit reads NONE_HASH, algorithm, block size and rules from the scheme, L from
        # the settings (it hashes the events' own blocks, whatever the scheme's L)
        scheme = _scheme(router, with_lookahead=False)
        return _Auditor(scheme, options, seed, router.num_hash_lookahead_tokens)
    if not isinstance(router, HashScheme):
        raise KVEventArgumentTypeError(
            argument="router", expected="RouterSettings or HashScheme", value=router
        )
    lookahead = getattr(router, "num_hash_lookahead_tokens", 0)
    return _Auditor(router, options, None, lookahead)


def iter_audit(
    batches: Iterable[KVEventBatch],
    router: HashScheme | RouterSettings,
    options: AuditOptions | None = None,
) -> Iterator[EventAudit | None]:
    """The verdict on each event as the batches arrive (None for events that are not
    BlockStored): for a live stream. :func:`audit_batches` collects them.

    ``router`` is the router's :class:`RouterSettings` (the seed given once, with the
    rest), or a :class:`HashScheme` (its seed then found among the candidates, or given
    as ``options.seed``)."""
    auditor = _auditor(router, options)
    for batch_index, batch in enumerate(batches):
        if not isinstance(batch, KVEventBatch):
            raise KVEventArgumentTypeError(
                argument=f"batches[{batch_index}]", expected="KVEventBatch", value=batch
            )
        for event_index, event in enumerate(batch.events):
            if isinstance(event, BlockStored):
                yield auditor.audit(event, batch_index, event_index)
            else:
                yield None


def audit_batches(
    batches: Iterable[KVEventBatch],
    router: HashScheme | RouterSettings,
    options: AuditOptions | None = None,
) -> AuditReport:
    """Recompute every BlockStored of ``batches`` under the router's settings; explain
    mismatches (see :func:`iter_audit`)."""
    audits: list[EventAudit] = []
    others = 0
    for audit in iter_audit(batches, router, options):
        if audit is None:
            others += 1
        else:
            audits.append(audit)
    return AuditReport(tuple(audits), others)
