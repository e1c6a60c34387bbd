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
from dataclasses import dataclass, replace
from types import MappingProxyType

from kvpure.errors import FieldTypeError, InvalidFieldError
from kvpure.field_checks import check_bool
from kvpure.hashing.algorithms import HashAlgorithm
from kvpure.hashing.errors import RandomNoneHashNotRequestedError, UnknownHashProfileError
from kvpure.hashing.types import BlockHash
from kvpure.runtime_types import typed_init
from kvpure.versions import normalize_vllm_version

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
    lookahead_hashes: bool = False
    """Whether a block's hash may cover the L tokens after it (``num_hash_lookahead_tokens``):
    0.33 and 0.34 (``vllm/v1/core/kv_cache_utils.py``: ``get_request_block_hasher(...,
    num_hash_lookahead_tokens)``, ``generate_lookahead_block_hash_extra_keys``); 0.26's
    hasher has no such parameter."""
    int32_token_ids: bool = False
    """Whether token ids must fit in a signed int32: 0.34 keeps a request's tokens in a
    ``TokenBuffer`` (``vllm/v1/token_buffer.py``, an ``array("i")``), so ``Request`` cannot
    hold any other id (``OverflowError``); 0.26 and 0.33 keep Python lists of ints."""

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
    lookahead_hashes=True,
)

VLLM_0_34 = replace(VLLM_0_33, name="vllm-0.34", vllm_version="0.34.0", int32_token_ids=True)
"""0.33's rules, token ids held as signed int32 (every hash of such ids is 0.33's)."""

HASH_PROFILES: Mapping[str, VllmHashProfile] = MappingProxyType(
    {profile.name: profile for profile in (VLLM_0_26, VLLM_0_33, VLLM_0_34)}
)
DEFAULT_HASH_PROFILE = VLLM_0_34
"""The newest supported release's rules (kvpure's default vLLM version, 0.34)."""

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
MAX_HASH_LOOKAHEAD_TOKENS = 2**16
"""The largest ``num_hash_lookahead_tokens`` accepted (vLLM's is a drafter's few tokens)."""

MAX_HASH_BLOCK_SIZE = 2**20
"""The largest hash block size accepted; vLLM's block sizes are at most a few thousand."""


def get_hash_profile(name: str) -> VllmHashProfile:
    """The profile called ``name`` (``"vllm-0.26"``, ``"vllm-0.33"`` or ``"vllm-0.34"``)."""
    try:
        return HASH_PROFILES[name]
    except KeyError:
        raise UnknownHashProfileError(name=name, valid_names=tuple(HASH_PROFILES)) from None


def hash_profile_for_version(version: str) -> VllmHashProfile:
    """The profile of a vLLM release named as ``--vllm`` takes it (``"0.34"``, ``"0.34.0"``);
    an unknown one raises :class:`~kvpure.versions.UnknownVllmVersionError`."""
    return HASH_PROFILES[f"vllm-{normalize_vllm_version(version)}"]


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
    if not isinstance(profile, VllmHashProfile):
        raise FieldTypeError(
            field="profile", value=profile, reason="must be a VllmHashProfile (VLLM_0_26...)"
        )
    if entropy is not None and not isinstance(entropy, bytes):
        raise FieldTypeError(field="entropy", value=entropy, reason="must be bytes or None")
    raw = os.urandom(RANDOM_NONE_HASH_NUM_BYTES) if entropy is None else entropy
    if profile.random_none_hash_form is RandomNoneHashForm.RAW_BYTES:
        return BlockHash(raw)
    return none_hash_from_seed(algorithm, raw.hex())


def none_hash_seed_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """PYTHONHASHSEED from ``environ`` (default ``os.environ``): an edge helper."""
    if environ is not None and not isinstance(environ, Mapping):
        raise FieldTypeError(
            field="environ", value=environ, reason="must be a mapping (os.environ) or None"
        )
    source = os.environ if environ is None else environ
    seed = source.get("PYTHONHASHSEED")
    if seed is not None and not isinstance(seed, str):
        raise FieldTypeError(field="environ['PYTHONHASHSEED']", value=seed, reason="must be a str")
    return seed


@typed_init
@dataclass(frozen=True, slots=True, kw_only=True)
class HashScheme:
    """Algorithm, block size, NONE_HASH, vLLM profile and lookahead of a server's block hashes.

    ``num_hash_lookahead_tokens`` is vLLM's L (0.33+): a block ``[s, e)`` is hashed once
    the tokens up to ``e + L`` exist, and its extra keys are ``(E, t[e], ..., t[e+L-1])``
    with ``E`` the block's keys over ``[s, e + L)`` (see ``docs/hashing.md``). A server
    running EAGLE, EAGLE3 or MTP with prefix caching hashes with L = 1.
    """

    algorithm: HashAlgorithm
    """One of vLLM's four algorithms; a name (``"sha256"``) is turned into the member."""
    block_size: int
    none_hash: BlockHash
    profile: VllmHashProfile = DEFAULT_HASH_PROFILE
    num_hash_lookahead_tokens: int = 0

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
                field="profile",
                value=self.profile,
                reason="must be VLLM_0_26, VLLM_0_33 or VLLM_0_34",
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
        _check_lookahead(self.num_hash_lookahead_tokens, self.profile)

    @classmethod
    def from_seed(
        cls,
        *,
        algorithm: HashAlgorithm | str,
        block_size: int,
        seed: str | None,
        profile: VllmHashProfile = DEFAULT_HASH_PROFILE,
        random_none_hash: bool = False,
        num_hash_lookahead_tokens: int = 0,
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
        check_bool("random_none_hash", random_none_hash)
        _check_lookahead(num_hash_lookahead_tokens, profile)
        if seed is None:
            seed = profile.unseeded_none_hash_seed(algorithm)
        if seed is not None:
            none_hash = none_hash_from_seed(algorithm, seed)
        elif random_none_hash:
            none_hash = _random_none_hash(algorithm, profile)
        else:
            raise RandomNoneHashNotRequestedError(profile=profile.name, algorithm=algorithm)
        return cls(
            algorithm=algorithm,
            block_size=block_size,
            none_hash=none_hash,
            profile=profile,
            num_hash_lookahead_tokens=num_hash_lookahead_tokens,
        )

    @classmethod
    def from_prefix_hash_config(
        cls, config: Mapping[str, object], *, profile: VllmHashProfile = DEFAULT_HASH_PROFILE
    ) -> HashScheme:
        """The scheme of an engine's handshake: a mapping shaped as vLLM 0.34's
        ``PrefixHashConfig`` (``vllm/v1/engine/__init__.py``, sent to frontends in
        ``EngineCoreReadyResponse.prefix_hash_config``).

        Keys: ``hash_algo`` (``"sha256"``...), ``hash_block_size`` (tokens),
        ``none_hash`` (the digest as bytes or hex) and, optionally,
        ``num_lookahead_tokens`` (default 0). Any other key is refused naming it.
        """
        fields = read_prefix_hash_config(config)
        return cls(profile=profile, **fields)  # type: ignore[arg-type]  # checked in __post_init__


def read_prefix_hash_config(config: Mapping[str, object]) -> dict[str, object]:
    """The :class:`HashScheme` fields of a ``PrefixHashConfig`` mapping (checked for keys and
    kinds here; ranges are checked by the scheme)."""
    if not isinstance(config, Mapping):
        raise InvalidFieldError(
            field="prefix_hash_config",
            value=type(config).__name__,
            reason="must be a mapping with hash_algo, hash_block_size, none_hash "
            "and optionally num_lookahead_tokens",
        )
    for key in config:
        if key not in _PREFIX_HASH_CONFIG_KEYS:
            raise InvalidFieldError(
                field=f"prefix_hash_config.{key}",
                value=config[key],
                reason="unknown key; PrefixHashConfig has " + ", ".join(_PREFIX_HASH_CONFIG_KEYS),
            )
    for key in _PREFIX_HASH_CONFIG_KEYS[:3]:
        if key not in config:
            raise InvalidFieldError(
                field=f"prefix_hash_config.{key}", value=None, reason="is required"
            )
    none_hash = config["none_hash"]
    if type(none_hash) is str:
        try:
            none_hash = bytes.fromhex(none_hash)
        except ValueError:
            raise InvalidFieldError(
                field="prefix_hash_config.none_hash",
                value=none_hash,
                reason="must be the digest as bytes or as hex",
            ) from None
    elif isinstance(none_hash, bytes | bytearray | memoryview):
        none_hash = bytes(none_hash)
    else:
        raise InvalidFieldError(
            field="prefix_hash_config.none_hash",
            value=none_hash,
            reason="must be the digest as bytes or as hex",
        )
    algo = config["hash_algo"]
    if type(algo) is not str:
        raise InvalidFieldError(
            field="prefix_hash_config.hash_algo",
            value=algo,
            reason="must be an algorithm name (sha256, sha256_cbor, xxhash, xxhash_cbor)",
        )
    lookahead = config.get("num_lookahead_tokens", 0)
    for key, value in (
        ("hash_block_size", config["hash_block_size"]),
        ("num_lookahead_tokens", lookahead),
    ):
        if type(value) is not int:
            raise InvalidFieldError(
                field=f"prefix_hash_config.{key}", value=value, reason="must be an int (tokens)"
            )
    return {
        "algorithm": HashAlgorithm.from_name(algo),
        "block_size": config["hash_block_size"],
        "none_hash": none_hash,
        "num_hash_lookahead_tokens": lookahead,
    }


_PREFIX_HASH_CONFIG_KEYS = ("hash_algo", "hash_block_size", "none_hash", "num_lookahead_tokens")


def _check_lookahead(value: object, profile: VllmHashProfile) -> None:
    if type(value) is not int:
        raise InvalidFieldError(
            field="num_hash_lookahead_tokens", value=value, reason="must be an int (tokens)"
        )
    if value < 0 or value > MAX_HASH_LOOKAHEAD_TOKENS:
        raise InvalidFieldError(
            field="num_hash_lookahead_tokens",
            value=value,
            reason=f"must be between 0 and {MAX_HASH_LOOKAHEAD_TOKENS} tokens",
        )
    if value and not profile.lookahead_hashes:
        raise InvalidFieldError(
            field="num_hash_lookahead_tokens",
            value=value,
            reason=f"{profile.name} has no lookahead hashes (vLLM 0.33 added them); "
            "use VLLM_0_33 or VLLM_0_34, or 0",
        )


_random_none_hash = random_none_hash
