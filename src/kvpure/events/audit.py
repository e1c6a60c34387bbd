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

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from kvpure.errors import InvalidFieldError
from kvpure.events.audit_check import (
    AuditStatus,
    Keys,
    Outcome,
    ParentSource,
    Settings,
    check_event,
    event_lookahead,
    has_lookahead_hashes,
    is_masked,
    low_64_bits,
)
from kvpure.events.audit_types import (
    DEFAULT_CANDIDATE_SEEDS,
    AuditOptions,
    AuditReport,
    EventAudit,
    Explanation,
    HashForm,
    RouterSettings,
    SettingChange,
    SettingValue,
    router_scheme,
)
from kvpure.events.errors import KVEventArgumentTypeError
from kvpure.events.types import BlockStored, KVEventBatch
from kvpure.hashing.algorithms import HASH_ALGORITHM_NAMES
from kvpure.hashing.scheme import (
    HASH_PROFILES,
    HashScheme,
    VllmHashProfile,
    none_hash_from_seed,
)

__all__ = [
    "DEFAULT_CANDIDATE_SEEDS",
    "MAX_CHANGES",
    "AuditOptions",
    "AuditReport",
    "EventAudit",
    "Explanation",
    "HashForm",
    "RouterSettings",
    "SettingChange",
    "SettingValue",
    "audit_batches",
    "iter_audit",
]

MAX_CHANGES = 2
"""The diagnosis tries settings differing from the router's in at most this many ways."""


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
        self.learned: dict[_Guess, dict[tuple[bytes, tuple[int, ...]], Keys]] = {}
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
        learned = self.learned.setdefault(guess, {})
        outcome = check_event(event, settings, known, self.lora_paths, learned)
        if outcome.status is not AuditStatus.AGREES:
            return outcome
        if isinstance(event.block_hashes[0], int):
            for digest in outcome.digests:
                key = low_64_bits(digest)
                if digest not in known.get(key, ()):
                    known[key] = (*known.get(key, ()), digest)
        if outcome.keys and outcome.parent_digest is not None:
            self._learn(event, outcome, outcome.parent_digest, learned, settings.block_size)
        return outcome

    @staticmethod
    def _learn(
        event: BlockStored,
        outcome: Outcome,
        parent: bytes,
        learned: dict[tuple[bytes, tuple[int, ...]], Keys],
        size: int,
    ) -> None:
        """Keep the keys this event published that a block without keys would not have
        (a salt, an image, a LoRA name), for groups that leave those blocks out."""
        for index, (digest, keys) in enumerate(zip(outcome.digests, outcome.keys, strict=True)):
            own = keys[0] if isinstance(keys, tuple) and event.lookahead_token_ids else keys
            if own is not None:
                block = tuple(event.token_ids[index * size : (index + 1) * size])
                learned[(parent, block)] = keys
            parent = digest

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


def _masked(event: object) -> bool:
    return isinstance(event, BlockStored) and is_masked(event)


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
        scheme = router_scheme(router, with_lookahead=False)
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
    if not isinstance(batches, Iterable):
        raise KVEventArgumentTypeError(
            argument="batches", expected="an iterable of KVEventBatch", value=batches
        )
    for batch_index, batch in enumerate(batches):
        if not isinstance(batch, KVEventBatch):
            raise KVEventArgumentTypeError(
                argument=f"batches[{batch_index}]", expected="KVEventBatch", value=batch
            )
        # groups that leave blocks out (Mamba) come last: the other groups' events of the
        # same step publish the keys of those blocks
        order = sorted(range(len(batch.events)), key=lambda i: _masked(batch.events[i]))
        verdicts: dict[int, EventAudit] = {}
        for event_index in order:
            event = batch.events[event_index]
            if isinstance(event, BlockStored):
                verdicts[event_index] = auditor.audit(event, batch_index, event_index)
        for event_index in range(len(batch.events)):
            yield verdicts.get(event_index)


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
