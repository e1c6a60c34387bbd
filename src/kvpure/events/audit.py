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
every setting that differs, fewest changes first (the candidate settings:
:mod:`kvpure.events.audit_guesses`).

The seed only reaches root blocks (parent None): a chained block with a
published (bytes) parent checks everything but the seed. With int hashes a
chained block needs its parent's full hash, which only an earlier event
recomputed by this audit gives; a child of a block that disagreed disagrees
too (the router cannot reproduce its prefix), a child of a block never seen
is unverifiable.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping

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
from kvpure.events.audit_guesses import (
    Guess,
    Seed,
    distinct_rules,
    divisors,
    seed_label,
    your_seed,
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
    HashScheme,
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


class _Auditor:
    """The audit's state across a stream: full hashes recomputed per guess."""

    def __init__(
        self, scheme: HashScheme, options: AuditOptions, seed: Seed | None, lookahead: int
    ) -> None:
        self.none_hash = scheme.none_hash
        self.yours = Guess(
            seed or your_seed(scheme, options),
            scheme.algorithm,
            scheme.block_size,
            scheme.profile,
            lookahead,
        )
        self.settings = self.yours.settings(self.yours, scheme.none_hash)
        self.options = options
        self.lora_paths: Mapping[str, str] = dict(options.lora_paths)
        self.known: dict[Guess, dict[int, tuple[bytes, ...]]] = {}
        self.learned: dict[Guess, dict[tuple[bytes, tuple[int, ...]], Keys]] = {}
        self.origin: dict[int | bytes, AuditStatus] = {}
        seeds = [self.yours.seed]
        for value in (*options.candidate_seeds, None):
            seed = Seed(seed_label(value), value, True)
            if seed.label not in {s.label for s in seeds}:
                seeds.append(seed)
        self.seeds = tuple(seeds)
        self.profiles = distinct_rules(scheme.profile)

    def _check(self, event: BlockStored, guess: Guess, settings: Settings) -> Outcome:
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

    def _guesses(self, event: BlockStored) -> Iterator[Guess]:
        # the seed reaches a block through its chain's root: a published parent cuts it off
        published = isinstance(event.parent_block_hash, bytes)
        seeds = (self.yours.seed,) if published else self.seeds
        # the hash block size divides the event's block size (equal unless groups differ)
        sizes = dict.fromkeys(
            (
                self.yours.block_size,
                *divisors(event.block_size),
                *self.options.candidate_block_sizes,
            )
        )
        try:  # L: the router's, and the one the event shows
            lookaheads = dict.fromkeys((self.yours.lookahead, event_lookahead(event)))
        except ValueError:
            lookaheads = {self.yours.lookahead: None}
        guesses = [
            Guess(seed, algorithm, size, profile, lookahead)
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
        seed = Seed(seed_label(router.seed), router.seed, True)
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
