"""The audit's guesses: the settings a server may use, tried when the router's do not match.

A :class:`Guess` is one combination of NONE_HASH seed, algorithm, block size,
vLLM hashing rules and lookahead; ``changes`` names how it differs from the
router's. ``kvpure.events.audit`` builds them (its ``_Auditor``) and tries them
fewest changes first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvpure.errors import InvalidFieldError
from kvpure.events.audit_check import Settings
from kvpure.events.audit_types import AuditOptions, Explanation, SettingChange, SettingValue
from kvpure.hashing.scheme import HASH_PROFILES, HashScheme, VllmHashProfile, none_hash_from_seed

__all__ = [
    "Guess",
    "Seed",
    "distinct_rules",
    "divisors",
    "hash_rules",
    "seed_label",
    "your_seed",
]


@dataclass(frozen=True, slots=True)
class Seed:
    label: str
    value: str | None
    known: bool
    """False for the router's own NONE_HASH when its seed is unknown."""
    none_hash_hex: str | None = None


@dataclass(frozen=True, slots=True)
class Guess:
    seed: Seed
    algorithm: str
    block_size: int
    profile: VllmHashProfile
    lookahead: int = 0

    def settings(self, yours: Guess, your_none_hash: bytes) -> Settings:
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

    def changes(self, yours: Guess) -> Explanation:
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


def hash_rules(profile: VllmHashProfile) -> VllmHashProfile:
    """What of a profile changes hash values: 0.34 = 0.33 + int32 token ids, a range
    check (a server's events never carry other ids), so both hash alike."""
    return replace(profile, name="", vllm_version="", int32_token_ids=False)


def distinct_rules(yours: VllmHashProfile) -> tuple[VllmHashProfile, ...]:
    """The router's profile, then each other profile whose hashes can differ from those
    listed before it (so the diagnosis names 0.33 or 0.34, not both)."""
    found = [yours]
    for profile in HASH_PROFILES.values():
        if all(hash_rules(profile) != hash_rules(known) for known in found):
            found.append(profile)
    return tuple(found)


def divisors(number: int) -> list[int]:
    """The divisors of ``number``, largest first (none for ``number < 1``)."""
    small = [n for n in range(1, math.isqrt(max(number, 0)) + 1) if number % n == 0]
    return sorted({*small, *(number // n for n in small)}, reverse=True)


def seed_label(seed: str | None) -> str:
    return "unset" if seed is None else repr(seed)


def your_seed(scheme: HashScheme, options: AuditOptions) -> Seed:
    if options.seed_unset:
        return Seed("unset", None, True)
    if options.seed is not None:
        if none_hash_from_seed(scheme.algorithm, options.seed) != scheme.none_hash:
            raise InvalidFieldError(
                field="seed",
                value=options.seed,
                reason=f"does not give the scheme's NONE_HASH under {scheme.algorithm}",
            )
        return Seed(seed_label(options.seed), options.seed, True)
    for seed in (*options.candidate_seeds, None):
        if seed is None:
            unseeded = scheme.profile.unseeded_none_hash_seed(scheme.algorithm)
            if (
                unseeded is not None
                and none_hash_from_seed(scheme.algorithm, unseeded) == scheme.none_hash
            ):
                return Seed("unset", None, True)
        elif none_hash_from_seed(scheme.algorithm, seed) == scheme.none_hash:
            return Seed(seed_label(seed), seed, True)
    none_hash = scheme.none_hash.hex()
    return Seed(f"unknown (NONE_HASH {none_hash[:16]}...)", None, False, none_hash)
