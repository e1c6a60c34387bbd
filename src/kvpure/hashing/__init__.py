"""vLLM-exact block hashing: hash types, the four hash functions, schemes and
profiles, request inputs, extra keys, prompt hashing and extension, and
block-size views. See the README's "Block hashing" section for examples.
"""

from __future__ import annotations

from kvpure.hashing.algorithms import (
    HASH_ALGORITHM_NAMES,
    PICKLE_PROTOCOL,
    HashAlgorithm,
    HashFunction,
    cbor_payload,
    get_hash_fn_by_name,
    pickle_payload,
    sha256,
    sha256_cbor,
    xxhash,
    xxhash_cbor,
)
from kvpure.hashing.block_hasher import (
    NO_BLOCK_HASHES,
    TokenBlockChainHasher,
    block_extra_keys,
    extend_block_hashes,
    hash_block_tokens,
    hash_prompt,
    hash_token_blocks,
)
from kvpure.hashing.block_size_view import (
    BlockHashList,
    BlockHashListWithBlockSize,
    resolve_block_hashes,
)
from kvpure.hashing.cbor import canonical_cbor_dumps
from kvpure.hashing.extra_keys import (
    ExtraKeys,
    extra_keys_for_blocks,
    generate_block_hash_extra_keys,
    lookahead_base_keys,
    lookahead_extra_keys_for_blocks,
    resume_mm_index,
    to_event_extra_keys,
    with_lookahead_tokens,
)
from kvpure.hashing.fast_prompt import fast_hash_token_blocks
from kvpure.hashing.frontend import (
    frontend_block_hashes,
    num_frontend_block_hashes,
    router_block_hashes,
    truncate_block_hashes,
)
from kvpure.hashing.request import HashRequest, MultiModalFeature, PromptEmbeds
from kvpure.hashing.request_state import RequestBlockHashes
from kvpure.hashing.scheme import (
    DEFAULT_HASH_PROFILE,
    HASH_PROFILES,
    VLLM_0_26,
    VLLM_0_33,
    VLLM_0_34,
    ExtraKeyStyle,
    HashScheme,
    MmResumeRule,
    RandomNoneHashForm,
    VllmHashProfile,
    get_hash_profile,
    hash_profile_for_version,
    none_hash_from_seed,
    none_hash_seed_from_environment,
    random_none_hash,
)
from kvpure.hashing.types import (
    BlockHash,
    BlockHashWithGroupId,
    ExternalBlockHash,
    get_block_hash,
    get_group_id,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
)

__all__ = [
    "lookahead_base_keys",
    "with_lookahead_tokens",
    "lookahead_extra_keys_for_blocks",
    "hash_profile_for_version",
    "truncate_block_hashes",
    "router_block_hashes",
    "num_frontend_block_hashes",
    "frontend_block_hashes",
    "DEFAULT_HASH_PROFILE",
    "HASH_ALGORITHM_NAMES",
    "NO_BLOCK_HASHES",
    "HASH_PROFILES",
    "PICKLE_PROTOCOL",
    "VLLM_0_26",
    "VLLM_0_33",
    "VLLM_0_34",
    "BlockHash",
    "BlockHashList",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "ExternalBlockHash",
    "ExtraKeyStyle",
    "ExtraKeys",
    "HashAlgorithm",
    "HashFunction",
    "HashRequest",
    "HashScheme",
    "MmResumeRule",
    "MultiModalFeature",
    "PromptEmbeds",
    "RandomNoneHashForm",
    "RequestBlockHashes",
    "TokenBlockChainHasher",
    "VllmHashProfile",
    "block_extra_keys",
    "canonical_cbor_dumps",
    "cbor_payload",
    "extend_block_hashes",
    "extra_keys_for_blocks",
    "fast_hash_token_blocks",
    "generate_block_hash_extra_keys",
    "get_block_hash",
    "get_group_id",
    "get_hash_fn_by_name",
    "get_hash_profile",
    "hash_block_tokens",
    "hash_prompt",
    "hash_token_blocks",
    "make_block_hash_with_group_id",
    "maybe_convert_block_hash",
    "none_hash_from_seed",
    "none_hash_seed_from_environment",
    "pickle_payload",
    "random_none_hash",
    "resolve_block_hashes",
    "resume_mm_index",
    "sha256",
    "sha256_cbor",
    "to_event_extra_keys",
    "xxhash",
    "xxhash_cbor",
]
