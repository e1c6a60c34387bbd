"""``hash_prompt``'s direct path for a prompt of token ids alone (``HashRequest.plain_prompt``).

A request with no LoRA, cache salt, multimodal item or embeddings hashes every block with
extra keys None, so ``hash_prompt`` goes straight to the chain. Each field that adds extra
keys (or text to check) must take the request off that path: the direct path must give
what the general path (the reference chain hasher, whose output the goldens check against
vLLM) gives, and refuse what it refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kvpure.errors import InvalidFieldError
from kvpure.hashing import (
    VLLM_0_26,
    VLLM_0_33,
    HashRequest,
    HashScheme,
    MultiModalFeature,
    PromptEmbeds,
    VllmHashProfile,
    accelerator,
    hash_prompt,
)
from kvpure.hashing.block_hasher import hash_token_blocks

PROMPT = tuple(range(100, 140))  # 40 tokens: 10 blocks of 4


def _scheme(algorithm: str = "sha256_cbor", profile: VllmHashProfile = VLLM_0_26) -> HashScheme:
    return HashScheme.from_seed(algorithm=algorithm, block_size=4, seed="0", profile=profile)


def _variants() -> dict[str, HashRequest]:
    return {
        "lora_name": HashRequest(prompt_token_ids=PROMPT, lora_name="adapter"),
        "lora_path": HashRequest(prompt_token_ids=PROMPT, lora_name="a", lora_path="/p"),
        "cache_salt": HashRequest(prompt_token_ids=PROMPT, cache_salt="salt"),
        "mm_features": HashRequest(
            prompt_token_ids=PROMPT,
            mm_features=(MultiModalFeature(identifier="img", offset=4, length=8),),
        ),
        "prompt_embeds": HashRequest(
            prompt_token_ids=PROMPT,
            prompt_embeds=PromptEmbeds(data=bytes(range(40)) * 4, row_size_bytes=4),
        ),
    }


def test_only_token_ids_alone_are_plain() -> None:
    assert HashRequest(prompt_token_ids=PROMPT).plain_prompt
    assert HashRequest(prompt_token_ids=()).plain_prompt
    for name, request in _variants().items():
        assert not request.plain_prompt, name
    assert not HashRequest(prompt_token_ids=PROMPT, lora_path="/p").plain_prompt
    assert not HashRequest(prompt_token_ids=(2**31,)).plain_prompt  # checked under 0.34
    embeds_only = HashRequest(
        prompt_token_ids=None, prompt_embeds=PromptEmbeds(data=bytes(8), row_size_bytes=4)
    )
    assert not embeds_only.plain_prompt


@pytest.mark.parametrize("extension", [True, False])
@pytest.mark.parametrize("algorithm", ["sha256_cbor", "xxhash_cbor", "sha256", "xxhash"])
@pytest.mark.parametrize("profile", [VLLM_0_26, VLLM_0_33], ids=["0.26", "0.33"])
def test_direct_path_equals_the_reference(
    extension: bool, algorithm: str, profile: VllmHashProfile
) -> None:
    accelerator.set_enabled(extension)
    try:
        scheme = _scheme(algorithm, profile)
        requests = {"plain": HashRequest(prompt_token_ids=PROMPT), **_variants()}
        got = {name: list(hash_prompt(scheme, r)) for name, r in requests.items()}
        for name, request in requests.items():
            reference = list(hash_prompt(scheme, request, chain_hasher=hash_token_blocks))
            assert got[name] == reference, name
            assert len(got[name]) == 10
        # each field that adds extra keys changes the hashes (so none took the direct path)
        assert all(got[name] != got["plain"] for name in _variants())
    finally:
        accelerator.set_enabled(True)


@pytest.mark.parametrize("tokens", [(), (1, 2, 3), (1, 2, 3, 4), (1, 2, 3, 4, 5)])
def test_short_prompts(tokens: tuple[int, ...]) -> None:
    scheme = _scheme()
    request = HashRequest(prompt_token_ids=tokens)
    got = hash_prompt(scheme, request)
    assert list(got) == list(hash_prompt(scheme, request, chain_hasher=hash_token_blocks))
    assert len(got) == len(tokens) // 4


def test_a_lone_surrogate_in_lora_path_is_refused_under_cbor() -> None:
    request = HashRequest(prompt_token_ids=PROMPT, lora_path="\ud800")
    with pytest.raises(InvalidFieldError) as caught:
        hash_prompt(_scheme("sha256_cbor"), request)
    assert caught.value.field == "lora_path"
    assert len(hash_prompt(_scheme("sha256"), request)) == 10


def test_a_chain_hasher_given_is_used_for_a_plain_prompt() -> None:
    calls: list[int] = []

    def recording(
        algo_name: str,
        parent: bytes,
        token_ids: Sequence[int],
        block_size: int,
        extra_keys: Sequence[tuple[object, ...] | None],
    ) -> list[bytes]:
        calls.append(len(extra_keys))
        return hash_token_blocks(algo_name, parent, token_ids, block_size, extra_keys)

    hash_prompt(_scheme(), HashRequest(prompt_token_ids=PROMPT), chain_hasher=recording)
    assert calls == [10]
