"""Hash schemes and vLLM version profiles.

A :class:`HashScheme` is everything a server's block hashes depend on apart
from the request: the algorithm, the block size (vLLM's ``hash_block_size``),
the NONE_HASH that seeds every chain, and the :class:`VllmHashProfile` whose
rules it follows. vLLM keeps NONE_HASH in a module global set from the
``PYTHONHASHSEED`` environment variable; here it is a field, derived from a
seed string the caller passes (:func:`none_hash_seed_from_environment` reads
the variable for callers who want that, at the edge).

A profile is a frozen value holding one vLLM release's rule choices. A new
vLLM rule is a new profile, never an ``if version`` in the code.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kvpure.errors import InvalidFieldError
from kvpure.hashing.algorithms import HashAlgorithm
from kvpure.hashing.errors import RandomNoneHashNotRequestedError, UnknownHashProfileError
from kvpure.hashing.types import BlockHash
from kvpure.runtime_types import typed_init

RANDOM_NONE_HASH_NUM_BYTES = 32


class ExtraKeyStyle(enum.Enum):
    """How a block's extra keys are written."""

    BARE = "bare"
    """0.26: the LoRA name, ``(mm_id, offset)``, the salt, the embeddings digest."""
    TAGGED = "tagged"
    """0.33: ``("lora", name, path)``, ``("mm", id, offset)``, ``("cache_salt", s)``,
    ``("prompt_embeds", digest)``."""


class MmResumeRule(enum.Enum):
    """Where the multimodal scan starts when hashing resumes at a token > 0."""

    LAST_ITEM = "last_item"
    """0.26: start at the last multimodal item (vLLM passes index -1)."""
    FIRST_OVERLAPPING = "first_overlapping"
    """0.33: start at the first item that ends after the resume token."""


class RandomNoneHashForm(enum.Enum):
    """What a random NONE_HASH is when the profile's rule calls for one."""

    RAW_BYTES = "raw_bytes"
    """0.26: ``os.urandom(32)`` itself (32 bytes, whatever the algorithm)."""
    HASH_OF_RANDOM_HEX = "hash_of_random_hex"
    """0.33: ``hash_fn(os.urandom(32).hex())`` (the algorithm's digest size)."""


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class VllmHashProfile:
    """The hashing rules of one vLLM release."""

    name: str
    vllm_version: str
    extra_key_style: ExtraKeyStyle
    mm_resume_rule: MmResumeRule
    unseeded_seed: str | None
    """The seed used without PYTHONHASHSEED for ``unseeded_seeded_algorithms``."""
    unseeded_seeded_algorithms: frozenset[str]
    """Algorithms that get ``unseeded_seed`` without PYTHONHASHSEED; others get a
    random NONE_HASH."""
    random_none_hash_form: RandomNoneHashForm

    def unseeded_none_hash_seed(self, algorithm: str) -> str | None:
        """The seed vLLM uses without PYTHONHASHSEED, or None where it is random."""
        if self.unseeded_seed is not None and algorithm in self.unseeded_seeded_algorithms:
            return self.unseeded_seed
        return None


VLLM_0_26 = VllmHashProfile(
    name="vllm-0.26",
    vllm_version="0.26.0",
    extra_key_style=ExtraKeyStyle.BARE,
    mm_resume_rule=MmResumeRule.LAST_ITEM,
    unseeded_seed=None,
    unseeded_seeded_algorithms=frozenset(),
    random_none_hash_form=RandomNoneHashForm.RAW_BYTES,
)

VLLM_0_33 = VllmHashProfile(
    name="vllm-0.33",
    vllm_version="0.33.0",
    extra_key_style=ExtraKeyStyle.TAGGED,
    mm_resume_rule=MmResumeRule.FIRST_OVERLAPPING,
    unseeded_seed="vllm-none-hash",
    unseeded_seeded_algorithms=frozenset(a for a in HashAlgorithm if a.is_cryptographic),
    random_none_hash_form=RandomNoneHashForm.HASH_OF_RANDOM_HEX,
)

HASH_PROFILES: Mapping[str, VllmHashProfile] = MappingProxyType(
    {profile.name: profile for profile in (VLLM_0_26, VLLM_0_33)}
)
DEFAULT_HASH_PROFILE = VLLM_0_26

MAX_HASH_BLOCK_SIZE = 2**20
"""The largest hash block size accepted; vLLM's block sizes are at most a few thousand."""


def get_hash_profile(name: str) -> VllmHashProfile:
    """The profile called ``name`` (``"vllm-0.26"`` or ``"vllm-0.33"``)."""
    try:
        return HASH_PROFILES[name]
    except KeyError:
        raise UnknownHashProfileError(name=name, valid_names=tuple(HASH_PROFILES)) from None


def none_hash_from_seed(algorithm: HashAlgorithm | str, seed: str) -> BlockHash:
    """NONE_HASH as vLLM derives it from PYTHONHASHSEED: the hash of the seed *string*."""
    if not isinstance(seed, str):
        raise InvalidFieldError(
            field="seed",
            value=seed,
            reason="PYTHONHASHSEED is a string: pass it as the server's environment holds it, "
            f"e.g. seed={str(seed)!r}",
        )
    return BlockHash(HashAlgorithm.from_name(algorithm).hash_fn(seed))


def random_none_hash(
    algorithm: HashAlgorithm | str, profile: VllmHashProfile, *, entropy: bytes | None = None
) -> BlockHash:
    """A random NONE_HASH in the profile's form; ``entropy`` defaults to ``os.urandom(32)``."""
    HashAlgorithm.from_name(algorithm)
    raw = os.urandom(RANDOM_NONE_HASH_NUM_BYTES) if entropy is None else entropy
    if profile.random_none_hash_form is RandomNoneHashForm.RAW_BYTES:
        return BlockHash(raw)
    return none_hash_from_seed(algorithm, raw.hex())


def none_hash_seed_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """PYTHONHASHSEED from ``environ`` (default ``os.environ``): an edge helper."""
    source = os.environ if environ is None else environ
    return source.get("PYTHONHASHSEED")


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HashScheme:
    """Algorithm, block size, NONE_HASH and vLLM profile of a server's block hashes."""

    algorithm: HashAlgorithm
    """One of vLLM's four algorithms; a name (``"sha256"``) is turned into the member."""
    block_size: int
    none_hash: BlockHash
    profile: VllmHashProfile = DEFAULT_HASH_PROFILE

    def __post_init__(self) -> None:
        object.__setattr__(self, "algorithm", HashAlgorithm.from_name(self.algorithm))
        if type(self.block_size) is not int:
            raise InvalidFieldError(
                field="block_size", value=self.block_size, reason="must be an int (tokens)"
            )
        if self.block_size > MAX_HASH_BLOCK_SIZE:
            raise InvalidFieldError(
                field="block_size",
                value=self.block_size,
                reason=f"must be at most {MAX_HASH_BLOCK_SIZE} tokens",
            )
        if type(self.none_hash) is not bytes:
            raise InvalidFieldError(
                field="none_hash", value=self.none_hash, reason="must be bytes (a digest)"
            )
        if not isinstance(self.profile, VllmHashProfile):
            raise InvalidFieldError(
                field="profile", value=self.profile, reason="must be VLLM_0_26 or VLLM_0_33"
            )
        if self.block_size < 1:
            raise InvalidFieldError(
                field="block_size",
                value=self.block_size,
                reason="the hash block size must be at least 1 token",
            )
        if not self.none_hash:
            raise InvalidFieldError(
                field="none_hash", value=self.none_hash, reason="NONE_HASH must not be empty"
            )

    @classmethod
    def from_seed(
        cls,
        *,
        algorithm: HashAlgorithm | str,
        block_size: int,
        seed: str | None,
        profile: VllmHashProfile = DEFAULT_HASH_PROFILE,
        random_none_hash: bool = False,
    ) -> HashScheme:
        """The scheme of a server started with ``PYTHONHASHSEED=seed``.

        ``seed=None`` means PYTHONHASHSEED was unset: the profile's rule applies
        (0.33 hashes ``"vllm-none-hash"`` for sha256 and sha256_cbor). Where that
        rule is a random NONE_HASH, ``random_none_hash=True`` must say so, else
        :class:`~kvpure.errors.RandomNoneHashNotRequestedError` is raised.
        """
        algorithm = HashAlgorithm.from_name(
            algorithm
        )  # a seed's type is checked where it is hashed
        if seed is None:
            seed = profile.unseeded_none_hash_seed(algorithm)
        if seed is not None:
            none_hash = none_hash_from_seed(algorithm, seed)
        elif random_none_hash:
            none_hash = _random_none_hash(algorithm, profile)
        else:
            raise RandomNoneHashNotRequestedError(profile=profile.name, algorithm=algorithm)
        return cls(algorithm=algorithm, block_size=block_size, none_hash=none_hash, profile=profile)


_random_none_hash = random_none_hash
